package toggl_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/internal/sourcetest"
	"github.com/tidemarkhq/tidemark/clients/toggl"
	"github.com/tidemarkhq/tidemark/clients/toggl/toggltest"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
	"github.com/tidemarkhq/tidemark/schema"
)

type opt = sourcetest.Opt[toggl.Params]

var kind = sourcetest.Kind[toggl.Params, *toggl.Client]{
	HTTPConfig: toggl.HTTPConfig, New: toggl.New,
	SetHTTP: func(p *toggl.Params, h *httpx.Client) { p.HTTP = h },
}

func newFake(t *testing.T, o toggltest.Options) *toggltest.Server {
	return sourcetest.Closed(t, toggltest.New(o))
}

func newClient(t *testing.T, f *toggltest.Server, logs *sourcetest.SyncBuffer, opts ...opt) *toggl.Client {
	t.Helper()
	var w = zerolog.MultiLevelWriter(zerolog.NewTestWriter(t))
	if logs != nil {
		w = zerolog.MultiLevelWriter(zerolog.NewTestWriter(t), logs)
	}
	return kind.Build(t, toggl.Params{
		Name: "tg", BaseURL: f.URL(), Token: f.Token(), WorkspaceID: f.WorkspaceID(),
		Version: "test", RateLimit: httpx.RateLimit{Requests: 1000, Per: time.Second},
		Logger: zerolog.New(w).Level(zerolog.DebugLevel), Quota: &toggl.Quota{},
	}, opts...)
}

func str(s string) *string { return &s }

func TestEntriesNormalizedWithTombstonesAndRunningTimer(t *testing.T) {
	t.Parallel()
	// The source's clock runs 3 h behind ours; stamps carry a +05:30 offset.
	f := newFake(t, toggltest.Options{Skew: -3 * time.Hour, Zone: time.FixedZone("IST", 5*3600+1800)})
	now := f.Now().UTC().Truncate(time.Second)
	stop := now.Add(-time.Hour)
	f.PutTimeEntry(toggltest.TimeEntry{ID: 1, UserID: 7, ProjectID: 8, TaskID: 9, Billable: true, Description: str("design \"v2\""),
		Start: stop.Add(-100 * time.Second), Stop: &stop, Duration: 100, At: now.Add(-time.Minute)})
	f.PutTimeEntry(toggltest.TimeEntry{ID: 2, UserID: 7, Start: now.Add(-90 * time.Minute), Duration: -now.Add(-90 * time.Minute).Unix(), At: now.Add(-time.Minute)})
	f.PutTimeEntry(toggltest.TimeEntry{ID: 3, UserID: 7, ProjectID: 8, Start: now.Add(-5 * time.Hour), Stop: &stop, Duration: 5400, At: now.Add(-2 * time.Minute)})
	f.Delete(clients.TimeEntries, 3)

	c := newClient(t, f, nil)
	pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) != 1 || pages[0].Number != 1 || countPath(f, "/me/time_entries") != 1 || countPath(f, "/me") != 1 {
		t.Fatalf("%d pages, %d requests; want one page from one request (and /me once)", len(pages), f.RequestCount())
	}
	if d := time.Until(pages[0].SourceTime); d > -179*time.Minute || d < -181*time.Minute {
		t.Errorf("SourceTime %v is not the source's clock", pages[0].SourceTime)
	}
	recs := sourcetest.Records(pages)
	e1 := recs["1"]
	te := schema.TimeEntries
	want := te.Row(schema.Values{
		"hours": clients.Decimal("0.027778"), "notes": "design \"v2\"", "user_id": "7", "project_id": "8", "task_id": "9",
		"billable": true, "spent_date": clients.DateOf(stop.Add(-100 * time.Second)),
		"started_at": stop.Add(-100 * time.Second), "ended_at": stop, "time_zone": "UTC", "tags": json.RawMessage(`[]`),
	})
	if !reflect.DeepEqual(e1.Row, want) || e1.DeletedAt != nil {
		t.Errorf("entry 1 = %+v\nrow  %#v\nwant %#v", e1, e1.Row, want)
	}
	if !e1.Version.Equal(now.Add(-time.Minute)) || e1.Version.Location() != time.UTC {
		t.Errorf("entry 1 version %v, want %v in UTC", e1.Version, now.Add(-time.Minute))
	}
	if !strings.Contains(string(e1.Raw), `+05:30"`) || !strings.HasPrefix(string(e1.Raw), "{") {
		t.Errorf("Raw is not the record as sent: %s", e1.Raw)
	}
	// The running timer runs to the source's clock (90 min, give or take
	// the second the request took).
	if e2 := recs["2"]; e2.Row == nil || !te.Bool(e2, "is_running") || (te.Decimal(e2, "hours") != "1.5" && te.Decimal(e2, "hours") != "1.500278") ||
		!te.IsNull(e2, "notes") || te.Text(e2, "project_id") != "" {
		t.Errorf("running entry = %#v", e2.Row)
	}
	e3 := recs["3"]
	if e3.DeletedAt == nil || !e3.Version.Equal(*e3.DeletedAt) || !e3.DeletedAt.Equal(now) {
		t.Errorf("deleted entry = %+v (deleted %v), want a tombstone at %v", e3, e3.DeletedAt, now)
	}
	if len(recs) != 3 {
		t.Errorf("%d records, want 3", len(recs))
	}
	// Ground truth agrees on the live versions.
	v := f.State().Versions(clients.TimeEntries)
	if len(v) != 2 || !v["1"].Equal(e1.Version) || f.State().Deleted(clients.TimeEntries)["3"].IsZero() {
		t.Errorf("truth %v", v)
	}
}

func TestWindowsQueryParameters(t *testing.T) {
	t.Parallel()
	f := newFake(t, toggltest.Options{})
	day := clients.DateOf(f.Now().UTC()).AddDays(-10)
	for i := range 5 {
		// Entries start at 00:30 UTC on days day-1 .. day+3.
		start := day.AddDays(i - 1).Time().Add(30 * time.Minute)
		stop := start.Add(time.Hour)
		f.PutTimeEntry(toggltest.TimeEntry{ID: int64(100 + i), UserID: 1, Start: start, Stop: &stop, Duration: 3600})
	}
	c := newClient(t, f, nil)

	// Zero window: the last 90 days (less the margin) via since.
	if _, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{}); err != nil {
		t.Fatal(err)
	}
	since := f.Now().Add(-7*24*time.Hour - 300*time.Millisecond)
	if _, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{UpdatedSince: since}); err != nil {
		t.Fatal(err)
	}
	pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{From: day, To: day.AddDays(1)})
	if err != nil {
		t.Fatal(err)
	}
	var reqs []fakeapi.Request
	for _, rq := range f.Requests() {
		if rq.Path == "/me/time_entries" {
			reqs = append(reqs, rq)
		}
	}
	first, _ := strconv.ParseInt(reqs[0].Query.Get("since"), 10, 64)
	if want := f.Now().Add(-toggl.MaxSinceAge + toggl.FirstSyncMargin).Unix(); first < want-5 || first > want+5 || reqs[0].Path != "/me/time_entries" {
		t.Errorf("first sync since = %d, want about %d (%v)", first, want, reqs[0])
	}
	if got := reqs[1].Query.Get("since"); got != strconv.FormatInt(since.Unix(), 10) {
		t.Errorf("since = %s, want %d (whole seconds, rounded down)", got, since.Unix())
	}
	if q := reqs[2].Query; q.Get("start_date") != day.AddDays(-1).String() || q.Get("end_date") != day.AddDays(3).String() || q.Has("since") {
		t.Errorf("date query = %v", q)
	}
	// Asked a day wider on each side; only entries started on day..day+1
	// (UTC) are kept.
	got := sourcetest.Records(pages)
	if len(got) != 2 || got["101"].ID == "" || got["102"].ID == "" {
		t.Errorf("date window returned %v", got)
	}
}

func TestSinceTooOld(t *testing.T) {
	t.Parallel()
	f := newFake(t, toggltest.Options{})
	c := newClient(t, f, nil)
	// Before any response the source's clock is unknown: Toggl's 400
	// decides, and it becomes the same typed error.
	old := f.Now().Add(-100 * 24 * time.Hour)
	_, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{UpdatedSince: old})
	if !errors.Is(err, toggl.ErrSinceTooOld) || f.RequestCount() != 1 {
		t.Fatalf("err = %v (%T) after %d requests", err, err, f.RequestCount())
	}
	for _, want := range []string{"tg time_entries", "tidemark backfill --source tg", "--from " + clients.DateOf(old.UTC()).String(), "cursor reset", "3 months"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	// Once the clock is known (from any successful response), the client
	// refuses without asking.
	if _, err := sourcetest.Collect(t, c, clients.Clients, clients.Window{}); err != nil {
		t.Fatal(err)
	}
	f.ResetRequests()
	_, err = sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{UpdatedSince: old})
	if !errors.Is(err, toggl.ErrSinceTooOld) || f.RequestCount() != 0 {
		t.Fatalf("err = %v after %d requests", err, f.RequestCount())
	}
	// Reference lists that old are listed whole instead.
	f.PutProject(toggltest.Project{ID: 1, Name: "P", Active: true})
	pages, err := sourcetest.Collect(t, c, clients.Projects, clients.Window{UpdatedSince: old})
	if err != nil || len(sourcetest.Records(pages)) != 1 || f.Requests()[0].Query.Has("since") {
		t.Fatalf("projects: err = %v, %d records, query %v", err, len(sourcetest.Records(pages)), f.Requests()[0].Query)
	}
	// A source clock 100 days behind ours: a window 80 days back on its
	// clock is served.
	g := newFake(t, toggltest.Options{Skew: -100 * 24 * time.Hour})
	if _, err := sourcetest.Collect(t, newClient(t, g, nil), clients.TimeEntries, clients.Window{UpdatedSince: g.Now().Add(-80 * 24 * time.Hour)}); err != nil {
		t.Fatalf("skewed source: %v", err)
	}
}

func TestWorkspaceResources(t *testing.T) {
	t.Parallel()
	f := newFake(t, toggltest.Options{})
	for i := 1; i <= 450; i++ {
		f.PutProject(toggltest.Project{ID: int64(i), ClientID: 5, Name: fmt.Sprintf("P%d", i), Active: i%2 == 0, Billable: i%3 == 0, At: f.Now().Add(-time.Hour)})
	}
	f.PutClient(toggltest.Client{ID: 5, Name: "ABC", Archived: true})
	f.PutTask(toggltest.Task{ID: 6, ProjectID: 1, Name: "Design", Active: true})
	f.PutUser(toggltest.User{ID: 7, Email: "kim@example.com", Fullname: "Kim van Allen"})
	c := newClient(t, f, nil)

	pages, err := sourcetest.Collect(t, c, clients.Projects, clients.Window{})
	if err != nil {
		t.Fatal(err)
	}
	// Three pages of a bare array, walked twice: a deletion mid-walk would
	// leave no trace in one walk (pagewalk).
	if len(pages) != 6 || len(sourcetest.Records(pages)) != 450 || f.RequestCount() != 6 {
		t.Fatalf("%d pages, %d projects, %d requests", len(pages), len(sourcetest.Records(pages)), f.RequestCount())
	}
	for i, rq := range f.Requests() {
		if rq.Path != "/workspaces/4242/projects" || rq.Query.Get("page") != strconv.Itoa(i%3+1) || rq.Query.Get("per_page") != "200" {
			t.Errorf("request %+v", rq)
		}
	}
	want := schema.Projects.Row(schema.Values{"name": "P6", "is_active": true, "is_billable": true, "client_id": "5"})
	if p := sourcetest.Records(pages)["6"]; !reflect.DeepEqual(p.Row, want) {
		t.Errorf("project 6 = %#v, want %#v", p.Row, want)
	}
	checks := []struct {
		r  clients.Resource
		ok func(clients.Record) bool
	}{
		{clients.Clients, func(r clients.Record) bool {
			return reflect.DeepEqual(r.Row, schema.Clients.Row(schema.Values{"name": "ABC", "is_active": false}))
		}},
		{clients.Tasks, func(r clients.Record) bool {
			return reflect.DeepEqual(r.Row, schema.Tasks.Row(schema.Values{"name": "Design", "is_active": true}))
		}},
		{clients.Users, func(r clients.Record) bool {
			return reflect.DeepEqual(r.Row, schema.Users.Row(schema.Values{
				"first_name": "Kim", "last_name": "van Allen", "email": "kim@example.com", "is_active": true}))
		}},
	}
	for _, ck := range checks {
		pages, err := sourcetest.Collect(t, c, ck.r, clients.Window{})
		if err != nil {
			t.Fatalf("%s: %v", ck.r, err)
		}
		if len(pages) != 1 || len(pages[0].Records) != 1 || !ck.ok(pages[0].Records[0]) {
			t.Errorf("%s: pages %+v", ck.r, pages)
		}
	}

	// Incremental: since, deleted projects come back as tombstones.
	since := f.Now().Add(-time.Second)
	time.Sleep(1100 * time.Millisecond)
	f.Delete(clients.Projects, 3)
	f.ResetRequests()
	pages, err = sourcetest.Collect(t, c, clients.Projects, clients.Window{UpdatedSince: since})
	if err != nil {
		t.Fatal(err)
	}
	if r := sourcetest.Records(pages); len(r) != 1 || r["3"].DeletedAt == nil || f.Requests()[0].Query.Get("since") != strconv.FormatInt(since.Unix(), 10) {
		t.Errorf("since listing: %d records (3: %+v), query %v", len(r), r["3"].DeletedAt, f.Requests()[0].Query)
	}
	d := clients.DateOf(f.Now())
	if _, err := sourcetest.Collect(t, c, clients.Projects, clients.Window{From: d, To: d}); !errors.Is(err, clients.ErrUnsupported) {
		t.Errorf("projects by date: %v", err)
	}
}

func TestUsersForbiddenIsUnsupportedNotEmpty(t *testing.T) {
	t.Parallel()
	f := newFake(t, toggltest.Options{ForbidUsers: true})
	f.PutUser(toggltest.User{ID: 7, Fullname: "Kim"})
	var logs sourcetest.SyncBuffer
	_, err := sourcetest.Collect(t, newClient(t, f, &logs), clients.Users, clients.Window{})
	if !errors.Is(err, clients.ErrUnsupported) || !errors.Is(err, httpx.ErrUnauthorized) || f.RequestCount() != 1 {
		t.Fatalf("err = %v after %d requests", err, f.RequestCount())
	}
	if !strings.Contains(err.Error(), "remove users from the source's resources") || !strings.Contains(logs.String(), "users are not mirrored") {
		t.Errorf("error %q / logs %q do not say what to do", err, logs.String())
	}
}

func TestWrongTokenIsUnauthorizedNotRetriedNotLeaked(t *testing.T) {
	t.Parallel()
	f := newFake(t, toggltest.Options{})
	const bad = "wrong-secret-token-xyz"
	var logs sourcetest.SyncBuffer
	f.FailNext(1, 503) // a retry is logged too: its line must not carry the token
	c := newClient(t, f, &logs, func(p *toggl.Params, _ *httpx.Config) { p.Token = bad })
	_, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{})
	if !errors.Is(err, httpx.ErrUnauthorized) || f.RequestCount() != 2 {
		t.Fatalf("err = %v after %d requests", err, f.RequestCount())
	}
	for _, s := range []string{err.Error(), fmt.Sprintf("%+v", err), logs.String()} {
		if strings.Contains(s, bad) || strings.Contains(s, "d3Jvbmctc2VjcmV0") /* base64 of the token */ {
			t.Fatalf("token in %q", s)
		}
	}
	// A workspace the token cannot see is unauthorized too.
	c = newClient(t, f, nil, func(p *toggl.Params, _ *httpx.Config) { p.WorkspaceID = 1 })
	if _, err := sourcetest.Collect(t, c, clients.Clients, clients.Window{}); !errors.Is(err, httpx.ErrUnauthorized) {
		t.Fatalf("wrong workspace: err = %v", err)
	}
}

func TestMalformedPagesNameSourceResourcePageField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		m     fakeapi.Malformation
		field string
		what  string
	}{
		{fakeapi.BadJSON, "field (page)", "not JSON"},
		{fakeapi.HTMLPage, "field (page)", "body: <!DOCTYPE html>"},
		{fakeapi.MissingVersion, "field time_entries[0].at", "missing"},
		{fakeapi.WrongType, "field time_entries[0].at", "want string, got number"},
	} {
		t.Run(strconv.Itoa(int(tc.m)), func(t *testing.T) {
			t.Parallel()
			f := newFake(t, toggltest.Options{})
			f.PutTimeEntry(toggltest.TimeEntry{ID: 1, UserID: 1, Start: f.Now().Add(-time.Hour), Duration: 60})
			f.Malform("time_entries", 1, tc.m)
			c := newClient(t, f, nil)
			pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{})
			if !errors.Is(err, httpx.ErrDecode) || len(pages) != 0 {
				t.Fatalf("err = %v, %d pages", err, len(pages))
			}
			for _, want := range []string{"decode tg time_entries page 1", tc.field, tc.what} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if n := countPath(f, "/me/time_entries"); n != 1 {
				t.Errorf("requests = %d, want 1 (a decode error is not retried)", n)
			}
		})
	}
}

func TestRetriesAndLimits(t *testing.T) {
	t.Parallel()
	t.Run("5xx then success", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, toggltest.Options{})
		f.FailNext(2, 503)
		if _, err := sourcetest.Collect(t, newClient(t, f, nil), clients.TimeEntries, clients.Window{}); err != nil || countPath(f, "/me/time_entries") != 3 {
			t.Fatalf("err = %v after %d requests, want 3", err, countPath(f, "/me/time_entries"))
		}
	})
	t.Run("5xx exhausts", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, toggltest.Options{})
		f.FailNext(100, 500)
		_, err := sourcetest.Collect(t, newClient(t, f, nil, func(_ *toggl.Params, c *httpx.Config) { c.MaxAttempts = 4 }), clients.Clients, clients.Window{})
		if !errors.Is(err, httpx.ErrStatus) || !strings.Contains(err.Error(), "tg clients page 1") || f.RequestCount() != 4 {
			t.Fatalf("err = %v after %d requests", err, f.RequestCount())
		}
	})
	t.Run("leaky bucket 429s are waited out", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, toggltest.Options{Bucket: httpx.RateLimit{Requests: 2, Per: 500 * time.Millisecond}, RetryAfter: "1"})
		c := newClient(t, f, nil, func(_ *toggl.Params, c *httpx.Config) { c.MaxAttempts = 1 })
		for range 4 {
			if _, err := sourcetest.Collect(t, c, clients.Clients, clients.Window{}); err != nil {
				t.Fatal(err)
			}
		}
		limited := 0
		for _, r := range f.Requests() {
			if r.Status == 429 {
				limited++
			}
		}
		if limited == 0 || f.RequestCount() != 4+limited {
			t.Fatalf("%d requests with %d 429s", f.RequestCount(), limited)
		}
	})
	t.Run("402 waits for the quota window and reports it", func(t *testing.T) {
		t.Parallel()
		const window = 2 * time.Second
		f := newFake(t, toggltest.Options{Quota: 2, QuotaWindow: window})
		var logs sourcetest.SyncBuffer
		var waits []string
		var mu sync.Mutex
		c := newClient(t, f, &logs, func(p *toggl.Params, _ *httpx.Config) {
			p.QuotaWindow = window
			p.OnWait = func(reason string, _ time.Duration) { mu.Lock(); waits = append(waits, reason); mu.Unlock() }
		}, func(_ *toggl.Params, c *httpx.Config) { c.MaxAttempts = 1 })
		if !c.QuotaWaitUntil().IsZero() {
			t.Fatal("waiting before any request")
		}
		var sawWait time.Time
		done := make(chan error, 1)
		go func() {
			for range 3 {
				if _, err := sourcetest.Collect(t, c, clients.Clients, clients.Window{}); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	loop:
		for {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				break loop
			case <-time.After(20 * time.Millisecond):
				if u := c.QuotaWaitUntil(); !u.IsZero() {
					sawWait = u
				}
			}
		}
		statuses := map[int]int{}
		for _, r := range f.Requests() {
			statuses[r.Status]++
		}
		// Either the three fit in one window, or a 402 was waited out.
		if statuses[402] > 0 {
			if sawWait.IsZero() || time.Until(sawWait) > 0 || time.Until(sawWait) < -window {
				t.Errorf("QuotaWaitUntil was %v during the wait", sawWait)
			}
			if !strings.Contains(logs.String(), "waiting for the next quota window") || !strings.Contains(logs.String(), "source resumed") {
				t.Errorf("logs lack the wait and the resume: %s", logs.String())
			}
			mu.Lock()
			if !strings.Contains(strings.Join(waits, ","), "quota") {
				t.Errorf("waits %v", waits)
			}
			mu.Unlock()
		}
		if statuses[200] != 3 || !c.QuotaWaitUntil().IsZero() {
			t.Errorf("statuses %v, QuotaWaitUntil %v", statuses, c.QuotaWaitUntil())
		}
	})
}

func TestParamsValidate(t *testing.T) {
	t.Parallel()
	ok := toggl.Params{Name: "tg", Token: "t", WorkspaceID: 1}
	for _, tc := range []struct {
		mod  func(*toggl.Params)
		want string
	}{
		{func(p *toggl.Params) { p.Name = "" }, "name"},
		{func(p *toggl.Params) { p.Token = "" }, "token"},
		{func(p *toggl.Params) { p.WorkspaceID = 0 }, "workspace_id"},
		{func(p *toggl.Params) { p.BaseURL = "ftp://x" }, "base_url"},
		{func(p *toggl.Params) { p.RateLimit = httpx.RateLimit{Requests: -1, Per: time.Second} }, "rate_limit"},
		{func(p *toggl.Params) { p.Resources = []clients.Resource{"invoices"} }, "resources"},
	} {
		p := ok
		tc.mod(&p)
		if _, err := toggl.New(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want error naming %s, got %v", tc.want, err)
		}
	}
	c, err := toggl.New(ok)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name() != "tg" || len(c.Resources()) != len(toggl.Resources) {
		t.Errorf("Name %s Resources %v", c.Name(), c.Resources())
	}
	if toggl.DefaultRateLimit.Interval() < time.Second {
		t.Errorf("default rate limit %v is faster than 1 request per second", toggl.DefaultRateLimit)
	}
}
