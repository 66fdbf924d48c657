package poller_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/cursor"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/poller"
)

func TestDaemonSkipsTicksWhilePassRunsAndStopsPromptly(t *testing.T) {
	t.Parallel()
	src := newFakeSource("acme", t0)
	src.put(1, day, "a")
	block := make(chan struct{})
	var blocked sync.Once
	src.onPage = func(clients.Window, int) {
		blocked.Do(func() { <-block })
	}
	var logs syncBuffer
	p := newPoller(t, poller.Params{Pool: pgtest.DB(t), Sources: []poller.Source{{Source: src}}, Logger: zerolog.New(&logs)})
	d := startDaemon(t, p, poller.Schedule{Source: "acme", Incremental: "@every 1s"})
	waitForLog(t, &logs, 10*time.Second, "still running; skipping")
	close(block)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("stop took %v", took)
	}
	if !strings.Contains(logs.String(), `"source":"acme"`) {
		t.Fatal("log lines lack the source")
	}
}

func TestDaemonBacksOffAfterFailureAndRecovers(t *testing.T) {
	t.Parallel()
	src := newFakeSource("acme", t0)
	src.put(1, day, "a")
	src.failPage = 1
	var logs syncBuffer
	p := newPoller(t, poller.Params{Pool: pgtest.DB(t), Sources: []poller.Source{{Source: src}}, Logger: zerolog.New(&logs)})
	startDaemon(t, p, poller.Schedule{Source: "acme", Incremental: "@every 1s"})
	waitForLog(t, &logs, 10*time.Second, "backing off after failures")
	if !strings.Contains(logs.String(), `"level":"error"`) || !strings.Contains(logs.String(), "pass failed") {
		t.Fatalf("failure not reported:\n%s", logs.String())
	}
}

func TestDaemonOwnsItsSourcesAndRunsQueuedBackfills(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, from := daily(9, "x"), backfillFrom
	pool := pgtest.DB(t)
	var logs syncBuffer
	p := newPoller(t, poller.Params{Pool: pool, Sources: []poller.Source{{Source: src, WindowDays: 3}}, Logger: zerolog.New(&logs)})
	startDaemon(t, p, poller.Schedule{Source: "acme", Incremental: "@every 1h"})

	// Another process (the CLI) sees the source owned, and queues instead.
	other := newPoller(t, poller.Params{Pool: pool, Sources: []poller.Source{{Source: src}}, Logger: zerolog.Nop()})
	waitForLog(t, &logs, 10*time.Second, "this daemon now owns the source")
	if _, err := other.TakeOwnership(ctx, "acme"); !errors.Is(err, poller.ErrBusy) {
		t.Fatalf("another process took the owned source: %v", err)
	}
	q, err := other.Store().QueueBackfill(ctx, cursor.BackfillParams{Source: "acme", Resource: "time_entries",
		From: from, To: from.AddDays(8), WindowDays: 3})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, func() bool {
		b, err := other.Store().Backfill(ctx, q.ID)
		return err == nil && b.Status == cursor.BackfillDone && b.WindowsDone == 3
	}, "the daemon to run the queued backfill")
}

// A reconcile tick that comes while an incremental pass runs is not
// dropped: it runs right after (daily reconciles coincide with ticks).
func TestDaemonRunsACoincidingReconcileAfterThePass(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := newFakeSource("acme", t0)
	src.put(1, clients.DateOf(time.Now().UTC()), "a")
	block := make(chan struct{})
	var once sync.Once
	src.onPage = func(w clients.Window, _ int) {
		if !w.ByDate() {
			once.Do(func() { <-block })
		}
	}
	pool := pgtest.DB(t)
	var logs syncBuffer
	p := newPoller(t, poller.Params{Pool: pool, Sources: []poller.Source{{Source: src}}, Logger: zerolog.New(&logs)})
	startDaemon(t, p, poller.Schedule{Source: "acme", Incremental: "@every 1h", Reconcile: "@every 1s"})
	waitForLog(t, &logs, 10*time.Second, "the reconcile follows it")
	close(block)
	waitFor(t, 10*time.Second, func() bool {
		var n int
		_ = pool.QueryRow(ctx, `SELECT count(*) FROM sync_runs WHERE kind = 'reconcile' AND status = 'ok'`).Scan(&n)
		return n > 0
	}, "the reconcile to run after the pass")
}

// A backfill stops when its leases are gone (the lease connection dropped):
// a new owner elsewhere must not share the source's budget with it.
func TestBackfillStopsWhenItsLeaseIsLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, from := daily(9, "x"), backfillFrom
	pool := pgtest.DB(t)
	p := newPoller(t, poller.Params{Pool: pool, Sources: []poller.Source{{Source: src, WindowDays: 3}}, Logger: zerolog.Nop()})
	var windows int
	src.onPage = func(w clients.Window, page int) {
		if page == 1 {
			windows++
			if windows == 1 {
				// Cut the session holding the advisory locks, as a
				// Postgres restart or a network cut would.
				_, _ = pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`)
			}
		}
	}
	_, err := p.Backfill(ctx, poller.BackfillParams{Source: "acme", Resource: clients.TimeEntries, From: from, To: from.AddDays(8)})
	if !errors.Is(err, poller.ErrLeaseLost) {
		t.Fatalf("backfill after the lease connection dropped: %v, want ErrLeaseLost", err)
	}
	if windows != 1 {
		t.Fatalf("%d windows listed after the lease was lost", windows-1)
	}
}
