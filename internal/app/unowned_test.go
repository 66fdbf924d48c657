package app_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/cursor"
	"github.com/tidemarkhq/tidemark/internal/app"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/internal/slowdown"
	"github.com/tidemarkhq/tidemark/lease"
	"github.com/tidemarkhq/tidemark/poller"
)

// fleetGauge reads tidemark_fleet_source_unowned{source, reason} from a's
// registry: "source/reason" → value.
func fleetGauge(t *testing.T, a *app.App) map[string]float64 {
	t.Helper()
	fams, err := a.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "tidemark_fleet_source_unowned" {
			continue
		}
		for _, m := range f.GetMetric() {
			var src, reason string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "source":
					src = l.GetValue()
				case "reason":
					reason = l.GetValue()
				}
			}
			out[src+"/"+reason] = m.GetGauge().GetValue()
		}
	}
	return out
}

// TestUnownedSourceIsLoud (issue 25): a daemon runs alpha and beta; another
// live member has "orphan" configured and never takes it; the database has
// cursors of "gone", which no live member has configured. Within a
// heartbeat or two the metric names both, `cursors` says why nobody polls
// them, and the status page shows them red (Chromium); the daemon's own
// sources are not flagged. Retired, "gone" leaves the view and the metric.
func TestUnownedSourceIsLoud(t *testing.T) {
	t.Parallel()
	const beat = 200 * time.Millisecond
	u := pgtest.URL(t)
	cfg, err := config.Parse("status.yaml", []byte(statusConfig), func(k string) (string, bool) { return u, k == "DATABASE_URL" })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := app.Open(ctx, cfg, u, "v0.0.0-test", zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	if _, err := a.Pool.Exec(ctx, `INSERT INTO cursors (source, resource, high_water) VALUES ('gone', 'time_entries', now() - interval '1 day')`); err != nil {
		t.Fatal(err)
	}
	// The other member: live, with orphan configured, owning nothing.
	peer := lease.New(u)
	t.Cleanup(peer.Close)
	pm := lease.Member{ID: "zz-peer/1", Host: "zz-peer", PID: 1, Sources: map[string]string{"orphan": "f"}, ConfigAt: time.Now()}
	pctx, stopPeer := context.WithCancel(ctx)
	t.Cleanup(stopPeer)
	if _, err := peer.Heartbeat(ctx, pm, time.Minute); err != nil {
		t.Fatal(err)
	}
	go func() {
		for pctx.Err() == nil {
			_, _ = peer.Heartbeat(pctx, pm, time.Minute)
			time.Sleep(beat / 2)
		}
	}()

	a.Fleet = poller.FleetParams{Member: lease.Member{ID: "app-a/1", Host: "app-a", PID: 1}, Heartbeat: beat}
	srv, err := a.ServeOps("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	sigs, done, started := make(chan os.Signal, 1), make(chan error, 1), make(chan struct{})
	go func() { done <- a.RunDaemon(ctx, "", sigs, 3, func(*poller.Poller) { close(started) }) }()
	<-started
	t.Cleanup(func() { sigs <- syscall.SIGTERM; <-done })

	// The metric: within a heartbeat or two (a source must stay unowned
	// for one heartbeat to count).
	began := time.Now()
	for {
		g := fleetGauge(t, a)
		if g["orphan/no_owner"] == 1 && g["gone/not_served"] == 1 && len(g) == 2 {
			break
		}
		if time.Since(began) > slowdown.Scale(time.Minute) { // a safety net
			t.Fatalf("tidemark_fleet_source_unowned: %v", g)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("metric after %v (heartbeat %v)", time.Since(began).Round(time.Millisecond), beat)

	rows, err := a.CursorRows(ctx, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	why := map[string]string{}
	for _, r := range rows {
		why[r.Source] = r.Unserved
		if (r.Source == "alpha" || r.Source == "beta") && r.Owner != "app-a/1" {
			t.Errorf("%s/%s: owner %q, want app-a/1", r.Source, r.Resource, r.Owner)
		}
	}
	if why["orphan"] != app.NoOwner || why["gone"] != app.NotServed || why["alpha"] != "" || why["beta"] != "" {
		t.Fatalf("cursors: %v", why)
	}

	// The status page, in Chromium.
	bctx := browser(t)
	if err := chromedp.Do(bctx, chromedp.Navigate("http://"+srv.Addr+"/"), chromedp.WaitVisible(chromedp.CSS(`#source-gone`))); err != nil {
		t.Fatal(err)
	}
	for src, want := range map[string]string{"orphan": app.NoOwner, "gone": app.NotServed} {
		pill := run(t, bctx, chromedp.Evaluate[[]string](fmt.Sprintf(`(() => { const p = document.querySelector("#source-%s .pill"); return [p.textContent, p.className, getComputedStyle(p).backgroundColor + " " + getComputedStyle(p).color]; })()`, src)))
		if pill[0] != want || !strings.Contains(pill[1], "bad") {
			t.Errorf("%s: pill %q (class %q), want %q, red", src, pill[0], pill[1], want)
		}
		t.Logf("%s: %q, class %q, colours %s", src, pill[0], pill[1], pill[2])
	}
	if pill := run(t, bctx, chromedp.Text(chromedp.CSS(`#source-alpha .pill`))); strings.Contains(pill, "serve") {
		t.Errorf("alpha, owned here: pill %q", pill)
	}

	// Retired: gone leaves the view and the metric.
	if ok, err := cursor.New(a.Pool).Retire(ctx, "gone", "test"); err != nil || !ok {
		t.Fatalf("retire: %v %v", ok, err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if g := fleetGauge(t, a); g["gone/not_served"] == 0 && g["orphan/no_owner"] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after retire: %v", fleetGauge(t, a))
		}
	}
	rows, err = a.CursorRows(ctx, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Source == "gone" {
			t.Fatalf("retired source still listed: %+v", r)
		}
	}
}
