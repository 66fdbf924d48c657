package app_test

import (
	"context"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/internal/app"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/internal/procs"
	"github.com/tidemarkhq/tidemark/poller"
)

// An idle daemon runs on one P, as /metrics shows
// (go_sched_gomaxprocs_threads), and gives the default back when it stops.
// Not parallel: the P count is the whole test binary's.
func TestIdleDaemonRunsOnOneP(t *testing.T) {
	def := runtime.GOMAXPROCS(0)
	if def <= 1 || os.Getenv("GOMAXPROCS") != "" {
		t.Skip("one P already, or GOMAXPROCS set: nothing to govern")
	}
	u := pgtest.URL(t)
	cfg, err := config.Parse("sim.yaml", []byte(`
database_url: ${DATABASE_URL}
sources:
  - name: sim
    kind: simulated
    simulated: {seed: 3, users: 2, days: 10}
    schedule: "@every 10s"
    resources: [clients]
`), func(k string) (string, bool) { return u, k == "DATABASE_URL" })
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.Open(context.Background(), cfg, u, "test", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// Quick, and lenient with a busy machine: an idle daemon in this
	// binary uses far less than half a core.
	a.Procs = procs.Policy{Every: 50 * time.Millisecond, Up: 0.9, UpFor: time.Second, Down: 0.5, Settle: 300 * time.Millisecond}
	sigs := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() { done <- a.RunDaemon(context.Background(), "", sigs, 3, func(*poller.Poller) {}) }()
	stopped := false
	defer func() {
		if !stopped {
			sigs <- syscall.SIGTERM
			<-done
		}
	}()

	deadline := time.Now().Add(60 * time.Second)
	for gauge(t, a, "go_sched_gomaxprocs_threads") != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("idle daemon: go_sched_gomaxprocs_threads = %v after 60 s, want 1", gauge(t, a, "go_sched_gomaxprocs_threads"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	sigs <- syscall.SIGTERM
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	stopped = true
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
