package clockify_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/clockify"
	"github.com/tidemarkhq/tidemark/clients/clockify/clockifytest"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/internal/sourcetest"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
	"github.com/tidemarkhq/tidemark/schema"
)

// The live feed: bare entities with auditMetadata, deletions by
// document._id, page size and page ignored. A window of more changes than
// the limit is read in one page, confirmed by page 1.
func TestLiveFeedShape(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(t0)
	f := newFake(t, clk, clockifytest.Options{LiveFeed: true, NoDeletionDelay: true})
	var ids []string
	for i := range 5 {
		id := clockifytest.NewID()
		ids = append(ids, id)
		e := entry(id, userA, t0.Add(-time.Duration(i)*time.Hour), time.Hour)
		e.NumericDuration, e.TimeZone = true, "Europe/Belgrade"
		f.PutTimeEntry(e)
	}
	clk.Advance(10 * time.Minute)
	c := newClient(t, f, func(p *clockify.Params, _ *httpx.Config) { p.FeedLimit = 2 })
	pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{})
	if err != nil {
		t.Fatal(err)
	}
	got := sourcetest.Records(pages)
	live := f.Live(clients.TimeEntries)
	if len(got) != 5 {
		t.Fatalf("%d records", len(got))
	}
	for id, r := range got {
		if te := schema.TimeEntries; te.Decimal(r, "hours") != "1" || te.Date(r, "spent_date") != te.Date(live[id], "spent_date") ||
			!r.Version.Equal(f.Versions(clients.TimeEntries)[id]) {
			t.Errorf("%s: %#v version %v", id, r.Row, r.Version)
		}
	}
	// A deletion: the tombstone names the entry, not the change.
	cursor := clk.Now()
	f.Delete(clients.TimeEntries, ids[0])
	clk.Advance(5 * time.Minute)
	pages, err = sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{UpdatedSince: cursor})
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := sourcetest.Records(pages)[ids[0]]; !ok || r.DeletedAt == nil {
		t.Fatalf("tombstone: %+v", sourcetest.Records(pages))
	}
	if m := c.FeedMode(); m != "feed" {
		t.Fatalf("FeedMode %q", m)
	}
}

// A feed that answers 404 or 403 is not retried every pass: the source
// lists per user by date instead, says so once at Warn, and FeedMode
// shows it.
func TestUnusableFeedFallsBackToListings(t *testing.T) {
	t.Parallel()
	for _, status := range []int{404, 403} {
		clk := fakeapi.NewClock(t0)
		f := newFake(t, clk, clockifytest.Options{FeedStatus: status})
		f.PutUser(clockifytest.User{ID: userA, Name: "A"})
		f.PutTimeEntry(entry("65f0000000000000000000e1", userA, t0.Add(-3*24*time.Hour), time.Hour))
		f.PutTimeEntry(entry("65f0000000000000000000e2", userA, t0.Add(-30*24*time.Hour), time.Hour)) // before the window
		var sink sourcetest.SyncBuffer
		c := newClient(t, f, func(p *clockify.Params, h *httpx.Config) {
			if h.Headers == nil {
				p.Logger = zerolog.New(&sink)
			}
		})
		for pass := range 2 {
			f.ResetRequests()
			pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{UpdatedSince: t0.Add(-time.Hour)})
			if err != nil {
				t.Fatalf("%d pass %d: %v", status, pass, err)
			}
			got := sourcetest.Records(pages)
			if _, ok := got["65f0000000000000000000e1"]; !ok || len(got) != 1 {
				t.Fatalf("%d pass %d: %v", status, pass, got)
			}
			feedReqs := 0
			for _, r := range f.Requests() {
				if strings.Contains(r.Path, "/entities/") {
					feedReqs++
				}
			}
			if want := map[int]int{0: 1, 1: 0}[pass]; feedReqs != want {
				t.Errorf("%d pass %d: %d feed requests, want %d", status, pass, feedReqs, want)
			}
		}
		if m := c.FeedMode(); !strings.HasPrefix(m, "listing: the feed answers") {
			t.Errorf("FeedMode %q", m)
		}
		if n := strings.Count(sink.String(), `"level":"warn"`); n != 1 || !strings.Contains(sink.String(), "change feed unusable") {
			t.Errorf("%d warnings:\n%s", n, sink.String())
		}
	}
}
