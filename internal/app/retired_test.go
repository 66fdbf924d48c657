package app_test

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/cursor"
	"github.com/tidemarkhq/tidemark/internal/app"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/internal/slowdown"
	"github.com/tidemarkhq/tidemark/lease"
	"github.com/tidemarkhq/tidemark/poller"
)

// daemonOf runs a daemon of yaml as fleet member id (heartbeat beat) on
// database u; stop ends it (SIGTERM) and waits.
func daemonOf(t *testing.T, u, yaml, id string, beat time.Duration) (a *app.App, stop func()) {
	t.Helper()
	return daemonWith(t, u, yaml, id, beat, nil)
}

// daemonWith is daemonOf with set, when not nil, called on the app before
// its daemon starts.
func daemonWith(t *testing.T, u, yaml, id string, beat time.Duration, set func(*app.App)) (a *app.App, stop func()) {
	t.Helper()
	cfg, err := config.Parse(id+".yaml", []byte(yaml), func(k string) (string, bool) { return u, k == "DATABASE_URL" })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err = app.Open(ctx, cfg, u, "v0.0.0-test", zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel))
	if err != nil {
		t.Fatal(err)
	}
	a.Fleet = poller.FleetParams{Member: lease.Member{ID: id, Host: id, PID: 1}, Heartbeat: beat}
	if set != nil {
		set(a)
	}
	sigs, done, started := make(chan os.Signal, 1), make(chan error, 1), make(chan struct{})
	go func() { done <- a.RunDaemon(ctx, "", sigs, 3, func(*poller.Poller) { close(started) }) }()
	<-started
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			sigs <- syscall.SIGTERM
			<-done
			a.Close()
		}
	}
	t.Cleanup(stop)
	return a, stop
}

// waitFor polls cond until it holds, or fails with what() after a scaled
// safety net.
func waitFor(t *testing.T, what func() string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(slowdown.Scale(time.Minute)); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal(what())
		}
	}
}

// A retired source configured again shows again, and dropped again it is
// loud again (issue 30, 5): `cursor retire` once must not mute the one
// failure the not-served metric and badge exist for, for ever.
func TestRetiredSourceConfiguredAgainIsWatchedAgain(t *testing.T) {
	t.Parallel()
	const beat = 200 * time.Millisecond
	u := pgtest.URL(t)
	ctx := context.Background()
	a, _ := daemonOf(t, u, statusConfig, "app-a/1", beat)
	if _, err := a.Pool.Exec(ctx, `INSERT INTO cursors (source, resource, high_water) VALUES ('gone', 'clients', now() - interval '1 day')`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() string { return "gone never counted as not served" }, func() bool { return fleetGauge(t, a)["gone/not_served"] == 1 })
	if ok, err := cursor.New(a.Pool).Retire(ctx, "gone", "test"); err != nil || !ok {
		t.Fatalf("retire: %v %v", ok, err)
	}
	waitFor(t, func() string { return "retired, gone still counted" }, func() bool { return fleetGauge(t, a)["gone/not_served"] == 0 })

	// Configured again on another replica, and polled there.
	_, stopB := daemonOf(t, u, `
database_url: ${DATABASE_URL}
sources:
  - name: gone
    kind: simulated
    simulated: {seed: 3, users: 2, days: 5, mutations_per_tick: 1, every: 1s}
    schedule: "@every 1h"
    resources: [clients]
`, "app-b/1", beat)
	listed := func() string {
		rows, err := a.CursorRows(ctx, "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.Source == "gone" {
				return r.Unserved + "|" + r.LastRunStatus
			}
		}
		return "absent"
	}
	waitFor(t, func() string { return "configured again: gone is " + listed() }, func() bool { return listed() == "|ok" })

	// Dropped again: not served, in the metric and in `cursors`.
	stopB()
	waitFor(t, func() string { return "dropped again: gone is " + listed() }, func() bool { return listed() == app.NotServed+"|ok" })
	waitFor(t, func() string { return "dropped again, the metric stays silent" }, func() bool { return fleetGauge(t, a)["gone/not_served"] == 1 })
}
