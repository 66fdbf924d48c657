package clockify_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/clockify/clockifytest"
	"github.com/tidemarkhq/tidemark/clients/internal/sourcetest"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
	"github.com/tidemarkhq/tidemark/schema"
)

// Entries without clientId get their project's client; each is dated in
// its own zone, else its user's settings.timeZone, else UTC. The users and
// projects are walked once when an entry names one the client does not
// know, and not again on the next pass.
func TestFeedEntriesGetZoneAndClientFromUsersAndProjects(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(t0)
	f := newFake(t, clk, clockifytest.Options{})
	const proj, client = "65f0000000000000000000f7", "65f0000000000000000000c7"
	f.PutUser(clockifytest.User{ID: userA, Name: "A", TimeZone: "America/Los_Angeles"})
	f.PutUser(clockifytest.User{ID: userB, Name: "B", NoTimeZone: true})
	f.PutProject(clockifytest.Project{ID: proj, Name: "Web", ClientID: client})
	late := t0.Add(-8 * time.Hour).Add(-30 * time.Minute) // 00:30 UTC on 2 March
	mk := func(id, user string, mod func(*clockifytest.TimeEntry)) {
		e := entry(id, user, late, time.Hour)
		e.ProjectID = proj
		if mod != nil {
			mod(&e)
		}
		f.PutTimeEntry(e)
	}
	mk("65f0000000000000000000e1", userA, nil)                              // LA: 1 March
	mk("65f0000000000000000000e2", userB, nil)                              // no zone: UTC, 2 March
	mk("65f0000000000000000000e3", userB, func(e *clockifytest.TimeEntry) { // its own zone
		e.TimeZone, e.NumericDuration = "Asia/Tokyo", true
	})
	mk("65f0000000000000000000e4", userC, nil) // unknown user: UTC
	clk.Advance(10 * time.Minute)
	c := newClient(t, f, nil)
	pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{})
	if err != nil {
		t.Fatal(err)
	}
	got := sourcetest.Records(pages)
	te := schema.TimeEntries
	for id, want := range map[string]struct{ day, zone string }{
		"65f0000000000000000000e1": {"2026-03-01", "America/Los_Angeles"},
		"65f0000000000000000000e2": {"2026-03-02", "UTC"},
		"65f0000000000000000000e3": {"2026-03-02", "Asia/Tokyo"},
		"65f0000000000000000000e4": {"2026-03-02", "UTC"},
	} {
		r := got[id]
		if strings.Contains(string(r.Raw), "clientId") {
			t.Fatalf("fixture carries a clientId: %s", r.Raw)
		}
		if te.Date(r, "spent_date").String() != want.day || te.Text(r, "time_zone") != want.zone || te.Text(r, "client_id") != client ||
			te.Decimal(r, "hours") != "1" {
			t.Errorf("%s: %#v, want %v and client %s", id, r.Row, want, client)
		}
	}
	walks := func() (users, projects int) {
		for _, r := range f.Requests() {
			switch {
			case strings.HasSuffix(r.Path, "/users"):
				users++
			case strings.HasSuffix(r.Path, "/projects"):
				projects++
			}
		}
		return
	}
	if u, p := walks(); u != 1 || p != 1 {
		t.Errorf("first pass walked users %d and projects %d times, want once each", u, p)
	}
	// The next pass knows them all (userC as known-without-zone).
	f.ResetRequests()
	mk("65f0000000000000000000e1", userA, func(e *clockifytest.TimeEntry) { *e.End = e.End.Add(time.Hour) })
	clk.Advance(10 * time.Minute)
	if _, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{UpdatedSince: t0}); err != nil {
		t.Fatal(err)
	}
	if u, p := walks(); u != 0 || p != 0 {
		t.Errorf("second pass walked users %d and projects %d times, want none", u, p)
	}
	// Live, the fake's expectation, agrees.
	for id, r := range f.Live(clients.TimeEntries) {
		if g := got[id]; id != "65f0000000000000000000e1" && te.Date(g, "spent_date") != te.Date(r, "spent_date") {
			t.Errorf("%s: Live says %v, client %v", id, te.Date(r, "spent_date"), te.Date(g, "spent_date"))
		}
	}
}
