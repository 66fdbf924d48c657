package toggl_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/internal/sourcetest"
	"github.com/tidemarkhq/tidemark/clients/toggl/toggltest"
	"github.com/tidemarkhq/tidemark/schema"
)

// countPath counts the fake's requests to path.
func countPath(f *toggltest.Server, path string) int {
	n := 0
	for _, rq := range f.Requests() {
		if rq.Path == path {
			n++
		}
	}
	return n
}

// An entry started at 23:30 UTC belongs, for a user in Berlin, to the next
// day: the day Toggl's own reports give it. The zone comes from /me, asked
// once per source (its quota is 30 an hour) and cached.
func TestEntriesDatedInTheUsersZoneFromMe(t *testing.T) {
	t.Parallel()
	f := newFake(t, toggltest.Options{TimeZone: "Europe/Berlin"})
	day := clients.DateOf(f.Now().UTC()).AddDays(-3)
	late := day.Time().Add(23*time.Hour + 30*time.Minute) // 00:30 next day in Berlin (CET/CEST)
	stop := late.Add(20 * time.Minute)
	early := day.Time().Add(12 * time.Hour)
	stop2 := early.Add(time.Hour)
	f.PutTimeEntry(toggltest.TimeEntry{ID: 1, UserID: 7, Start: late, Stop: &stop, Duration: 1200, Tags: []string{"billable-ish"}})
	f.PutTimeEntry(toggltest.TimeEntry{ID: 2, UserID: 7, Start: early, Stop: &stop2, Duration: 3600})
	c := newClient(t, f, nil)
	te := schema.TimeEntries
	for range 2 {
		pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{})
		if err != nil {
			t.Fatal(err)
		}
		recs := sourcetest.Records(pages)
		if got := te.Date(recs["1"], "spent_date"); got != day.AddDays(1) {
			t.Errorf("entry 1 spent_date %v, want %v (Berlin)", got, day.AddDays(1))
		}
		if got := te.Date(recs["2"], "spent_date"); got != day {
			t.Errorf("entry 2 spent_date %v, want %v", got, day)
		}
		if z := te.Text(recs["1"], "time_zone"); z != "Europe/Berlin" {
			t.Errorf("time_zone %q", z)
		}
	}
	// By spent date too: the window is the user's days.
	pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{From: day.AddDays(1), To: day.AddDays(1)})
	if err != nil {
		t.Fatal(err)
	}
	if r := sourcetest.Records(pages); len(r) != 1 || r["1"].ID == "" {
		t.Errorf("window %v: %v", day.AddDays(1), r)
	}
	if n := countPath(f, "/me"); n != 1 {
		t.Errorf("/me asked %d times, want once", n)
	}
}

// A source that does not serve /me (404) dates in UTC, says so once, and
// stores the zone it used.
func TestEntriesWithoutMeAreDatedInUTC(t *testing.T) {
	t.Parallel()
	f := newFake(t, toggltest.Options{TimeZone: "Europe/Berlin", NoMe: true})
	day := clients.DateOf(f.Now().UTC()).AddDays(-3)
	late := day.Time().Add(23*time.Hour + 30*time.Minute)
	stop := late.Add(20 * time.Minute)
	f.PutTimeEntry(toggltest.TimeEntry{ID: 1, UserID: 7, Start: late, Stop: &stop, Duration: 1200})
	var logs sourcetest.SyncBuffer
	c := newClient(t, f, &logs)
	for range 2 {
		pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{})
		if err != nil {
			t.Fatal(err)
		}
		r := sourcetest.Records(pages)["1"]
		if te := schema.TimeEntries; te.Date(r, "spent_date") != day || te.Text(r, "time_zone") != "UTC" {
			t.Errorf("spent_date %v zone %q", te.Date(r, "spent_date"), te.Text(r, "time_zone"))
		}
	}
	if n := countPath(f, "/me"); n != 1 || strings.Count(logs.String(), "dating time entries in UTC") != 1 {
		t.Errorf("/me asked %d times; logs %s", n, logs.String())
	}
}
