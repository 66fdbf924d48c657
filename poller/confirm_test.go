package poller_test

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

// Issue 23, item 2: a reconcile by a process that has not listed the
// window before (a restart, a new owner) finds stored rows the listing did
// not return. A Toggl workspace source is asked for them by id first: an
// entry moved far forward, out of the window, stays live with its new day;
// an entry really deleted is tombstoned.
func TestReconcileConfirmsAbsentIDsWithAFreshClient(t *testing.T) {
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
	put(1, today.AddDays(-2))
	put(2, today.AddDays(-3))
	// Each process builds its own client: nothing remembered of earlier
	// listings.
	fresh := func() *poller.Poller {
		c, err := toggl.New(toggl.Params{
			Base: provider.Base{Name: "acme", BaseURL: f.URL(), Token: f.Token(),
				RateLimit: httpx.RateLimit{Requests: 1000, Per: time.Second},
				Env:       provider.Env{Version: "test", Logger: zerolog.New(zerolog.NewTestWriter(t))}},
			WorkspaceID: f.WorkspaceID(), Scope: toggl.ScopeWorkspace,
		})
		if err != nil {
			t.Fatal(err)
		}
		return newPoller(t, poller.Params{Pool: pool, Logger: zerolog.New(zerolog.NewTestWriter(t)),
			Sources: []poller.Source{{Source: c, LookbackDays: 14, MaxTombstones: 100}}})
	}
	reconcile(t, fresh(), clients.TimeEntries)
	clock.Advance(time.Hour)    // past the overlap: the rows are old enough to judge
	moved := today.AddDays(200) // far past the reconcile's window (today+7)
	put(1, moved)
	f.Delete(clients.TimeEntries, 2)
	clock.Advance(time.Hour)
	reconcile(t, fresh(), clients.TimeEntries)

	var day time.Time
	var deleted *time.Time
	if err := pool.QueryRow(ctx, `SELECT spent_date, deleted_at FROM time_entries WHERE source = 'acme' AND id = '1'`).Scan(&day, &deleted); err != nil {
		t.Fatal(err)
	}
	if deleted != nil || clients.DateOf(day) != moved {
		t.Errorf("moved entry 1: spent %s, deleted_at %v: want it live on %s", clients.DateOf(day), deleted, moved)
	}
	if err := pool.QueryRow(ctx, `SELECT deleted_at FROM time_entries WHERE source = 'acme' AND id = '2'`).Scan(&deleted); err != nil {
		t.Fatal(err)
	}
	if deleted == nil {
		t.Error("deleted entry 2 is still live after the reconcile")
	}
}
