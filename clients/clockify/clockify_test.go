package clockify_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/clockify"
	"github.com/tidemarkhq/tidemark/clients/clockify/clockifytest"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/internal/sourcetest"
	"github.com/tidemarkhq/tidemark/clients/provider"
	"github.com/tidemarkhq/tidemark/internal/conformance"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/poller"
	"github.com/tidemarkhq/tidemark/schema"
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

var kind = sourcetest.Kind[clockify.Params, *clockify.Client]{
	HTTPConfig: clockify.HTTPConfig, New: clockify.New,
	SetHTTP: func(p *clockify.Params, h *httpx.Client) { p.HTTP = h },
}

func newFake(t *testing.T, clk *fakeapi.Clock, o clockifytest.Options) *clockifytest.Server {
	o.Clock = clk.Now
	return sourcetest.Closed(t, clockifytest.New(o))
}

// newClient builds a client of f; mod, when set, adjusts its Params and
// then its HTTP configuration. A 429 waits 20 ms: Clockify sends no
// Retry-After.
func newClient(t *testing.T, f *clockifytest.Server, mod func(*clockify.Params, *httpx.Config)) *clockify.Client {
	t.Helper()
	opts := []sourcetest.Opt[clockify.Params]{func(_ *clockify.Params, c *httpx.Config) { c.DefaultRetryAfter = 20 * time.Millisecond }}
	if mod != nil {
		opts = append(opts, mod)
	}
	return kind.Build(t, clockify.Params{
		Base: provider.Base{Name: "acme", BaseURL: f.URL(), Token: f.Token(),
			RateLimit: httpx.RateLimit{Requests: 1000, Per: time.Second},
			Env:       provider.Env{Logger: zerolog.New(zerolog.NewTestWriter(t))}},
		WorkspaceID: f.WorkspaceID(),
	}, opts...)
}

const (
	userA = "65f000000000000000000a01"
	userB = "65f000000000000000000b02"
	userC = "65f000000000000000000c03"
)

func entry(id, user string, start time.Time, d time.Duration) clockifytest.TimeEntry {
	end := start.Add(d)
	notes := "work on " + id
	return clockifytest.TimeEntry{ID: id, UserID: user, ProjectID: "65f0000000000000000000f1", Description: &notes, Billable: true, Start: start, End: &end}
}

// putEntries stores n new entries of user, the i-th starting i steps after
// from and lasting d, and returns their ids in that order.
func putEntries(f *clockifytest.Server, user string, n int, from time.Time, step, d time.Duration) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = clockifytest.NewID()
		f.PutTimeEntry(entry(ids[i], user, from.Add(time.Duration(i)*step), d))
	}
	return ids
}

func TestFeedWindowsEndSafetyLagBeforeSourceClock(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(t0)
	f := newFake(t, clk, clockifytest.Options{Skew: -3 * time.Hour}) // the source runs behind us
	c := newClient(t, f, func(p *clockify.Params, _ *httpx.Config) { p.FeedWindow = 24 * time.Hour })
	now := t0.Add(-3 * time.Hour)
	since := now.Add(-50 * time.Hour)
	if _, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{UpdatedSince: since}); err != nil {
		t.Fatal(err)
	}
	reqs := f.Requests()
	if reqs[0].Path != "/user" {
		t.Fatalf("first request %s, want the clock request GET /user", reqs[0].Path)
	}
	end := now.Add(-clockify.DefaultSafetyLag)
	type win struct{ kind, start, end string }
	var got []win
	for _, r := range reqs[1:] {
		got = append(got, win{r.Path[strings.LastIndex(r.Path, "/")+1:], r.Query.Get("start"), r.Query.Get("end")})
		if r.Query.Get("type") != "TIME_ENTRY" || r.Query.Get("page") != "0" || r.Query.Get("limit") != "50" {
			t.Errorf("query %v", r.Query)
		}
	}
	f1 := since.Add(24 * time.Hour)
	f2 := f1.Add(-time.Second).Add(24 * time.Hour)
	s := func(t time.Time) string { return t.Format("2006-01-02T15:04:05Z") }
	// Windows over an hour read deletions whole.
	want := []win{
		{"created", s(since), s(f1)}, {"updated", s(since), s(f1)}, {"deleted", s(since), s(f1)},
		{"created", s(f1.Add(-time.Second)), s(f2)}, {"updated", s(f1.Add(-time.Second)), s(f2)}, {"deleted", s(f1.Add(-time.Second)), s(f2)},
		{"created", s(f2.Add(-time.Second)), s(end)}, {"updated", s(f2.Add(-time.Second)), s(end)}, {"deleted", s(f2.Add(-time.Second)), s(end)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("windows\n got %v\nwant %v", got, want)
	}
	// A short pass reads deletions in one-minute sub-windows.
	f.ResetRequests()
	if _, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{UpdatedSince: end.Add(-150 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	var dels []string
	for _, r := range f.Requests() {
		if strings.HasSuffix(r.Path, "/deleted") {
			dels = append(dels, r.Query.Get("start")+".."+r.Query.Get("end"))
		}
	}
	e := end
	if w := []string{
		s(e.Add(-150*time.Second)) + ".." + s(e.Add(-90*time.Second)),
		s(e.Add(-91*time.Second)) + ".." + s(e.Add(-31*time.Second)),
		s(e.Add(-32*time.Second)) + ".." + s(e),
	}; !reflect.DeepEqual(dels, w) {
		t.Fatalf("deletion windows\n got %v\nwant %v", dels, w)
	}
	// Nothing to read while the cursor is within the lag.
	f.ResetRequests()
	pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{UpdatedSince: end.Add(time.Second)})
	if err != nil || len(pages) != 0 || f.RequestCount() != 1 {
		t.Fatalf("within the lag: err %v, %d pages, %d requests", err, len(pages), f.RequestCount())
	}
}

func TestFeedChangesDeletionsAndTombstones(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(t0)
	f := newFake(t, clk, clockifytest.Options{})
	for _, id := range []string{"65f0000000000000000000e1", "65f0000000000000000000e2", "65f0000000000000000000e3"} {
		f.PutTimeEntry(entry(id, userA, t0.Add(-24*time.Hour), 90*time.Minute))
	}
	c := newClient(t, f, nil)
	clk.Advance(10 * time.Minute)
	pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{})
	if err != nil {
		t.Fatal(err)
	}
	got := sourcetest.Records(pages)
	if len(got) != 3 {
		t.Fatalf("first sync: %d records", len(got))
	}
	for id, v := range f.Versions(clients.TimeEntries) {
		if h := schema.TimeEntries.Decimal(got[id], "hours"); !got[id].Version.Equal(v) || h != "1.5" {
			t.Errorf("%s: version %v hours %s, want %v", id, got[id].Version, h, v)
		}
	}
	cursor := t0.Add(5 * time.Minute) // after the first sync's changes

	// Changes: an edit, a new entry, a deletion, and an entry created and
	// deleted at once (left out of every feed).
	e1 := entry("65f0000000000000000000e1", userA, t0.Add(-24*time.Hour), 8*time.Hour+30*time.Minute)
	f.PutTimeEntry(e1)
	f.PutTimeEntry(entry("65f0000000000000000000e4", userB, t0, 45*time.Minute))
	f.Delete(clients.TimeEntries, "65f0000000000000000000e2")
	f.PutTimeEntry(entry("65f0000000000000000000e5", userB, t0, time.Hour))
	f.Delete(clients.TimeEntries, "65f0000000000000000000e5")
	deletedAt := f.Deleted(clients.TimeEntries)["65f0000000000000000000e2"]

	// 30 s later the changes are inside the safety lag: nothing yet.
	clk.Advance(30 * time.Second)
	pages, err = sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{UpdatedSince: cursor})
	if err != nil || len(sourcetest.Records(pages)) != 0 {
		t.Fatalf("within the lag: %v %v", err, sourcetest.Records(pages))
	}
	// After the lag: the edit, the new entry and a tombstone.
	clk.Advance(2 * time.Minute)
	pages, err = sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{UpdatedSince: cursor})
	if err != nil {
		t.Fatal(err)
	}
	got = sourcetest.Records(pages)
	if len(got) != 3 {
		t.Fatalf("records %v", got)
	}
	te := schema.TimeEntries
	if r := got["65f0000000000000000000e1"]; te.Decimal(r, "hours") != "8.5" || !r.Version.Equal(f.Versions(clients.TimeEntries)[r.ID]) || r.DeletedAt != nil {
		t.Errorf("edited entry %+v %#v", r, r.Row)
	}
	if r := got["65f0000000000000000000e4"]; te.Decimal(r, "hours") != "0.75" || te.Text(r, "user_id") != userB {
		t.Errorf("new entry %+v %#v", r, r.Row)
	}
	tomb := got["65f0000000000000000000e2"]
	if tomb.DeletedAt == nil || !tomb.DeletedAt.Equal(deletedAt) || !tomb.Version.Equal(deletedAt) || tomb.Row != nil || len(tomb.Raw) == 0 {
		t.Errorf("tombstone %+v", tomb)
	}
	// Every page carries the end of what the feed listed (the fake's clock
	// less the safety lag): the poller caps the high water by it.
	for _, p := range pages {
		if !p.SourceTime.Equal(t0.Add(12*time.Minute + 30*time.Second - clockify.DefaultSafetyLag)) {
			t.Errorf("page %d SourceTime %v, want the end of the last feed window", p.Number, p.SourceTime)
		}
	}
}

func TestDeletionReachesFeedAMinuteLate(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(t0)
	f := newFake(t, clk, clockifytest.Options{})
	f.PutTimeEntry(entry("65f0000000000000000000e1", userA, t0.Add(-time.Hour), time.Hour))
	clk.Advance(time.Hour)
	f.Delete(clients.TimeEntries, "65f0000000000000000000e1")
	// With no safety lag, a pass 30 s after the deletion misses it: the
	// feed does not show it yet.
	c := newClient(t, f, func(p *clockify.Params, _ *httpx.Config) { p.SafetyLag = time.Nanosecond })
	clk.Advance(30 * time.Second)
	pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{UpdatedSince: t0.Add(30 * time.Minute)})
	if err != nil || len(sourcetest.Records(pages)) != 0 {
		t.Fatalf("deletion visible too early: %v %v", err, sourcetest.Records(pages))
	}
	clk.Advance(time.Minute)
	pages, err = sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{UpdatedSince: t0.Add(30 * time.Minute)})
	if r := sourcetest.Records(pages)["65f0000000000000000000e1"]; err != nil || r.DeletedAt == nil {
		t.Fatalf("deletion after a minute: %v %+v", err, r)
	}
}

func TestPerUserListingPaginationExactRequests(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(t0)
	f := newFake(t, clk, clockifytest.Options{})
	for _, u := range []string{userA, userB, userC} {
		f.PutUser(clockifytest.User{ID: u, Name: "User " + u[len(u)-2:], Email: u + "@example.com"})
	}
	day := t0.Add(-10 * 24 * time.Hour)
	ids := putEntries(f, userA, 25, day, time.Hour, time.Hour)
	putEntries(f, userB, 10, day, time.Hour, 30*time.Minute)
	// An entry outside the range.
	f.PutTimeEntry(entry(clockifytest.NewID(), userA, day.Add(-48*time.Hour), time.Hour))
	// The entries' project, with its client (the entries carry none). A
	// pass lists projects before time entries: the client knows every
	// project's client then, and the entries cost no further request.
	f.PutProject(clockifytest.Project{ID: "65f0000000000000000000f1", Name: "Web", ClientID: "65f0000000000000000000c1"})
	c := newClient(t, f, func(p *clockify.Params, _ *httpx.Config) { p.PageSize = 10 })
	warm := func(c *clockify.Client, rs ...clients.Resource) {
		for _, r := range rs {
			if _, err := sourcetest.Collect(t, c, r, clients.Window{}); err != nil {
				t.Fatal(err)
			}
		}
		f.ResetRequests()
	}
	warm(c, clients.Projects)
	from, to := clients.DateOf(day), clients.DateOf(day.Add(24*time.Hour))
	pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{From: from, To: to})
	if err != nil {
		t.Fatal(err)
	}
	// users (1 short page) + A: 10, 10, 7 + B: 10, 1 + C: 0: after a full
	// page, page 1 again with `end` at the start of its last entry (keyset),
	// which that entry is served again on; nothing is walked twice.
	if n := f.RequestCount(); n != 7 || len(pages) != 6 {
		t.Fatalf("%d requests, %d pages; want 7 and 6", n, len(pages))
	}
	got := sourcetest.Records(pages)
	if len(got) != 35 {
		t.Fatalf("%d records, want 35", len(got))
	}
	live := f.Live(clients.TimeEntries)
	for i, p := range pages {
		if p.Number != i+1 {
			t.Errorf("page %d numbered %d", i+1, p.Number)
		}
		for _, r := range p.Records {
			if !r.Version.Equal(p.SourceTime.Add(-clockify.DefaultSafetyLag)) || !p.SourceTime.Equal(t0) {
				t.Errorf("%s: version %v, want the page's clock %v less the safety lag", r.ID, r.Version, p.SourceTime)
			}
			want := live[r.ID]
			if !reflect.DeepEqual(r.Row, want.Row) {
				t.Errorf("%s: %#v\nwant %#v", r.ID, r.Row, want.Row)
			}
			if !bytes.HasPrefix(r.Raw, []byte(`{`)) || !bytes.Contains(r.Raw, []byte(`"id":"`+r.ID+`"`)) {
				t.Errorf("raw %s", r.Raw)
			}
		}
	}
	for _, id := range ids {
		if _, ok := got[id]; !ok {
			t.Errorf("id %s missing (ids are kept as strings)", id)
		}
	}
	q := f.Requests()[1].Query
	// One day wider on each side: spent dates are in the users' zones.
	if q.Get("start") != from.AddDays(-1).String()+"T00:00:00Z" || q.Get("end") != to.AddDays(2).String()+"T00:00:00Z" || q.Get("page") != "1" || q.Get("page-size") != "10" {
		t.Errorf("query %v", q)
	}
	// Configured user ids skip the users listing.
	f.ResetRequests()
	c = newClient(t, f, func(p *clockify.Params, _ *httpx.Config) { p.PageSize = 10; p.UserIDs = []string{userB} })
	warm(c, clients.Users, clients.Projects)
	if _, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{From: from, To: to}); err != nil || f.RequestCount() != 2 {
		t.Fatalf("err %v after %d requests, want 2 (B's full page, then page 1 below it)", err, f.RequestCount())
	}
}

func TestReferenceResources(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(t0)
	f := newFake(t, clk, clockifytest.Options{})
	f.PutClient(clockifytest.Client{ID: "c1", Name: "ACME", CurrencyCode: "EUR"})
	f.PutClient(clockifytest.Client{ID: "c2", Name: "Old", Archived: true})
	f.PutProject(clockifytest.Project{ID: "p1", Name: "Web", ClientID: "c1", Billable: true})
	f.PutProject(clockifytest.Project{ID: "p2", Name: "Internal"})
	f.PutTask(clockifytest.Task{ID: "t1", ProjectID: "p1", Name: "Design"})
	f.PutTask(clockifytest.Task{ID: "t2", ProjectID: "p2", Name: "Ops", Status: "DONE"})
	f.PutUser(clockifytest.User{ID: userA, Name: "Kim Allen", Email: "kim@example.com"})
	f.PutUser(clockifytest.User{ID: userB, Name: "Gone", Status: "INACTIVE"})
	c := newClient(t, f, nil)
	for _, r := range []clients.Resource{clients.Clients, clients.Projects, clients.Tasks, clients.Users} {
		f.ResetRequests()
		pages, err := sourcetest.Collect(t, c, r, clients.Window{UpdatedSince: t0})
		if err != nil {
			t.Fatal(err)
		}
		got, live := sourcetest.Records(pages), f.Live(r)
		if len(got) != len(live) {
			t.Errorf("%s: %d records, want %d", r, len(got), len(live))
		}
		for id, rec := range got {
			w := live[id]
			rec.Raw, rec.FetchedAt = nil, time.Time{}
			if !rec.Version.Equal(t0.Add(-clockify.DefaultSafetyLag)) {
				t.Errorf("%s %s: version %v, want the page's clock less the safety lag", r, id, rec.Version)
			}
			rec.Version = time.Time{}
			if !reflect.DeepEqual(rec, w) {
				t.Errorf("%s %s: %+v, want %+v", r, id, rec, w)
			}
		}
		want := 1
		if r == clients.Tasks {
			want = 3 // projects, then each project's tasks
		}
		if f.RequestCount() != want {
			t.Errorf("%s: %d requests, want %d", r, f.RequestCount(), want)
		}
	}
	if _, err := sourcetest.Collect(t, c, clients.Projects, clients.Window{From: clients.DateOf(t0)}); !errors.Is(err, clients.ErrUnsupported) {
		t.Errorf("projects by date: %v", err)
	}
}

func TestWrongKeyIsUnauthorizedNotRetriedNotLeaked(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(t0)
	f := newFake(t, clk, clockifytest.Options{})
	const bad = "wrong-secret-api-key-xyz"
	var sink sourcetest.SyncBuffer
	c := newClient(t, f, func(p *clockify.Params, h *httpx.Config) {
		if h.Headers == nil { // the Params pass, not the httpx.Config one
			p.Token = bad
			p.Logger = zerolog.New(&sink).Level(zerolog.DebugLevel)
		}
	})
	f.RateLimitNext(1, "") // a logged wait
	_, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{})
	if !errors.Is(err, httpx.ErrUnauthorized) || f.RequestCount() != 2 {
		t.Fatalf("err = %v after %d requests, want 2 (one 429, one 401 not retried)", err, f.RequestCount())
	}
	if sink.String() == "" {
		t.Fatal("nothing was logged: the check below would prove nothing")
	}
	if strings.Contains(err.Error(), bad) || strings.Contains(sink.String(), bad) {
		t.Fatalf("key leaked: %v\n%s", err, sink.String())
	}
	// The key is redacted from a body that echoes it.
	f.PutTimeEntry(entry("65f0000000000000000000e1", userA, t0, time.Hour))
	f.Malform("time-entries", 1, fakeapi.BadDuration)
	c = newClient(t, f, func(p *clockify.Params, _ *httpx.Config) { p.UserIDs = []string{userA}; p.Token = f.Token() })
	_, err = sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{From: clients.DateOf(t0), To: clients.DateOf(t0)})
	if !errors.Is(err, httpx.ErrDecode) || !strings.Contains(err.Error(), "decode acme time_entries page 1: field time_entries[0].timeInterval.duration") {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(err.Error(), f.Token()) {
		t.Fatal("key in error")
	}
}

func TestRateLimitedAndFailingRequests(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(t0)
	f := newFake(t, clk, clockifytest.Options{})
	f.PutUser(clockifytest.User{ID: userA, Name: "A"})
	c := newClient(t, f, func(_ *clockify.Params, h *httpx.Config) { h.MaxAttempts = 1 })
	f.RateLimitNext(2, "")
	start := time.Now()
	if _, err := sourcetest.Collect(t, c, clients.Users, clients.Window{}); err != nil {
		t.Fatal(err)
	}
	if f.RequestCount() != 3 || time.Since(start) < 40*time.Millisecond {
		t.Fatalf("%d requests in %v, want 3 with two default waits", f.RequestCount(), time.Since(start))
	}
	f.ResetRequests()
	c = newClient(t, f, func(_ *clockify.Params, h *httpx.Config) { h.MaxAttempts = 3 })
	f.FailNext(100, 503)
	if _, err := sourcetest.Collect(t, c, clients.Users, clients.Window{}); !errors.Is(err, httpx.ErrStatus) || f.RequestCount() != 3 {
		t.Fatalf("err %v after %d requests, want 3", err, f.RequestCount())
	}
	f.FailNext(0, 0)
	// The fake's own limit: every 429 is waited out, nothing fails.
	g := newFake(t, clk, clockifytest.Options{RateLimit: httpx.RateLimit{Requests: 2, Per: 200 * time.Millisecond}})
	for range 5 {
		g.PutProject(clockifytest.Project{ID: clockifytest.NewID(), Name: "p"})
	}
	c = newClient(t, g, func(p *clockify.Params, _ *httpx.Config) { p.PageSize = 1 })
	pages, err := sourcetest.Collect(t, c, clients.Projects, clients.Window{})
	if err != nil || len(sourcetest.Records(pages)) != 5 {
		t.Fatalf("err %v, %d records", err, len(sourcetest.Records(pages)))
	}
}

func TestMalformedFeedPageNamesPageAndField(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(t0)
	f := newFake(t, clk, clockifytest.Options{Envelope: true})
	f.PutTimeEntry(entry("65f0000000000000000000e1", userA, t0, time.Hour))
	clk.Advance(time.Hour)
	c := newClient(t, f, nil)
	if pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{UpdatedSince: t0.Add(-time.Minute)}); err != nil || len(sourcetest.Records(pages)) != 1 {
		t.Fatalf("envelope: %v %v", err, sourcetest.Records(pages))
	}
	for m, field := range map[fakeapi.Malformation]string{
		fakeapi.HTMLPage:       "field (page)",
		fakeapi.BadJSON:        "field (page)",
		fakeapi.MissingVersion: "field time_entries[0].createdAt",
		fakeapi.MissingID:      "field time_entries[0].document.id",
		fakeapi.BadDuration:    "field time_entries[0].document.timeInterval.duration",
	} {
		f.Malform("entities/created", 0, m)
		_, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{UpdatedSince: t0.Add(-time.Minute)})
		if !errors.Is(err, httpx.ErrDecode) || !strings.Contains(err.Error(), "decode acme time_entries page 1: "+field) {
			t.Errorf("malformation %d: %v", m, err)
		}
	}
}

func TestParamsValidate(t *testing.T) {
	t.Parallel()
	sourcetest.WantValidation(t, clockify.New, clockify.Params{Base: provider.Base{Name: "acme", Token: "k"}, WorkspaceID: "65f0aaaaaaaaaaaaaaaaaaaa"}, []sourcetest.Refusal[clockify.Params]{
		{Key: "workspace_id", Change: func(p *clockify.Params) { p.WorkspaceID = "" }},
		{Key: "workspace_id", Change: func(p *clockify.Params) { p.WorkspaceID = "a/b" }},
		{Key: "user_ids[0]", Change: func(p *clockify.Params) { p.UserIDs = []string{"x y"} }},
		{Key: "page_size", Change: func(p *clockify.Params) { p.PageSize = 5001 }},
	})
}

// A date window hands over exactly the entries whose spent_date (the
// start's day in the user's zone) is in it, though Clockify filters on the
// UTC instant: a reconcile tombstones what it was not handed in the window,
// so a Tokyo morning or a Los Angeles evening must not fall out of it.
func TestDateWindowFollowsTheUsersZones(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(t0)
	f := newFake(t, clk, clockifytest.Options{})
	f.PutUser(clockifytest.User{ID: userA, Name: "A", TimeZone: "America/Los_Angeles"})
	f.PutUser(clockifytest.User{ID: userB, Name: "B", TimeZone: "Asia/Tokyo"})
	day := clients.Date{Year: 2026, Month: 3, Day: 1}
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	f.PutTimeEntry(entry("65f0000000000000000000d1", userB, at("2026-02-28T16:00:00Z"), time.Hour)) // 1 March, 01:00 in Tokyo
	f.PutTimeEntry(entry("65f0000000000000000000d2", userA, at("2026-03-02T04:00:00Z"), time.Hour)) // 1 March, 20:00 in LA
	f.PutTimeEntry(entry("65f0000000000000000000d3", userB, at("2026-03-01T17:00:00Z"), time.Hour)) // 2 March in Tokyo
	f.PutTimeEntry(entry("65f0000000000000000000d4", userA, at("2026-03-01T04:00:00Z"), time.Hour)) // 28 February in LA
	clk.Advance(time.Minute)
	c := newClient(t, f, nil)
	pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{From: day, To: day})
	if err != nil {
		t.Fatal(err)
	}
	got := sourcetest.Records(pages)
	for _, id := range []string{"65f0000000000000000000d1", "65f0000000000000000000d2"} {
		if _, ok := got[id]; !ok {
			t.Errorf("%s, dated in the window, was not handed over", id)
		}
	}
}

// An entry the listing finds dated just outside the reconcile's window,
// whose stored row is dated inside (a stale row: a zone changed, an edit
// missed), is handed over with the window and so not tombstoned.
func TestReconcileKeepsAnEntryDatedJustOutside(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC().Truncate(time.Second)
	clk := fakeapi.NewClock(now)
	f := newFake(t, clk, clockifytest.Options{})
	f.PutUser(clockifytest.User{ID: userA, Name: "A", TimeZone: "UTC"})
	const lookback = 3
	from := clients.DateOf(now).AddDays(-lookback)
	const id = "65f0000000000000000000e9"
	f.PutTimeEntry(entry(id, userA, from.AddDays(-1).Time().Add(12*time.Hour), time.Hour)) // the day before the window
	clk.Advance(5 * time.Minute)                                                           // past the feed's safety lag
	c := newClient(t, f, nil)
	p, pool := sourcetest.Mirror(t, poller.Source{Source: c,
		Resources: []clients.Resource{clients.TimeEntries}, Overlap: 3 * time.Minute, LookbackDays: lookback})
	ctx := t.Context()
	if _, err := p.Incremental(ctx, c.Name()); err != nil {
		t.Fatal(err)
	}
	if tag, err := pool.Exec(ctx, `UPDATE time_entries SET spent_date = $1 WHERE id = $2`, from.Time(), id); err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("the entry was not mirrored by the first pass (%v)", err)
	}
	clk.Advance(time.Minute)
	if _, err := p.Reconcile(ctx, c.Name()); err != nil {
		t.Fatal(err)
	}
	var deleted bool
	if err := pool.QueryRow(ctx, `SELECT deleted_at IS NOT NULL FROM time_entries WHERE id = $1`, id).Scan(&deleted); err != nil || deleted {
		t.Fatalf("a live entry dated the day before the window was tombstoned (%v)", err)
	}
}

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

// The feed pages by page number over a live list: an entry leaving the list
// mid-walk shifts the rest back, and the one at the page boundary is never
// served. A multi-page window is walked twice, so no live entry is lost.
func TestFeedWalkSurvivesAnEntryLeavingMidWalk(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(t0)
	f := newFake(t, clk, clockifytest.Options{})
	var ids []string
	for i := range 7 {
		id := clockifytest.NewID()
		ids = append(ids, id)
		at := t0.Add(-30*time.Minute + time.Duration(i)*time.Second)
		end := at.Add(time.Hour)
		f.PutTimeEntry(clockifytest.TimeEntry{ID: id, UserID: "u1", Start: at, End: &end, CreatedAt: at, UpdatedAt: at})
	}
	c := newClient(t, f, func(p *clockify.Params, _ *httpx.Config) { p.FeedLimit = 3 })

	seen := map[string]bool{}
	deleted := false
	err := c.List(t.Context(), clients.TimeEntries, clients.Window{UpdatedSince: t0.Add(-time.Hour)},
		func(_ context.Context, p clients.Page) error {
			for _, r := range p.Records {
				if r.DeletedAt == nil {
					seen[r.ID] = true
				}
			}
			if !deleted && len(p.Records) > 0 {
				// The first entry leaves the list after the first page.
				deleted = f.Delete(clients.TimeEntries, ids[0])
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	requireAll(t, seen, ids[1:])
}

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

// pass lists the feed from since as the poller does and returns the new
// high water: the newest version seen, capped by the first page's
// SourceTime (poller.applyListing).
func pass(t *testing.T, c *clockify.Client, since time.Time, seen map[string]bool) time.Time {
	t.Helper()
	var hw, capAt time.Time
	first := true
	err := c.List(t.Context(), clients.TimeEntries, clients.Window{UpdatedSince: since}, func(_ context.Context, p clients.Page) error {
		if first {
			capAt, first = p.SourceTime, false
		}
		for _, r := range p.Records {
			seen[r.ID] = true
			if r.Version.After(hw) {
				hw = r.Version
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !capAt.IsZero() && hw.After(capAt) {
		hw = capAt
	}
	return hw
}

// Feed windows end SafetyLag before the source's clock. If the pages said
// "now", a change stamped inside the lag (read) would lift the high water
// past entries created inside the lag (not read), and with an overlap under
// the lag the next pass would start after them: lost for good.
func TestEntryCreatedWithinSafetyLagIsReadByTheNextPass(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(t0)
	f := newFake(t, clk, clockifytest.Options{})
	// A: created before the window's end, edited 5 s before the pass: its
	// /created element carries the later stamp.
	a := entry("65f0000000000000000000a1", userA, t0.Add(-time.Hour), time.Hour)
	a.CreatedAt, a.UpdatedAt = t0.Add(-10*time.Minute), t0.Add(-5*time.Second)
	f.PutTimeEntry(a)
	// B: created a minute before the pass, inside the lag.
	b := entry("65f0000000000000000000b1", userA, t0.Add(-time.Hour), time.Hour)
	b.CreatedAt, b.UpdatedAt = t0.Add(-time.Minute), t0.Add(-time.Minute)
	f.PutTimeEntry(b)
	c := newClient(t, f, nil)

	const overlap = 30 * time.Second
	seen := map[string]bool{}
	hw := pass(t, c, t0.Add(-30*time.Minute), seen)
	if !seen[a.ID] || seen[b.ID] {
		t.Fatalf("first pass saw %v; want A only", seen)
	}
	if lim := t0.Add(-clockify.DefaultSafetyLag); hw.After(lim) {
		t.Errorf("high water %v is past the end of what was listed (%v)", hw, lim)
	}
	clk.Advance(5 * time.Minute)
	pass(t, c, hw.Add(-overlap), seen)
	if !seen[b.ID] {
		t.Fatalf("entry created within the safety lag before a pass was never read")
	}
}

// With user_ids configured, a listing by date covers only those users: a
// reconcile must tombstone nothing of anyone else's (clients.Scoper).
func TestListScope(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(t0)
	f := newFake(t, clk, clockifytest.Options{})
	d := clients.DateOf(t0)
	byDate := clients.Window{From: d, To: d}
	c := newClient(t, f, func(p *clockify.Params, _ *httpx.Config) { p.UserIDs = []string{userA, userB} })
	if got := clients.ScopeOf(c, clients.TimeEntries, byDate); !reflect.DeepEqual(got.UserIDs, []string{userA, userB}) {
		t.Errorf("by date with user_ids: %+v", got)
	}
	for _, tc := range []struct {
		r clients.Resource
		w clients.Window
	}{{clients.TimeEntries, clients.Window{UpdatedSince: t0}}, {clients.Users, clients.Window{}}, {clients.Projects, clients.Window{}}} {
		if got := clients.ScopeOf(c, tc.r, tc.w); got.UserIDs != nil {
			t.Errorf("%s %+v: %+v, want the whole workspace", tc.r, tc.w, got)
		}
	}
	every := newClient(t, f, nil)
	if got := clients.ScopeOf(every, clients.TimeEntries, byDate); got.UserIDs != nil {
		t.Errorf("every user listed: %+v, want the zero scope", got)
	}
}

func TestOverlapShorterThanSafetyLagIsRefused(t *testing.T) {
	t.Parallel()
	p := clockify.Params{Base: provider.Base{Name: "acme", Token: "k"}, WorkspaceID: "65f0aaaaaaaaaaaaaaaaaaaa", Overlap: time.Minute}
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Errorf("overlap 1m, lag 2m: %v", err)
	}
	p.Overlap = clockify.DefaultSafetyLag
	if err := p.Validate(); err != nil {
		t.Errorf("overlap = lag: %v", err)
	}
	p.Overlap, p.SafetyLag = 5*time.Minute, 10*time.Minute
	if err := p.Validate(); err == nil {
		t.Errorf("overlap 5m, lag 10m accepted")
	}
}

// listIDs lists and returns the ids served (live records only).
func listIDs(t *testing.T, ctx context.Context, c *clockify.Client, w clients.Window) map[string]bool {
	t.Helper()
	pages, err := sourcetest.CollectContext(ctx, c, clients.TimeEntries, w)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, p := range pages {
		for _, r := range p.Records {
			if r.DeletedAt == nil {
				got[r.ID] = true
			}
		}
	}
	return got
}

// A per-user listing (backfill, reconcile) pages by number over a live
// list: an entry deleted, or moved out of the range, on page 1 while the
// client is between pages shifts the rest up, and the first entry of page 2
// is never served.
func TestPerUserListingLosesNothingWhenAnEntryLeavesMidWalk(t *testing.T) {
	t.Parallel()
	sourcetest.EachChange(t, func(t *testing.T, deleted bool) {
		clk := fakeapi.NewClock(t0)
		f := newFake(t, clk, clockifytest.Options{})
		day := t0.Add(-10 * 24 * time.Hour)
		ids := putEntries(f, userA, 25, day, time.Minute, time.Minute)
		victim := ids[24] // newest start first: the first entry of page 1
		var once sync.Once
		var listed atomic.Int32
		f.OnList(func(rq fakeapi.Request) {
			if !strings.HasSuffix(rq.Path, "/time-entries") || listed.Add(1) != 2 {
				return // between the first two pages
			}
			once.Do(func() {
				if deleted {
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
		requireAll(t, got, ids[:24])
		// Keyset by `end`: three pages, nothing walked again.
		if n := f.RequestCount(); n > 5 {
			t.Errorf("%d requests", n)
		}
	})
}

// The change feed pages by number too: an entry leaving /created (deleted)
// or /updated (updated again, out of the window) mid-walk on a first sync
// must not cost another entry.
func TestFeedLosesNothingWhenAnEntryLeavesMidWalk(t *testing.T) {
	t.Parallel()
	sourcetest.EachChange(t, func(t *testing.T, deleted bool) {
		clk := fakeapi.NewClock(t0)
		f := newFake(t, clk, clockifytest.Options{})
		feed := "/workspaces/" + f.WorkspaceID() + "/entities/created"
		created := t0.Add(-30 * time.Minute)
		if !deleted {
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
				if deleted {
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
		requireAll(t, got, ids[1:])
	})
}

// A per-user list that runs past MaxPages is cut short on our side:
// ErrCapped, never a quiet success.
func TestPerUserListingBeyondMaxPagesIsCapped(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(t0)
	f := newFake(t, clk, clockifytest.Options{})
	day := t0.Add(-10 * 24 * time.Hour)
	putEntries(f, userA, 25, day, time.Minute, time.Minute)
	c := newClient(t, f, func(p *clockify.Params, _ *httpx.Config) {
		p.PageSize, p.UserIDs, p.MaxPages = 10, []string{userA}, 2
	})
	d := clients.DateOf(day)
	_, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{From: d, To: d})
	if !errors.Is(err, clients.ErrCapped) {
		t.Fatalf("err = %v, want ErrCapped", err)
	}
}

func TestMain(m *testing.M) { pgtest.Main(m) }

// The change feed (time entries only) reports deletions. Projects,
// clients, users and tasks are listed whole, every pass, with no stamp of
// their own: a listing's clock versions them and a deleted one only
// vanishes, so reconcile finds it.
//
// The fake runs without its deletion delay and the client with a
// one-second SafetyLag: the suite's clock moves seconds at a time. The
// delay and the lag together are tested above. Listed records are stamped
// the lag before their page's Date; the suite moves its clock a second on
// after each put, so they are still not earlier than the fake's stamps
// (ListingClock).
func TestConformance(t *testing.T) {
	caps := conformance.Capabilities{
		Deletions:    map[clients.Resource]conformance.Deletion{clients.TimeEntries: conformance.Reported},
		ListingClock: map[clients.Resource]bool{},
		ListedWhole:  map[clients.Resource]bool{},
	}
	for _, r := range []clients.Resource{clients.Projects, clients.Clients, clients.Users, clients.Tasks} {
		caps.Deletions[r] = conformance.Reconciled
		caps.ListingClock[r], caps.ListedWhole[r] = true, true
	}
	caps.Scopes = []string{"workspace", "users"}
	conformance.Run(t, conformance.Provider[*clockifytest.Server]{
		Caps: caps,
		Fake: func(now func() time.Time) *clockifytest.Server {
			return clockifytest.New(clockifytest.Options{NoRateLimit: true, NoDeletionDelay: true, Clock: now})
		},
		Source: func(f *clockifytest.Server, o conformance.Options, log zerolog.Logger) (clients.Source, error) {
			return clockify.New(clockify.Params{
				Base: provider.Base{Name: "clockify-conf", BaseURL: f.URL(), Token: f.Token(),
					RateLimit: o.RateLimit, Resources: clockify.Resources, Env: provider.Env{Logger: log, OnResponse: o.OnResponse}},
				WorkspaceID: f.WorkspaceID(), SafetyLag: time.Second,
				FirstSyncDays: 1, // the suite's entries are all recent; fewer requests per listing
				PageSize:      o.PageSize, UserIDs: conformanceUsers[o.Scope],
			})
		},
		Put: conformancePut,
		Delete: func(f *clockifytest.Server, r clients.Resource, id int64) {
			f.Delete(r, strconv.FormatInt(id, 10))
		},
	})
}

// conformanceUsers are the UserIDs of each scope the suite builds a
// source in: every user of the workspace, or the one configured.
var conformanceUsers = map[string][]string{"users": {userID}}

// Ids the suite's records point at.
const (
	userID    = "65f0cccccccccccccccccccc"
	projectID = "65f0dddddddddddddddddddd"
)

// conformancePut stores content where the mirror's content column reads
// it: an entry's description, a name, or a user's name (first_name). A
// task gets a project to be listed under.
func conformancePut(f *clockifytest.Server, now time.Time, r clients.Resource, id int64, content string) {
	sid := strconv.FormatInt(id, 10)
	switch r {
	case clients.TimeEntries:
		f.PutTimeEntry(clockifytest.TimeEntry{
			ID: sid, UserID: userID, ProjectID: projectID, Description: &content, Start: now.Add(-90 * time.Minute), End: &now,
		})
	case clients.Projects:
		f.PutProject(clockifytest.Project{ID: sid, Name: content, Billable: true})
	case clients.Clients:
		f.PutClient(clockifytest.Client{ID: sid, Name: content, CurrencyCode: "EUR"})
	case clients.Users:
		f.PutUser(clockifytest.User{ID: sid, Name: content, Email: "u@example.com"})
	case clients.Tasks:
		if _, ok := f.Versions(clients.Projects)[projectID]; !ok {
			f.PutProject(clockifytest.Project{ID: projectID, Name: "parent"})
		}
		f.PutTask(clockifytest.Task{ID: sid, ProjectID: projectID, Name: content})
	default:
		panic("clockify conformance: no record for " + string(r))
	}
}

// requireAll fails for every id of want that got lacks: a live entry
// the walk never delivered.
func requireAll(t *testing.T, got map[string]bool, want []string) {
	t.Helper()
	for _, id := range want {
		if !got[id] {
			t.Errorf("live entry %s was never delivered", id)
		}
	}
}

// The budget planner's count of a pass, of a pass by the fallback
// listings and of a reconcile run, held against the fake's request log
// (one user, one project, data of one page per listing).
func TestPassCostMatchesTheRequestLog(t *testing.T) {
	t.Parallel()
	for _, feed := range []int{0, 404} {
		t.Run(fmt.Sprintf("feed status %d", feed), func(t *testing.T) {
			t.Parallel()
			clk := fakeapi.NewClock(t0)
			f := newFake(t, clk, clockifytest.Options{FeedStatus: feed, NoDeletionDelay: true, NoRateLimit: true})
			f.PutUser(clockifytest.User{ID: userA, Name: "A"})
			f.PutProject(clockifytest.Project{ID: "65f0000000000000000000f1", Name: "P"})
			f.PutTimeEntry(entry("65f0000000000000000000e1", userA, t0.Add(-3*time.Hour), time.Hour))
			c := newClient(t, f, nil)
			// In steady state a pass reads the interval plus the overlap;
			// this one reads from since to the safety lag before now.
			span := 15 * time.Minute
			shape := provider.PassShape{Span: span - clockify.DefaultSafetyLag, Projects: 1, Users: 1}
			sourcetest.CheckPassCost(t, c, f, clockify.Resources,
				func(clients.Resource) clients.Window { return clients.Window{UpdatedSince: t0.Add(-span)} },
				func(r clients.Resource) provider.Cost {
					cost := clockify.PassCost(r, shape, provider.Settings{})
					if feed != 0 && cost.Fallback > 0 {
						cost.Requests = cost.Fallback
					}
					return cost
				})
			shape.Reconcile, shape.Days = true, 98
			sourcetest.CheckPassCost(t, c, f, clockify.Resources, sourcetest.ReconcileWindow(clients.DateOf(t0), 90),
				func(r clients.Resource) provider.Cost { return clockify.PassCost(r, shape, provider.Settings{}) })
		})
	}
}

// A listing shows an entry as Clockify read it, and its Date comes a little
// later: a change committed in between (a second boundary, or Clockify's
// front ends' clocks ahead of its database's) has a feed stamp before that
// Date. The listed state must still read as older than the change's, or
// the version guard would drop the change as stale.
func TestChangeJustBeforeAListingsDateIsNewerThanTheListing(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(t0)
	f := newFake(t, clk, clockifytest.Options{NoDeletionDelay: true})
	f.PutUser(clockifytest.User{ID: userA, Name: "A"})
	e := entry("65f0000000000000000000e1", userA, t0.Add(-2*time.Hour), time.Hour)
	f.PutTimeEntry(e)
	clk.Advance(10 * time.Minute)
	c := newClient(t, f, nil)

	day := clients.DateOf(t0)
	pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{From: day, To: day})
	if err != nil {
		t.Fatal(err)
	}
	listed, ok := sourcetest.Records(pages)[e.ID]
	date := pages[0].SourceTime
	if !ok || date.IsZero() {
		t.Fatalf("listing: %+v", pages)
	}
	// The change the listing did not see, committed a second before its Date.
	notes := "changed"
	e.Description, e.CreatedAt, e.UpdatedAt = &notes, time.Time{}, date.Add(-time.Second)
	f.PutTimeEntry(e)
	clk.Advance(10 * time.Minute)
	pages, err = sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{UpdatedSince: t0})
	if err != nil {
		t.Fatal(err)
	}
	fed, ok := sourcetest.Records(pages)[e.ID]
	if !ok {
		t.Fatalf("the feed did not bring the change: %+v", pages)
	}
	if !fed.Version.After(listed.Version) {
		t.Errorf("the change's feed version %v is not after the listing's %v (Date %v): it would be dropped as stale",
			fed.Version, listed.Version, date)
	}
}

// An idle workspace's feed window stays short: each complete read covers
// up to DeletionSpan before its end, so months without a change cost three
// feed requests a pass, not three per FeedWindow of idle time.
func TestIdleFeedWindowStaysShort(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(t0)
	f := newFake(t, clk, clockifytest.Options{})
	f.PutUser(clockifytest.User{ID: userA, Name: "A"})
	f.PutTimeEntry(entry("65f0000000000000000000a1", userA, t0.Add(-time.Hour), 30*time.Minute))
	clk.Advance(5 * time.Minute)
	c := newClient(t, f, nil)
	p, _ := sourcetest.Mirror(t, poller.Source{Source: c, Resources: []clients.Resource{clients.TimeEntries}, Overlap: time.Minute})
	for i := range 15 { // idle passes ten minutes apart write no cursor
		res, err := p.Incremental(t.Context(), c.Name())
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && res[0].HighWaterAfter.After(res[0].HighWaterBefore) {
			t.Fatalf("idle pass %d moved the cursor %s → %s: a write every idle pass", i, res[0].HighWaterBefore, res[0].HighWaterAfter)
		}
		clk.Advance(10 * time.Minute)
	}
	for range 12 { // 60 days without a change
		if _, err := p.Incremental(t.Context(), c.Name()); err != nil {
			t.Fatal(err)
		}
		clk.Advance(5 * 24 * time.Hour)
	}
	f.ResetRequests()
	if _, err := p.Incremental(t.Context(), c.Name()); err != nil {
		t.Fatal(err)
	}
	// Distinct requests: on a busy machine a request may time out and be
	// sent again, which says nothing of the window.
	asked := map[string]bool{}
	for _, rq := range f.Requests() {
		if strings.Contains(rq.Path, "/entities/") {
			asked[rq.Path+"?"+rq.Query.Encode()] = true
		}
	}
	if feed := len(asked); feed != 3 {
		t.Fatalf("an idle pass after 60 quiet days read the feed %d times, want 3 (created, updated, deleted)", feed)
	}
}

// Issue 23, item 9: an entry's client comes from its project (the listing
// does not carry it), so it is hashed with the raw (Record.Derived): after
// the project moves to another client and the projects are listed again,
// the unchanged entry comes with the new client and another Derived, which
// the write takes as new content.
func TestEntryDerivedClientFollowsItsProject(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(t0)
	f := newFake(t, clk, clockifytest.Options{})
	const proj, c1, c2 = "65f0000000000000000000f7", "65f0000000000000000000c7", "65f0000000000000000000c8"
	f.PutUser(clockifytest.User{ID: userA, Name: "A", TimeZone: "Europe/Berlin"})
	f.PutProject(clockifytest.Project{ID: proj, Name: "Web", ClientID: c1})
	e := entry("65f0000000000000000000e1", userA, t0.Add(-5*time.Hour), time.Hour)
	e.ProjectID = proj
	f.PutTimeEntry(e)
	clk.Advance(10 * time.Minute)
	c := newClient(t, f, nil)
	list := func() clients.Record {
		t.Helper()
		pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{From: clients.DateOf(t0).AddDays(-1), To: clients.DateOf(t0)})
		if err != nil {
			t.Fatal(err)
		}
		return sourcetest.Records(pages)["65f0000000000000000000e1"]
	}
	before := list()
	f.PutProject(clockifytest.Project{ID: proj, Name: "Web", ClientID: c2})
	clk.Advance(10 * time.Minute)
	if _, err := sourcetest.Collect(t, c, clients.Projects, clients.Window{}); err != nil {
		t.Fatal(err)
	}
	after := list()
	if string(before.Raw) != string(after.Raw) {
		t.Fatalf("the entry's raw changed: %s → %s", before.Raw, after.Raw)
	}
	if got := schema.TimeEntries.Text(after, "client_id"); got != c2 {
		t.Fatalf("client_id %q after the project moved, want %q", got, c2)
	}
	if bytes.Equal(before.Derived, after.Derived) || !bytes.Contains(after.Derived, []byte(c2)) || !bytes.Contains(after.Derived, []byte("Europe/Berlin")) {
		t.Fatalf("Derived %q then %q: want the new client (and the user's zone) in it", before.Derived, after.Derived)
	}
}

// Issue 22: a user's 1,265 entries over two pages of 1,000, with 3 of the
// entries already served deleted after every full page. A backfill (per
// user, by page number) used to end "still shifting after 3 walks"; keyset
// by `end` finishes in two requests and serves every entry still there.
func TestBackfillFinishesWhileServedEntriesAreDeleted(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(t0)
	f := newFake(t, clk, clockifytest.Options{})
	day := t0.Add(-10 * 24 * time.Hour)
	ids := putEntries(f, userA, 1265, day, time.Minute, time.Minute)
	gone := map[string]bool{}
	f.OnList(func(rq fakeapi.Request) {
		if !strings.HasSuffix(rq.Path, "/time-entries") {
			return
		}
		// The newest entries were served first: delete 3 of them.
		for i, n := len(ids)-1, 0; i >= 0 && n < 3; i-- {
			if !gone[ids[i]] {
				gone[ids[i]] = true
				f.Delete(clients.TimeEntries, ids[i])
				n++
			}
		}
	})
	c := newClient(t, f, func(p *clockify.Params, _ *httpx.Config) { p.PageSize = 1000; p.UserIDs = []string{userA} })
	d := clients.DateOf(day)
	got := listIDs(t, t.Context(), c, clients.Window{From: d, To: d.AddDays(1)})
	var live []string
	for _, id := range ids {
		if !gone[id] {
			live = append(live, id)
		}
	}
	requireAll(t, got, live)
	if n := requestsTo(f, func(path string) bool { return strings.HasSuffix(path, "/time-entries") }); n != 2 {
		t.Errorf("%d requests of time entries, want 2", n)
	}
}

// requestsTo counts the requests f received on paths that match.
func requestsTo(f *clockifytest.Server, match func(path string) bool) int {
	n := 0
	for _, rq := range f.Requests() {
		if match(rq.Path) {
			n++
		}
	}
	return n
}

// The per-user keyset walk goes on below the start of a page's last entry,
// which is the oldest only when the page is newest first (issue 30, item
// 10). A server that serves oldest first (or in any other order) must not
// make the walk skip the entries between: the listing fails visibly, capped,
// and names the order, whatever the window.
func TestPerUserListingOutOfOrderIsCapped(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(t0)
	f := newFake(t, clk, clockifytest.Options{OldestFirst: true})
	day := t0.Add(-10 * 24 * time.Hour)
	ids := putEntries(f, userA, 7, day, time.Hour, time.Minute)
	c := newClient(t, f, func(p *clockify.Params, _ *httpx.Config) { p.PageSize, p.UserIDs = 3, []string{userA} })
	d := clients.DateOf(day)
	got, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{From: d, To: d})
	if !errors.Is(err, clients.ErrCapped) || !strings.Contains(err.Error(), "newest first") {
		t.Fatalf("served %d of %d entries, err = %v; want ErrCapped naming the order", len(sourcetest.IDs(got)), len(ids), err)
	}
	pages := 0
	for _, rq := range f.Requests() {
		if strings.HasSuffix(rq.Path, "/time-entries") {
			pages++
		}
	}
	if pages != 1 {
		t.Errorf("%d pages asked, want the first out-of-order page to end the listing", pages)
	}
}
