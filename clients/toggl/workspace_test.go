package toggl_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/internal/sourcetest"
	"github.com/tidemarkhq/tidemark/clients/toggl"
	"github.com/tidemarkhq/tidemark/clients/toggl/toggltest"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
	"github.com/tidemarkhq/tidemark/schema"
)

func workspaceScope(p *toggl.Params, _ *httpx.Config) { p.Scope = toggl.ScopeWorkspace }

// putEntry stores a stopped entry of user that started at start.
func putEntry(f *toggltest.Server, id, user int64, start time.Time, tags ...string) {
	stop := start.Add(30 * time.Minute)
	f.PutTimeEntry(toggltest.TimeEntry{ID: id, UserID: user, ProjectID: 77, Start: start, Stop: &stop, Duration: 1800,
		Description: str(fmt.Sprintf("entry %d", id)), Tags: tags})
}

// Every user's entries of the trailing window come from the detailed
// search, page by page as its X-Next-* headers say, each dated in its
// user's zone; an entry spent before the window is not asked for.
func TestWorkspaceEveryUsersEntriesByHeaderPaging(t *testing.T) {
	t.Parallel()
	tokyo, _ := time.LoadLocation("Asia/Tokyo")
	f := newFake(t, toggltest.Options{TimeZone: "Europe/Berlin", ReportPageCap: 2, UserZones: map[int64]*time.Location{12: tokyo}})
	now := f.Now().UTC()
	today := clients.DateOf(now)
	noon := today.Time().Add(12 * time.Hour)
	putEntry(f, 1, 11, noon.Add(-24*time.Hour), "billable")
	putEntry(f, 2, 12, noon.Add(-48*time.Hour))
	putEntry(f, 3, 13, noon.Add(-72*time.Hour), "billable", "meeting")
	putEntry(f, 4, 11, noon.Add(-96*time.Hour))
	// 23:30 UTC is the next day in Tokyo: user 12 spent it that day.
	putEntry(f, 5, 12, today.AddDays(-3).Time().Add(-30*time.Minute))
	putEntry(f, 6, 13, noon.AddDate(0, 0, -30)) // before the trailing window

	c := newClient(t, f, nil, workspaceScope)
	pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{UpdatedSince: now.Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	recs := sourcetest.Records(pages)
	if len(recs) != 5 || recs["6"].ID != "" {
		t.Fatalf("records %v: want entries 1-5, every user's, and not 6", sourcetest.IDs(pages))
	}
	users := map[string]bool{}
	for _, r := range recs {
		users[schema.At[string](&r, schema.TimeEntries.Index("user_id"))] = true
	}
	if len(users) != 3 {
		t.Errorf("users %v: want 11, 12 and 13, not only the token owner", users)
	}
	e5 := recs["5"]
	if d := schema.At[clients.Date](&e5, schema.TimeEntries.Index("spent_date")); d != today.AddDays(-3) {
		t.Errorf("entry 5 spent %s, want %s (its user's day, Tokyo)", d, today.AddDays(-3))
	}
	if z := schema.At[string](&e5, schema.TimeEntries.Index("time_zone")); z != "+09:00" {
		t.Errorf("entry 5 zone %q", z)
	}
	e3 := recs["3"]
	if tags := schema.At[json.RawMessage](&e3, schema.TimeEntries.Index("tags")); string(tags) != `["billable","meeting"]` {
		t.Errorf("entry 3 tags %s", tags)
	}
	qs := f.ReportQueries()
	if len(qs) != 3 {
		t.Fatalf("%d searches, want 3 pages of 2", len(qs))
	}
	if qs[0].FirstID != nil || qs[0].FirstRowNumber != nil {
		t.Errorf("first page sent a cursor: %+v", qs[0])
	}
	if q := qs[0]; q.StartDate != today.AddDays(-toggl.DefaultTrailingDays-1).String() || q.EndDate != today.AddDays(2).String() || q.PageSize != toggl.ReportPageSize {
		t.Errorf("first search %+v", q)
	}
	for i, q := range qs[1:] {
		if q.FirstID == nil || q.FirstRowNumber == nil || *q.FirstRowNumber != int64(2*(i+1)+1) || q.StartDate != qs[0].StartDate {
			t.Errorf("search %d: %+v: want the next-page headers sent back", i+2, q)
		}
	}
	if n := countPath(f, "/workspaces/4242/tags"); n != 1 {
		t.Errorf("tags listed %d times, want once", n)
	}
	if pages[0].SourceTime.IsZero() {
		t.Error("no SourceTime")
	}
}

// An entry deleted inside the trailing window is absent from the next
// complete listing: it comes back as a tombstone at its last version. An
// entry deleted before the window is not judged by it (reconcile is).
func TestWorkspaceDeletionInTheWindowTombstonedByAbsence(t *testing.T) {
	t.Parallel()
	f := newFake(t, toggltest.Options{ReportPageCap: 2})
	now := f.Now().UTC()
	noon := clients.DateOf(now).Time().Add(12 * time.Hour)
	for i := int64(1); i <= 5; i++ {
		putEntry(f, i, 10+i%2, noon.AddDate(0, 0, -int(i)))
	}
	putEntry(f, 9, 11, noon.AddDate(0, 0, -40))
	c := newClient(t, f, nil, workspaceScope)
	first, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{}) // the first sync: 90 days
	if err != nil || len(sourcetest.Records(first)) != 6 {
		t.Fatalf("first sync: %v, %v", sourcetest.IDs(first), err)
	}
	was := sourcetest.Records(first)["3"].Version
	f.Delete(clients.TimeEntries, 3)
	f.Delete(clients.TimeEntries, 9)
	pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{UpdatedSince: now.Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	recs := sourcetest.Records(pages)
	gone := recs["3"]
	if gone.DeletedAt == nil || gone.Row != nil || !gone.Version.Equal(was) {
		t.Fatalf("entry 3: %+v: want a tombstone at its last version %v", gone, was)
	}
	if _, ok := recs["9"]; ok {
		t.Error("entry 9, spent before the trailing window, judged by the window's listing")
	}
	for _, id := range []string{"1", "2", "4", "5"} {
		if r := recs[id]; r.DeletedAt != nil || r.Row == nil {
			t.Errorf("entry %s: %+v", id, r)
		}
	}
	// Told once: the next listing does not repeat it.
	again, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{UpdatedSince: now.Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sourcetest.Records(again)["3"]; ok {
		t.Error("the tombstone is handed over again")
	}
}

// A listing that fails part way tombstones nothing; the next complete one
// does.
func TestWorkspaceFailedListingTombstonesNothing(t *testing.T) {
	t.Parallel()
	f := newFake(t, toggltest.Options{ReportPageCap: 2})
	now := f.Now().UTC()
	noon := clients.DateOf(now).Time().Add(12 * time.Hour)
	for i := int64(1); i <= 5; i++ {
		putEntry(f, i, 11, noon.AddDate(0, 0, -int(i)))
	}
	c := newClient(t, f, nil, workspaceScope)
	w := clients.Window{UpdatedSince: now.Add(-time.Hour)}
	if _, err := sourcetest.Collect(t, c, clients.TimeEntries, w); err != nil {
		t.Fatal(err)
	}
	f.Delete(clients.TimeEntries, 1)
	f.Malform("time_entries", 2, fakeapi.BadJSON)
	pages, err := sourcetest.Collect(t, c, clients.TimeEntries, w)
	var he *httpx.Error
	if !errors.As(err, &he) {
		t.Fatalf("a bad page 2: %v", err)
	}
	for _, p := range pages {
		for _, r := range p.Records {
			if r.DeletedAt != nil {
				t.Fatalf("a failed listing tombstoned %s", r.ID)
			}
		}
	}
	f.Malform("time_entries", 2, 0)
	pages, err = sourcetest.Collect(t, c, clients.TimeEntries, w)
	if err != nil {
		t.Fatal(err)
	}
	if r := sourcetest.Records(pages)["1"]; r.DeletedAt == nil {
		t.Errorf("entry 1 after a complete listing: %+v", r)
	}
}

// By spent date (backfill, reconcile) the window is the one asked.
func TestWorkspaceByDateWindow(t *testing.T) {
	t.Parallel()
	f := newFake(t, toggltest.Options{})
	day := clients.Date{Year: 2025, Month: 3, Day: 10}
	putEntry(f, 1, 11, day.Time().Add(9*time.Hour))
	putEntry(f, 2, 12, day.AddDays(1).Time().Add(9*time.Hour))
	putEntry(f, 3, 13, day.AddDays(-1).Time().Add(9*time.Hour))
	c := newClient(t, f, nil, workspaceScope)
	pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{From: day, To: day.AddDays(1)})
	if err != nil {
		t.Fatal(err)
	}
	if recs := sourcetest.Records(pages); len(recs) != 2 || recs["1"].ID == "" || recs["2"].ID == "" {
		t.Fatalf("records %v", sourcetest.IDs(pages))
	}
	if q := f.ReportQueries()[0]; q.StartDate != "2025-03-09" || q.EndDate != "2025-03-12" {
		t.Errorf("search %+v", q)
	}
	if countPath(f, "/me/time_entries") != 0 {
		t.Error("workspace scope asked /me/time_entries")
	}
}

// An entry moved to a day before the window is absent from the window's
// listing but not deleted: asked for by id, it comes back live with its
// new day, and is not tombstoned.
func TestWorkspaceEntryMovedOutOfTheWindowIsNotTombstoned(t *testing.T) {
	t.Parallel()
	f := newFake(t, toggltest.Options{})
	now := f.Now().UTC()
	noon := clients.DateOf(now).Time().Add(12 * time.Hour)
	putEntry(f, 1, 11, noon.AddDate(0, 0, -2))
	putEntry(f, 2, 12, noon.AddDate(0, 0, -3))
	c := newClient(t, f, nil, workspaceScope)
	w := clients.Window{UpdatedSince: now.Add(-time.Hour)}
	if _, err := sourcetest.Collect(t, c, clients.TimeEntries, w); err != nil {
		t.Fatal(err)
	}
	putEntry(f, 1, 11, noon.AddDate(0, 0, -40)) // back-dated out of the window
	f.Delete(clients.TimeEntries, 2)
	pages, err := sourcetest.Collect(t, c, clients.TimeEntries, w)
	if err != nil {
		t.Fatal(err)
	}
	recs := sourcetest.Records(pages)
	moved := recs["1"]
	if moved.DeletedAt != nil || moved.Row == nil {
		t.Fatalf("moved entry: %+v", moved)
	}
	if d := schema.At[clients.Date](&moved, schema.TimeEntries.Index("spent_date")); d != clients.DateOf(noon.AddDate(0, 0, -40)) {
		t.Errorf("moved entry spent %s", d)
	}
	if recs["2"].DeletedAt == nil {
		t.Errorf("deleted entry: %+v", recs["2"])
	}
	qs := f.ReportQueries()
	if last := qs[len(qs)-1]; len(last.TimeEntryIDs) != 2 || last.TimeEntryIDs[0] != 1 || last.TimeEntryIDs[1] != 2 {
		t.Errorf("confirmation search %+v: want the two absent ids", last)
	}
}
