package poller_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
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

// confirmingSource is a fake source that looks ids up wherever they are
// (clients.Confirmer), or fails with err.
type confirmingSource struct {
	*fakeSource
	pool  *pgxpool.Pool
	err   error
	asked []string
	held  int // sessions idle in a transaction while Confirm ran
}

func (c *confirmingSource) Confirm(ctx context.Context, r clients.Resource, w clients.Window, ids []string, fn func(context.Context, clients.Page) error) error {
	c.asked = append(c.asked, ids...)
	var n int
	if err := c.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&n); err != nil {
		return err
	}
	c.held = max(c.held, n)
	if c.err != nil {
		return c.err
	}
	f := c.fakeSource
	f.mu.Lock()
	var recs []clients.Record
	for _, id := range ids {
		if rec, ok := f.recs[id]; ok {
			recs = append(recs, f.record(rec, time.Now()))
		}
	}
	now := f.now
	f.mu.Unlock()
	return fn(ctx, clients.Page{Resource: r, Number: 1, SourceTime: now, Records: recs})
}

// The lookup by id decides what a reconcile tombstones: found rows are
// rewritten (with their new day) and kept, and no transaction is open
// while the source is asked (guarantee 10); when it
// fails, the reconcile fails and tombstones nothing (guarantee 9); a source
// that cannot look the resource up leaves the listing to judge alone.
func TestReconcileLooksUpAbsentIDsBeforeTombstoning(t *testing.T) {
	t.Parallel()
	later := today().AddDays(100)
	for _, tc := range []struct {
		name       string
		err        error
		wantErr    bool
		tombstoned []string
	}{
		{"found", nil, false, []string{"2"}},
		{"lookup fails", errInjected, true, nil},
		{"unsupported", clients.ErrUnsupported, false, []string{"1", "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := pgtest.DB(t)
			src := &confirmingSource{fakeSource: onDay(today(), "moved", "deleted", "kept"), pool: pool, err: tc.err}
			p := newPoller(t, poller.Params{Pool: pool, Logger: zerolog.New(zerolog.NewTestWriter(t)),
				Sources: []poller.Source{{Source: src, Overlap: 2 * time.Minute}}})
			incremental(t, p)
			src.tick(10 * time.Minute)
			src.put(1, later, "moved") // out of the reconcile's window
			src.remove(2)
			src.tick(10 * time.Minute)
			_, err := p.Reconcile(context.Background(), "acme", clients.TimeEntries)
			if (err != nil) != tc.wantErr || (tc.wantErr && !errors.Is(err, errInjected)) {
				t.Fatalf("reconcile: %v, want an error: %v", err, tc.wantErr)
			}
			if !slices.Equal(src.asked, []string{"1", "2"}) {
				t.Errorf("looked up %v, want the two ids the listing did not return", src.asked)
			}
			if src.held != 0 {
				t.Errorf("%d transactions open while the source was asked", src.held)
			}
			var gone []string
			if err := pool.QueryRow(context.Background(), `SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM time_entries
				WHERE source = 'acme' AND deleted_at IS NOT NULL`).Scan(&gone); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(gone, tc.tombstoned) && len(gone)+len(tc.tombstoned) > 0 {
				t.Errorf("tombstoned %v, want %v", gone, tc.tombstoned)
			}
			if tc.err == nil {
				var day time.Time
				if err := pool.QueryRow(context.Background(), `SELECT spent_date FROM time_entries WHERE source = 'acme' AND id = '1'`).Scan(&day); err != nil {
					t.Fatal(err)
				}
				if clients.DateOf(day) != later {
					t.Errorf("found entry 1 spent %s, want its new day %s", clients.DateOf(day), later)
				}
			}
		})
	}
}
