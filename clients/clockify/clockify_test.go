package clockify_test

import (
	"bytes"
	"errors"
	"reflect"
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
		Name: "acme", BaseURL: f.URL(), Token: f.Token(), WorkspaceID: f.WorkspaceID(),
		RateLimit: httpx.RateLimit{Requests: 1000, Per: time.Second},
		Logger:    zerolog.New(zerolog.NewTestWriter(t)),
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
	var ids []string
	for i := range 25 {
		id := clockifytest.NewID()
		ids = append(ids, id)
		f.PutTimeEntry(entry(id, userA, day.Add(time.Duration(i)*time.Hour), time.Hour))
	}
	for i := range 10 {
		f.PutTimeEntry(entry(clockifytest.NewID(), userB, day.Add(time.Duration(i)*time.Hour), 30*time.Minute))
	}
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
	// users (1 short page) + A: 10, 10, 5 + B: 10, 0 + C: 0; A and B took
	// several pages of a bare array, so each is walked twice (pagewalk).
	if n := f.RequestCount(); n != 12 || len(pages) != 11 {
		t.Fatalf("%d requests, %d pages; want 12 and 11", n, len(pages))
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
			if !r.Version.Equal(p.SourceTime) || !p.SourceTime.Equal(t0) {
				t.Errorf("%s: version %v, want the page's clock %v", r.ID, r.Version, p.SourceTime)
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
	if q.Get("start") != from.String()+"T00:00:00Z" || q.Get("end") != to.AddDays(1).String()+"T00:00:00Z" || q.Get("page") != "1" || q.Get("page-size") != "10" {
		t.Errorf("query %v", q)
	}
	// Configured user ids skip the users listing.
	f.ResetRequests()
	c = newClient(t, f, func(p *clockify.Params, _ *httpx.Config) { p.PageSize = 10; p.UserIDs = []string{userB} })
	warm(c, clients.Users, clients.Projects)
	if _, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{From: from, To: to}); err != nil || f.RequestCount() != 4 {
		t.Fatalf("err %v after %d requests, want 4 (B's two pages, twice)", err, f.RequestCount())
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
			if !rec.Version.Equal(t0) {
				t.Errorf("%s %s: version %v", r, id, rec.Version)
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
	ok := clockify.Params{Name: "acme", WorkspaceID: "65f0aaaaaaaaaaaaaaaaaaaa", Token: "k"}
	for _, tc := range []struct {
		mod  func(*clockify.Params)
		want string
	}{
		{func(p *clockify.Params) { p.Name = "" }, "name"},
		{func(p *clockify.Params) { p.WorkspaceID = "" }, "workspace_id"},
		{func(p *clockify.Params) { p.WorkspaceID = "a/b" }, "workspace_id"},
		{func(p *clockify.Params) { p.Token = "" }, "token"},
		{func(p *clockify.Params) { p.UserIDs = []string{"x y"} }, "user_ids[0]"},
		{func(p *clockify.Params) { p.PageSize = 5001 }, "page_size"},
		{func(p *clockify.Params) { p.BaseURL = "ftp://x" }, "base_url"},
		{func(p *clockify.Params) { p.Resources = []clients.Resource{"invoices"} }, "resources"},
	} {
		p := ok
		tc.mod(&p)
		if _, err := clockify.New(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want error naming %s, got %v", tc.want, err)
		}
	}
	if _, err := clockify.New(ok); err != nil {
		t.Fatal(err)
	}
}
