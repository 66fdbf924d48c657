package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients/toggl/toggltest"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
)

// TestDoctorHoldsAgainstTheDaemon: what doctor predicts an hour costs is
// what a daemon sends, counted by the fake (issue 23, item 5). Schedules
// are scaled (every second instead of every minute or every 20 s) and the
// measured rate extrapolated to the hour.
func TestDoctorHoldsAgainstTheDaemon(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, block string
		// churn edits, moves and deletes entries meanwhile; atMost: the
		// count may be below the prediction (no churn, no search by id; or
		// churn whose moved entries are found by the first search, where the
		// planner counts a deleted entry's three).
		churn, atMost bool
	}{
		// Reported: reconcile "* * * * *" on Toggl free; scaled to every second.
		{"reconcile", "    scope: me\n    schedule: \"@every 1h\"\n    reconcile: {schedule: \"@every 1s\", lookback_days: 7}\n", false, false},
		// Reported: the workspace mode's incremental pass at "@every 20s".
		{"workspace-churn", "    scope: workspace\n    schedule: \"@every 1s\"\n", true, true},
		{"workspace", "    scope: workspace\n    schedule: \"@every 1s\"\n", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			// Few entries: one page per search, as the planner assumes.
			tg := toggltest.New(toggltest.Options{})
			t.Cleanup(tg.Close)
			e.vars = append(e.vars, "TG_TOKEN="+tg.Token())
			ch := toggltest.NewChurn(tg, fakeapi.ChurnParams{Seed: 23, Entries: 40, Days: 10})
			now := tg.Now().UTC()
			for i := int64(1); i <= 3; i++ {
				start := now.Add(-time.Duration(i) * 26 * time.Hour)
				stop := start.Add(time.Hour)
				notes := fmt.Sprint("entry ", i)
				tg.PutTimeEntry(toggltest.TimeEntry{ID: i, UserID: 7, Description: &notes, Start: start, Stop: &stop, Duration: 3600})
			}
			if c.churn {
				stop := runChurn(func(ctx context.Context, every time.Duration, n int) error {
					return ch.Run(ctx, 100*time.Millisecond, 1)
				})
				t.Cleanup(stop)
			}
			cfg := e.writeFile("toggl.yaml", fmt.Sprintf(`database_url: ${DATABASE_URL}
sources:
  - name: tg
    kind: toggl
    plan: free
    base_url: %s
    workspace_id: "%d"
    token: ${TG_TOKEN}
    rate_limit: {requests: 100, per: 1s}
    resources: [time_entries]
%s`, tg.URL(), tg.WorkspaceID(), c.block))
			out, errOut, code := e.cli("doctor", "--budget-only", "--config", cfg, "--json")
			var reps []struct {
				Peak    int    `json:"peak_hourly_requests"`
				Verdict string `json:"verdict"`
			}
			if err := json.Unmarshal([]byte(out), &reps); err != nil || len(reps) != 1 {
				t.Fatalf("doctor --json: exit %d, %v\n%s%s", code, err, out, errOut)
			}
			if reps[0].Verdict != "does not fit" {
				t.Fatalf("doctor says %q for a schedule of thousands of requests an hour on Toggl free", reps[0].Verdict)
			}
			d := e.daemon(cfg)
			// Warm-up: the start-up pass and the daily /me are behind us.
			waitUntil(t, "the daemon's first passes", func() bool { return tg.RequestCount() >= 4 })
			if c.churn && strings.Contains(c.block, "workspace") {
				// And the daily one: the first entry missing from a
				// listing has the workspace's earliest year learnt (about
				// 20 searches, once a day per process: issue 30, item 7).
				waitUntil(t, "a first entry tombstoned", func() bool {
					var n int
					_ = e.pool.QueryRow(context.Background(), `SELECT count(*) FROM time_entries WHERE deleted_at IS NOT NULL`).Scan(&n)
					return n > 0
				})
			}
			from := time.Now()
			n0 := tg.RequestCount()
			waitUntil(t, "a measured period", func() bool { return time.Since(from) >= 8*time.Second })
			n, took := tg.RequestCount()-n0, time.Since(from)
			d.signal(syscall.SIGTERM)
			d.wait(30 * time.Second)
			perHour := float64(n) * float64(time.Hour) / float64(took)
			var paths []string
			for _, r := range tg.Requests() {
				paths = append(paths, r.Method+" "+r.Path)
			}
			t.Logf("doctor predicts %d/h; the fake counted %d in %s: %.0f/h; %s", reps[0].Peak, n, took, perHour, strings.Join(paths[max(0, len(paths)-40):], ", "))
			// 25 %: a second's quantum in 8 s, and churn that misses a pass.
			if perHour > 1.25*float64(reps[0].Peak) || !c.atMost && perHour < 0.75*float64(reps[0].Peak) {
				t.Errorf("doctor predicts %d requests/h, the fake counted %.0f/h (%d in %s)", reps[0].Peak, perHour, n, took)
			}
		})
	}
}
