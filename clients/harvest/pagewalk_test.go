package harvest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/harvest"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/internal/sourcetest"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
	"github.com/tidemarkhq/tidemark/internal/fakeapi/harvestfake"
)

// A record deleted or moved on page 1 while the client is between pages
// shifts every later record up one place: with page numbers, the first
// record of page 2 is never served. On a first sync or a backfill that record
// is old, so no later window reaches it. Nothing may be lost, in either
// pagination style; a cursor walk needs no second walk.
func TestListingLosesNothingWhenARecordLeavesMidWalk(t *testing.T) {
	t.Parallel()
	for _, style := range []string{"page", "cursor"} {
		for _, pass := range []string{"first-sync", "backfill"} {
			for _, change := range []string{"delete", "move"} {
				t.Run(style+"/"+pass+"/"+change, func(t *testing.T) {
					t.Parallel()
					f := newFake(t, harvestfake.Options{Cursor: style == "cursor"})
					seed(f, 25)
					c := newClient(t, f) // 10 per page: 3 pages
					var w clients.Window
					in := func(*harvestfake.TimeEntry) bool { return true }
					if pass == "backfill" {
						w = clients.Window{From: clients.DateOf(base).AddDays(-6), To: clients.DateOf(base)}
						in = func(e *harvestfake.TimeEntry) bool { return !e.SpentDate.Before(w.From) && !e.SpentDate.After(w.To) }
					}
					victim := f.IDs(clients.TimeEntries)[0] // the first record of page 1
					var once sync.Once
					f.OnList(func(rq fakeapi.Request) {
						if rq.Seq != 2 { // between page 1 and page 2 of the first walk
							return
						}
						once.Do(func() {
							if change == "delete" {
								f.Delete(clients.TimeEntries, victim)
								return
							}
							// Older than every other entry, and outside the backfill window.
							e, _ := f.TimeEntry(victim)
							e.SpentDate, e.UpdatedAt = clients.DateOf(base).AddDays(-30), f.Now().UTC().Truncate(1e9)
							f.PutTimeEntry(e)
						})
					})
					var logs bytes.Buffer
					ctx := zerolog.New(&logs).WithContext(t.Context())
					got := map[string]bool{}
					err := c.List(ctx, clients.TimeEntries, w, func(_ context.Context, p clients.Page) error {
						for _, r := range p.Records {
							got[r.ID] = true
						}
						return nil
					})
					if err != nil {
						t.Fatal(err)
					}
					for _, e := range f.TimeEntriesWhere(in) {
						if id := strconv.FormatInt(e.ID, 10); !got[id] {
							t.Errorf("entry %s (spent %s) was never served", id, e.SpentDate)
						}
					}
					switch style {
					case "cursor":
						// Keyset pagination cannot skip: one walk, three requests.
						if n := f.RequestCount(); n != 3 {
							t.Errorf("%d requests, want 3 (a cursor walk is not walked again)", n)
						}
					case "page":
						if !strings.Contains(logs.String(), "listing shifted while walking") {
							t.Errorf("no Info line about the second walk; logs:\n%s", logs.String())
						}
					}
				})
			}
		}
	}
}

// A listing that keeps shifting is walked a bounded number of times, then
// fails with ErrCapped: absence from it proves nothing.
func TestListingThatNeverHoldsStillIsCapped(t *testing.T) {
	t.Parallel()
	f := newFake(t, harvestfake.Options{})
	seed(f, 25)
	c := newClient(t, f)
	f.OnList(func(rq fakeapi.Request) {
		if rq.Query.Get("page") == "2" {
			f.Delete(clients.TimeEntries, f.IDs(clients.TimeEntries)[0])
		}
	})
	_, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{})
	if !errors.Is(err, clients.ErrCapped) {
		t.Fatalf("err = %v, want ErrCapped", err)
	}
	// Rewinds first (two requests each, four at most), then three walks.
	if n := f.RequestCount(); n > 16 {
		t.Errorf("%d requests: the walks are not bounded", n)
	}
}

// A listing whose envelope promises more pages than the links lead to was
// cut short by the provider: ErrCapped, not a quiet success.
func TestTotalPagesBeyondWhatWasServedIsCapped(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"clients":[{"id":1,"name":"A","is_active":true,"updated_at":"2026-01-02T10:00:00Z"}],`+
			`"per_page":1,"total_pages":3,"total_entries":3,"next_page":null,"previous_page":null,"page":1,`+
			`"links":{"first":null,"next":null,"previous":null,"last":null}}`)
	}))
	t.Cleanup(srv.Close)
	f := newFake(t, harvestfake.Options{})
	c := newClient(t, f, func(p *harvest.Params, _ *httpx.Config) { p.BaseURL = srv.URL + "/v2"; p.PerPage = 1 })
	pages, err := sourcetest.Collect(t, c, clients.Clients, clients.Window{})
	if !errors.Is(err, clients.ErrCapped) {
		t.Fatalf("err = %v, want ErrCapped", err)
	}
	if len(pages) != 1 || len(pages[0].Records) != 1 {
		t.Errorf("pages = %+v: the page served is still handed over", pages)
	}
}

// An idle pass costs one request, whatever the defence.
func TestSinglePageListingIsOneRequest(t *testing.T) {
	t.Parallel()
	for _, style := range []bool{false, true} {
		f := newFake(t, harvestfake.Options{Cursor: style})
		seed(f, 5)
		c := newClient(t, f)
		if _, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{}); err != nil {
			t.Fatal(err)
		}
		if n := f.RequestCount(); n != 1 {
			t.Errorf("cursor=%v: %d requests, want 1", style, n)
		}
	}
}

// A long walk over a busy account: while the client is between pages, new
// entries arrive at the top (today's) and existing ones are edited in
// place. Each creation costs two requests (the page before is read again),
// edits cost nothing, and no second walk is needed; nothing that existed
// when the walk began is lost.
func TestFirstSyncOfABusyAccountNeedsNoSecondWalk(t *testing.T) {
	t.Parallel()
	f := newFake(t, harvestfake.Options{})
	seed(f, 45) // 5 pages of 10
	c := newClient(t, f)
	before := f.TimeEntriesWhere(func(*harvestfake.TimeEntry) bool { return true })
	next := int64(5000)
	events := 0
	f.OnList(func(rq fakeapi.Request) {
		if rq.Seq < 2 || events >= 6 {
			return
		}
		events++
		if rq.Seq%2 == 0 {
			// A new entry for today: the top of the list.
			f.PutTimeEntry(harvestfake.TimeEntry{ID: next, SpentDate: clients.DateOf(f.Now()), Hours: "1.0",
				UserID: 20, ProjectID: 30, TaskID: 40, ClientID: 10, UpdatedAt: f.Now().UTC().Truncate(time.Second)})
			next++
			return
		}
		// An edit in place of an entry further down.
		e, _ := f.TimeEntry(before[len(before)-1].ID)
		e.Hours, e.UpdatedAt = "7.5", f.Now().UTC().Truncate(time.Second)
		f.PutTimeEntry(e)
	})
	var logs bytes.Buffer
	ctx := zerolog.New(&logs).WithContext(t.Context())
	got := map[string]bool{}
	err := c.List(ctx, clients.TimeEntries, clients.Window{}, func(_ context.Context, p clients.Page) error {
		for _, r := range p.Records {
			got[r.ID] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range before {
		if !got[strconv.FormatInt(e.ID, 10)] {
			t.Errorf("entry %d was never served", e.ID)
		}
	}
	if strings.Contains(logs.String(), "walking it again") {
		t.Errorf("a second walk for creations at the top and edits in place:\n%s", logs.String())
	}
	if n := f.RequestCount(); n > 5+2*events {
		t.Errorf("%d requests for 5 pages and %d changes", n, events)
	}
}

// A page whose body arrives cut short (half the JSON, with a length to
// match) is requested again: the scanner, which reads every byte anyway,
// tells httpx so (no second completeness pass). Only a body that stays cut
// fails, as a transport fault, never as bad input.
func TestBodyCutShortIsRequestedAgain(t *testing.T) {
	t.Parallel()
	f := newFake(t, harvestfake.Options{})
	seed(f, 25)
	c := newClient(t, f)
	f.Malform("time_entries", 2, fakeapi.CutShort)
	f.OnList(func(rq fakeapi.Request) {
		if rq.Seq == 3 { // the retry of page 2 arrives whole
			f.Malform("time_entries", 2, 0)
		}
	})
	pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{})
	if err != nil {
		t.Fatalf("a page cut short once: %v", err)
	}
	if n := len(sourcetest.IDs(pages)); n != 25 {
		t.Fatalf("%d entries served, want 25", n)
	}
	f.Malform("time_entries", 1, fakeapi.CutShort)
	f.OnList(nil)
	_, err = sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{})
	if !errors.Is(err, httpx.ErrBodyCutShort) {
		t.Fatalf("a page always cut short: %v, want a transport fault (ErrBodyCutShort)", err)
	}
}
