package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients/toggl/toggltest"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
)

// TestE2ETogglWorkspaceScopeConvergesUnderChurn: a daemon with a toggl
// source in `scope: workspace` follows the fake's detailed search (header
// paging, several users) through seconds of churn (creates, edits,
// back-dating, timers, deletions); once the churn stops the mirror equals
// the source: every user's entries at their latest versions and states, and
// the deleted ones tombstoned by their absence from the trailing window's
// complete listings (the search reports no deletions).
func TestE2ETogglWorkspaceScopeConvergesUnderChurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tg := toggltest.New(toggltest.Options{ReportPageCap: 40})
	t.Cleanup(tg.Close)
	ch := toggltest.NewChurn(tg, fakeapi.ChurnParams{Seed: 1031, Entries: 200, Days: 10})
	e.vars = append(e.vars, "TG_TOKEN="+tg.Token())
	cfg := e.writeProviderConfig(fmt.Sprintf(`  - name: tg
    kind: toggl
    base_url: %s
    workspace_id: "%d"
    token: ${TG_TOKEN}
    scope: workspace
    trailing_days: 12
    schedule: "@every 1s"
    overlap: 5s
    rate_limit: {requests: 1000, per: 1s}
    resources: [projects, time_entries]
`, tg.URL(), tg.WorkspaceID()))
	fs := &fakeSource{
		kind: "toggl", src: "tg", cfg: cfg,
		settle: func(t *testing.T) {},
	}
	togglViews(fs, tg)
	d := e.daemon(cfg)
	stop := runChurn(ch.Run)
	time.Sleep(5 * time.Second)
	e.settleConverged(fs, stop)
	if !d.running() {
		t.Fatal("the daemon exited")
	}
	counts := ch.Counts()
	t.Logf("churn: %+v", counts)
	var users, tombstones int
	if err := e.pool.QueryRow(context.Background(),
		"SELECT count(DISTINCT user_id) FILTER (WHERE deleted_at IS NULL), count(*) FILTER (WHERE deleted_at IS NOT NULL) FROM time_entries WHERE source = 'tg'").
		Scan(&users, &tombstones); err != nil {
		t.Fatal(err)
	}
	if users < 2 {
		t.Errorf("entries of %d users mirrored: want every user's", users)
	}
	if tombstones == 0 {
		t.Error("no tombstone: the churn's deletions were not seen")
	}
	if n := len(tg.ReportQueries()); n == 0 {
		t.Error("the detailed search was never asked")
	}
	for _, r := range tg.Requests() {
		if r.Path == "/me/time_entries" {
			t.Fatal("scope workspace asked /me/time_entries")
		}
	}
	noDuplicates(t, e.pool)
}
