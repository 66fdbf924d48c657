package toggl_test

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/provider"
	"github.com/tidemarkhq/tidemark/clients/toggl"
	"github.com/tidemarkhq/tidemark/clients/toggl/toggltest"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/poller"
)

// Issue 30, item 7: in workspace scope a reconcile looks up by id the
// stored entries its listing did not return, and "not found" must mean
// looked for wherever the Reports API can find them. Entries moved 400
// days and 15 years back are rewritten with their new day; one really
// deleted is tombstoned; no search asks for a date before 2006, which the
// API refuses.
func TestReconcileFindsAnEntryMovedBackYears(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := fakeapi.NewClock(time.Now().UTC())
	f := toggltest.New(toggltest.Options{Clock: clock.Now})
	t.Cleanup(f.Close)
	pool := pgtest.DB(t)
	today := clients.DateOf(clock.Now())
	put := func(id int64, day clients.Date) {
		start := day.Time().Add(12 * time.Hour)
		stop := start.Add(30 * time.Minute)
		f.PutTimeEntry(toggltest.TimeEntry{ID: id, UserID: 11, ProjectID: 77, Start: start, Stop: &stop, Duration: 1800})
	}
	for id := int64(1); id <= 3; id++ {
		put(id, today.AddDays(-int(id)))
	}
	// A fresh client each pass: nothing remembered of earlier listings.
	reconcile := func() {
		t.Helper()
		c, err := toggl.New(toggl.Params{
			Base: provider.Base{Name: "acme", BaseURL: f.URL(), Token: f.Token(),
				RateLimit: httpx.RateLimit{Requests: 1000, Per: time.Second},
				Env:       provider.Env{Version: "test", Logger: zerolog.New(zerolog.NewTestWriter(t))}},
			WorkspaceID: f.WorkspaceID(), Scope: toggl.ScopeWorkspace,
		})
		if err != nil {
			t.Fatal(err)
		}
		p, err := poller.New(poller.Params{Pool: pool, Logger: zerolog.New(zerolog.NewTestWriter(t)),
			Sources: []poller.Source{{Source: c, LookbackDays: 14, MaxTombstones: 100}}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if _, err := p.Reconcile(ctx, "acme", clients.TimeEntries); err != nil {
			t.Fatal(err)
		}
	}
	reconcile()
	clock.Advance(time.Hour) // past the overlap: the rows are old enough to judge
	moved := map[string]clients.Date{"1": today.AddDays(-400), "2": today.AddDays(-15 * 365)}
	put(1, moved["1"])
	put(2, moved["2"])
	f.Delete(clients.TimeEntries, 3)
	clock.Advance(time.Hour)
	reconcile()

	for id, want := range moved {
		var day time.Time
		var deleted *time.Time
		if err := pool.QueryRow(ctx, `SELECT spent_date, deleted_at FROM time_entries WHERE source = 'acme' AND id = $1`, id).Scan(&day, &deleted); err != nil {
			t.Fatal(err)
		}
		if deleted != nil || clients.DateOf(day) != want {
			t.Errorf("entry %s moved back to %s: spent %s, deleted_at %v; want it live on its new day", id, want, clients.DateOf(day), deleted)
		}
	}
	var deleted *time.Time
	if err := pool.QueryRow(ctx, `SELECT deleted_at FROM time_entries WHERE source = 'acme' AND id = '3'`).Scan(&deleted); err != nil {
		t.Fatal(err)
	}
	if deleted == nil {
		t.Error("deleted entry 3 is still live after the reconcile")
	}
	for _, q := range f.ReportQueries() {
		if q.StartDate < "2006-01-01" {
			t.Errorf("a search asked from %s, before the Reports API's first date", q.StartDate)
		}
	}
}
