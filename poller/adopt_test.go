package poller_test

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/poller"
)

// While a newly owned source's clean-up (adopt) waits on the database,
// the other sources are still scheduled: adopt's statements run outside
// the daemon's mutex (issue 23, item 12).
func TestDaemonSchedulesOthersWhileAdoptWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.DB(t)
	// A run left running by a dead owner of "a", its row locked here: the
	// new owner's AbandonRuns waits on it.
	if _, err := pool.Exec(ctx, `INSERT INTO sync_runs (run_id, source, resource, kind, status, started_at)
		VALUES ('dead', 'a', 'time_entries', 'incremental', 'running', now() - interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `SELECT 1 FROM sync_runs WHERE run_id = 'dead' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	a, b := newFakeSource("a", time.Now()), newFakeSource("b", time.Now())
	a.put(1, today(), "a")
	b.put(1, today(), "b")
	p := newPoller(t, poller.Params{Pool: pool, Sources: []poller.Source{{Source: a}, {Source: b}}, Logger: zerolog.New(zerolog.NewTestWriter(t))})
	d, err := poller.NewDaemon(p, config.CronParser, []poller.Schedule{
		{Source: "a", Incremental: "@every 1h"}, {Source: "b", Incremental: "@every 1s"}})
	if err != nil {
		t.Fatal(err)
	}
	d.Start(ctx, true)
	t.Cleanup(func() { _ = d.Stop(context.Background()) })

	waiting := func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE NOT l.granted AND a.datname = current_database()`).Scan(&n)
		return err == nil && n > 0
	}
	waitFor(t, 30*time.Second, waiting, "the new owner of a to wait on the locked run")
	since := time.Now()
	waitFor(t, 30*time.Second, func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM sync_runs WHERE source = 'b' AND status = 'ok' AND started_at > $1`, since).Scan(&n)
		return err == nil && n > 0
	}, "a pass of b that started after a's clean-up began waiting")
	if !waiting() {
		t.Fatal("b's pass ran only once a's clean-up had stopped waiting: the daemon's scheduling was stalled by it")
	}
}
