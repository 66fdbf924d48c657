package poller_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/internal/pgcluster"
	"github.com/tidemarkhq/tidemark/migrations"
	"github.com/tidemarkhq/tidemark/poller"
)

// TestDaemonSurvivesPostgresRestart runs the daemon against a private
// cluster, restarts the server under it, and checks that passes fail while
// it is down, and that the daemon recovers by itself afterwards (pool and
// lease connection reconnect) and the mirror converges.
func TestDaemonSurvivesPostgresRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own PostgreSQL cluster")
	}
	if os.Getenv("DATABASE_URL") != "" {
		t.Skip("needs a private cluster it can restart; DATABASE_URL points at a shared server")
	}
	t.Parallel()
	ctx := context.Background()
	cl, err := pgcluster.Start(ctx, pgcluster.Options{InMemory: true})
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	t.Cleanup(func() { _ = cl.Stop() })
	url := cl.URL("postgres")
	if _, err := migrations.Up(ctx, url); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	src := newFakeSource("acme", t0)
	src.put(1, day, "a")
	var logs syncBuffer
	p := newPoller(t, poller.Params{Pool: pool, Sources: []poller.Source{{Source: src}}, Logger: zerolog.New(&logs)})
	// A sub-second schedule: the restart must be seen by at least one tick.
	startDaemon(t, p, poller.Schedule{Source: "acme", Incremental: "@every 1s"})
	waitFor(t, 10*time.Second, func() bool { return len(mirror(t, pool, "acme")) == 1 }, "first pass")

	if err := cl.Restart(ctx, 2500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	src.tick(time.Minute)
	src.put(2, day, "after restart")
	// Back-off after a failure is 15 s at first; allow for it.
	waitFor(t, 40*time.Second, func() bool {
		m := mirror(t, pool, "acme")
		return len(m) == 2
	}, "convergence after the restart")
	assertConverged(t, pool, src)
	if !strings.Contains(logs.String(), "pass failed") {
		t.Log("no pass failed while the server was down (it restarted between ticks)")
	}
}
