package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/toggl/toggltest"
	"github.com/tidemarkhq/tidemark/internal/app"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
)

// TestReconcileThroughTheAppLooksUpBeforeTombstoning (issue 30, item 1, the
// review's scenario): a Toggl `scope: workspace` entry moved 200 days
// forward, reconciled by a fresh process through app.Open, stays live on its
// new day and the change feed never says it was deleted; an entry really
// deleted is tombstoned.
func TestReconcileThroughTheAppLooksUpBeforeTombstoning(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := fakeapi.NewClock(time.Now().UTC())
	f := toggltest.New(toggltest.Options{Clock: clock.Now})
	t.Cleanup(f.Close)
	u := pgtest.URL(t)
	yaml := togglWorkspaceYAML(f)
	today := clients.DateOf(clock.Now())
	put := func(id int64, day clients.Date) {
		start := day.Time().Add(12 * time.Hour)
		stop := start.Add(30 * time.Minute)
		f.PutTimeEntry(toggltest.TimeEntry{ID: id, UserID: 11, ProjectID: 77, Start: start, Stop: &stop, Duration: 1800})
	}
	reconcile := func() { reconcileFresh(t, u, yaml, "acme") }
	put(1, today.AddDays(-2))
	put(2, today.AddDays(-3))
	put(3, today.AddDays(-4))
	reconcile()
	clock.Advance(time.Hour)    // past the overlap: the rows are old enough to judge
	moved := today.AddDays(200) // far past the reconcile's window
	put(1, moved)
	back := today.AddDays(-400) // more than a year back (issue 30, item 7)
	put(3, back)
	f.Delete(clients.TimeEntries, 2)
	clock.Advance(time.Hour)
	reconcile()

	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var day time.Time
	var deleted1, deleted2 *time.Time
	var feed1, feed2 int
	if err := pool.QueryRow(ctx, `SELECT
		(SELECT spent_date FROM time_entries WHERE source = 'acme' AND id = '1'),
		(SELECT deleted_at FROM time_entries WHERE source = 'acme' AND id = '1'),
		(SELECT deleted_at FROM time_entries WHERE source = 'acme' AND id = '2'),
		(SELECT count(*) FROM events WHERE source = 'acme' AND kind = 'deleted' AND record_id = '1'),
		(SELECT count(*) FROM events WHERE source = 'acme' AND kind = 'deleted' AND record_id = '2')`).
		Scan(&day, &deleted1, &deleted2, &feed1, &feed2); err != nil {
		t.Fatal(err)
	}
	if deleted1 != nil || clients.DateOf(day) != moved {
		t.Errorf("moved entry 1: spent %s, deleted_at %v: want it live on %s", clients.DateOf(day), deleted1, moved)
	}
	if feed1 != 0 {
		t.Errorf("the change feed says moved entry 1 was deleted (%d events)", feed1)
	}
	if deleted2 == nil || feed2 != 1 {
		t.Errorf("deleted entry 2: deleted_at %v, %d deleted events: want a tombstone and one event", deleted2, feed2)
	}
	var deleted3 *time.Time
	if err := pool.QueryRow(ctx, `SELECT spent_date, deleted_at FROM time_entries WHERE source = 'acme' AND id = '3'`).Scan(&day, &deleted3); err != nil {
		t.Fatal(err)
	}
	if deleted3 != nil || clients.DateOf(day) != back {
		t.Errorf("entry 3 moved 400 days back: spent %s, deleted_at %v: want it live on %s", clients.DateOf(day), deleted3, back)
	}
}

// reconcileFresh runs one reconcile of source's time entries in a fresh
// process: its own App on the config yaml, its own clients, nothing
// remembered of earlier listings.
func reconcileFresh(t *testing.T, u, yaml, source string) {
	t.Helper()
	ctx := context.Background()
	cfg, err := config.Parse(source+".yaml", []byte(yaml), func(k string) (string, bool) { return u, k == "DATABASE_URL" })
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.Open(ctx, cfg, u, "v0.0.0-test", zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	p, err := a.Poller(ctx, source)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Reconcile(ctx, source, clients.TimeEntries); err != nil {
		t.Fatal(err)
	}
}

// togglWorkspaceYAML is a config of source acme, Toggl in workspace scope
// on f, with the change feed on.
func togglWorkspaceYAML(f *toggltest.Server) string {
	return fmt.Sprintf(`
database_url: ${DATABASE_URL}
sources:
  - name: acme
    kind: toggl
    base_url: %s
    token: %s
    workspace_id: "%d"
    scope: workspace
    events: on
    resources: [time_entries]
    rate_limit: {requests: 1000, per: 1s}
    reconcile: {schedule: "0 3 * * *", lookback_days: 14}
`, f.URL(), f.Token(), f.WorkspaceID())
}
