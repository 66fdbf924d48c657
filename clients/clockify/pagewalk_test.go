package clockify_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/clockify"
	"github.com/tidemarkhq/tidemark/clients/clockify/clockifytest"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/internal/sourcetest"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
)

// listIDs lists and returns the ids served (live records only).
func listIDs(t *testing.T, ctx context.Context, c *clockify.Client, w clients.Window) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	err := c.List(ctx, clients.TimeEntries, w, func(_ context.Context, p clients.Page) error {
		for _, r := range p.Records {
			if r.DeletedAt == nil {
				got[r.ID] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// A per-user listing (backfill, reconcile) pages by number over a live
// list: an entry deleted, or moved out of the range, on page 1 while the
// client is between pages shifts the rest up, and the first entry of page 2
// is never served.
func TestPerUserListingLosesNothingWhenAnEntryLeavesMidWalk(t *testing.T) {
	t.Parallel()
	for _, change := range []string{"delete", "move"} {
		t.Run(change, func(t *testing.T) {
			t.Parallel()
			clk := fakeapi.NewClock(t0)
			f := newFake(t, clk, clockifytest.Options{})
			day := t0.Add(-10 * 24 * time.Hour)
			var ids []string
			for i := range 25 {
				id := clockifytest.NewID()
				ids = append(ids, id)
				f.PutTimeEntry(entry(id, userA, day.Add(time.Duration(i)*time.Minute), time.Minute))
			}
			victim := ids[24] // newest start first: the first entry of page 1
			var once sync.Once
			f.OnList(func(rq fakeapi.Request) {
				if rq.Query.Get("page") != "2" {
					return
				}
				once.Do(func() {
					if change == "delete" {
						f.Delete(clients.TimeEntries, victim)
						return
					}
					e, _ := f.TimeEntry(victim)
					e.Start, e.UpdatedAt = day.Add(-30*24*time.Hour), time.Time{}
					f.PutTimeEntry(e)
				})
			})
			c := newClient(t, f, func(p *clockify.Params, _ *httpx.Config) { p.PageSize = 10; p.UserIDs = []string{userA} })
			logs := &sourcetest.SyncBuffer{}
			ctx := zerolog.New(logs).WithContext(t.Context())
			d := clients.DateOf(day)
			got := listIDs(t, ctx, c, clients.Window{From: d, To: d})
			for _, id := range ids[:24] {
				if !got[id] {
					t.Errorf("entry %s was never served", id)
				}
			}
			if !bytes.Contains([]byte(logs.String()), []byte("listing shifted while walking; walking it again")) {
				t.Errorf("no Info line about walking again")
			}
		})
	}
}

// The change feed pages by number too: an entry leaving /created (deleted)
// or /updated (updated again, out of the window) mid-walk on a first sync
// must not cost another entry.
func TestFeedLosesNothingWhenAnEntryLeavesMidWalk(t *testing.T) {
	t.Parallel()
	for _, change := range []string{"delete", "move"} {
		t.Run(change, func(t *testing.T) {
			t.Parallel()
			clk := fakeapi.NewClock(t0)
			f := newFake(t, clk, clockifytest.Options{})
			feed := "/workspaces/" + f.WorkspaceID() + "/entities/created"
			created := t0.Add(-30 * time.Minute)
			if change == "move" {
				// Created before the first sync's range, updated in it: listed
				// by /updated only.
				feed = "/workspaces/" + f.WorkspaceID() + "/entities/updated"
				created = t0.Add(-200 * 24 * time.Hour)
			}
			var ids []string
			for i := range 7 {
				id := clockifytest.NewID()
				ids = append(ids, id)
				e := entry(id, userA, created, time.Hour)
				e.CreatedAt, e.UpdatedAt = created, t0.Add(-30*time.Minute+time.Duration(i)*time.Second)
				f.PutTimeEntry(e)
			}
			var once sync.Once
			f.OnList(func(rq fakeapi.Request) {
				if rq.Path != feed || rq.Query.Get("page") != "1" {
					return
				}
				once.Do(func() {
					if change == "delete" {
						f.Delete(clients.TimeEntries, ids[0])
						return
					}
					e, _ := f.TimeEntry(ids[0])
					e.UpdatedAt = time.Time{} // now: after the window's end
					f.PutTimeEntry(e)
				})
			})
			c := newClient(t, f, func(p *clockify.Params, _ *httpx.Config) { p.FeedLimit = 3 })
			got := listIDs(t, t.Context(), c, clients.Window{})
			for _, id := range ids[1:] {
				if !got[id] {
					t.Errorf("entry %s was never served", id)
				}
			}
		})
	}
}

// A per-user list that runs past MaxPages is cut short on our side:
// ErrCapped, never a quiet success.
func TestPerUserListingBeyondMaxPagesIsCapped(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(t0)
	f := newFake(t, clk, clockifytest.Options{})
	day := t0.Add(-10 * 24 * time.Hour)
	for i := range 25 {
		f.PutTimeEntry(entry(clockifytest.NewID(), userA, day.Add(time.Duration(i)*time.Minute), time.Minute))
	}
	c := newClient(t, f, func(p *clockify.Params, _ *httpx.Config) {
		p.PageSize, p.UserIDs, p.MaxPages = 10, []string{userA}, 2
	})
	d := clients.DateOf(day)
	_, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{From: d, To: d})
	if !errors.Is(err, clients.ErrCapped) {
		t.Fatalf("err = %v, want ErrCapped", err)
	}
}
