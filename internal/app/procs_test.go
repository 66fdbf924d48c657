package app_test

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/internal/app"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/internal/procs"
)

// An idle daemon runs on one P, as /metrics shows
// (go_sched_gomaxprocs_threads), and gives the default back when it stops.
// Not parallel: the P count is the whole test binary's.
func TestIdleDaemonRunsOnOneP(t *testing.T) {
	def := runtime.GOMAXPROCS(0)
	if def <= 1 || os.Getenv("GOMAXPROCS") != "" {
		t.Skip("one P already, or GOMAXPROCS set: nothing to govern")
	}
	a, stop := daemonWith(t, pgtest.URL(t), `
database_url: ${DATABASE_URL}
sources:
  - name: sim
    kind: simulated
    simulated: {seed: 3, users: 2, days: 10}
    schedule: "@every 10s"
    resources: [clients]
`, "procs", 5*time.Second, func(a *app.App) {
		// Quick, and lenient with a busy machine: an idle daemon in this
		// binary uses far less than half a core.
		a.Procs = procs.Policy{Every: 50 * time.Millisecond, Up: 0.9, UpFor: time.Second, Down: 0.5, Settle: 300 * time.Millisecond}
	})
	waitFor(t, func() string {
		return fmt.Sprintf("idle daemon: go_sched_gomaxprocs_threads = %v, want 1", gauge(t, a, "go_sched_gomaxprocs_threads"))
	}, func() bool { return gauge(t, a, "go_sched_gomaxprocs_threads") == 1 })
	stop()
	if n := runtime.GOMAXPROCS(0); n != def {
		t.Fatalf("after the daemon stopped: %d Ps, want the default %d", n, def)
	}
}

// gauge reads one unlabelled gauge from the app's registry (-1: absent).
func gauge(t *testing.T, a *app.App, name string) float64 {
	t.Helper()
	fams, err := a.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name && len(f.GetMetric()) > 0 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}
