package poller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/poller"
)

// A daemon writes the idle runs of all its sources together, a few
// statements a second, not one a source and tick; every run is written,
// the last ones when it stops.
func TestDaemonGathersIdleRuns(t *testing.T) {
	t.Parallel()
	const n = 12
	pool := pgtest.DB(t)
	var srcs []poller.Source
	var scheds []poller.Schedule
	for i := range n {
		src := newFakeSource(fmt.Sprintf("s%02d", i), t0)
		src.put(1, today(), "x")
		srcs = append(srcs, poller.Source{Source: src, Overlap: time.Minute})
		scheds = append(scheds, poller.Schedule{Source: src.name, Incremental: "@every 1s"})
	}
	p := newPoller(t, poller.Params{Pool: pool, Sources: srcs, Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)})
	d, err := poller.NewDaemon(p, config.CronParser, scheds)
	if err != nil {
		t.Fatal(err)
	}
	// The rows one statement writes share its transaction id (xmin).
	var runs, statements, sources int
	count := func() {
		t.Helper()
		if err := pool.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT xmin::text), count(DISTINCT source)
			FROM sync_runs WHERE kind = 'incremental' AND status = 'ok' AND pages > 0
			AND inserted = 0 AND updated = 0`).Scan(&runs, &statements, &sources); err != nil {
			t.Fatal(err)
		}
	}
	d.Start(context.Background(), true)
	// Two idle ticks of every source (3.5 s on a quiet machine): waited
	// for, not slept, so that a busy machine's slower ticks pass too.
	waitFor(t, 30*time.Second, func() bool {
		count()
		return sources == n && runs >= 2*n
	}, fmt.Sprintf("two idle runs of each of the %d sources", n))
	if err := d.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	count()
	if statements*3 > runs {
		t.Errorf("%d idle runs written by %d statements: want them gathered across sources", runs, statements)
	}
}
