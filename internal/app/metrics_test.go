package app_test

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/internal/app"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/poller"
)

// /metrics has the Go runtime's and the process's series, and a daemon
// over a simulated source (the demo's) exports its schedule gauge as
// `tidemark run` does for any source (issue 26, 9).
func TestMetricsHaveRuntimeSeriesAndTheDemosSchedule(t *testing.T) {
	t.Parallel()
	u := pgtest.URL(t)
	cfg, err := config.Parse("sim.yaml", []byte(`
database_url: ${DATABASE_URL}
sources:
  - name: sim
    kind: simulated
    simulated: {seed: 3, users: 2, days: 10, mutations_per_tick: 1, every: 1s}
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
	sigs := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() { done <- a.RunDaemon(context.Background(), "", sigs, 3, func(*poller.Poller) {}) }()
	defer func() { sigs <- syscall.SIGTERM; <-done }()

	want := map[string]bool{"go_goroutines": false, "process_resident_memory_bytes": false, "tidemark_schedule_interval_seconds": false}
	deadline := time.Now().Add(30 * time.Second)
	for {
		fams, err := a.Metrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		missing := 0
		for _, f := range fams {
			if _, ok := want[f.GetName()]; ok && len(f.GetMetric()) > 0 {
				want[f.GetName()] = true
			}
		}
		for _, ok := range want {
			if !ok {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("series present after 30 s: %v", want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
