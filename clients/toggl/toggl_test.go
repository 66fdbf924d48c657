package toggl_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/internal/sourcetest"
	"github.com/tidemarkhq/tidemark/clients/provider"
	"github.com/tidemarkhq/tidemark/clients/toggl"
	"github.com/tidemarkhq/tidemark/clients/toggl/toggltest"
	"github.com/tidemarkhq/tidemark/internal/conformance"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/poller"
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
		Base: provider.Base{Name: "tg", BaseURL: f.URL(), Token: f.Token(),
			RateLimit: httpx.RateLimit{Requests: 1000, Per: time.Second},
			Env:       provider.Env{Version: "test", Logger: zerolog.New(w).Level(zerolog.DebugLevel)}},
		WorkspaceID: f.WorkspaceID(), Quota: &toggl.Quota{},
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
	// Asked a day wider on each side: every entry started on day..day+1
	// (UTC) is there (those just outside may come too).
	got := sourcetest.Records(pages)
	if got["101"].ID == "" || got["102"].ID == "" {
		t.Errorf("date window returned %v", sourcetest.IDs(pages))
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
	sourcetest.EachMalformation(t, "time_entries[0].at", func(t *testing.T, m sourcetest.Malformed) {
		f := newFake(t, toggltest.Options{})
		f.PutTimeEntry(toggltest.TimeEntry{ID: 1, UserID: 1, Start: f.Now().Add(-time.Hour), Duration: 60})
		f.Malform("time_entries", 1, m.M)
		pages, err := sourcetest.Collect(t, newClient(t, f, nil), clients.TimeEntries, clients.Window{})
		sourcetest.WantDecodeError(t, err, "tg", "time_entries", 1, m.Field, m.What)
		if len(pages) != 0 {
			t.Errorf("fn got %d pages, want none", len(pages))
		}
		if n := countPath(f, "/me/time_entries"); n != 1 {
			t.Errorf("requests = %d, want 1 (a decode error is not retried)", n)
		}
	})
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
	c := sourcetest.WantValidation(t, toggl.New, toggl.Params{Base: provider.Base{Name: "tg", Token: "t"}, WorkspaceID: 1}, []sourcetest.Refusal[toggl.Params]{
		{Key: "workspace_id", Change: func(p *toggl.Params) { p.WorkspaceID = 0 }},
		{Key: "rate_limit", Change: func(p *toggl.Params) { p.RateLimit = httpx.RateLimit{Requests: -1, Per: time.Second} }},
	})
	if c.Name() != "tg" || len(c.Resources()) != len(toggl.Resources) {
		t.Errorf("Name %s Resources %v", c.Name(), c.Resources())
	}
	if toggl.DefaultRateLimit.Interval() < time.Second {
		t.Errorf("default rate limit %v is faster than 1 request per second", toggl.DefaultRateLimit)
	}
}

func TestMain(m *testing.M) { pgtest.Main(m) }

// Listings with `since` include deleted records (server_deleted_at): time
// entries, projects and tasks. Clients and users are listed whole, without
// `since`, and leave deleted records out: reconcile finds those. Workspace
// users carry no `at`: the listing's clock versions them.
func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Provider[*toggltest.Server]{
		Caps: conformance.Capabilities{
			Deletions: map[clients.Resource]conformance.Deletion{
				clients.TimeEntries: conformance.Reported,
				clients.Projects:    conformance.Reported,
				clients.Tasks:       conformance.Reported,
				clients.Clients:     conformance.Reconciled,
				clients.Users:       conformance.Reconciled,
			},
			ListingClock: map[clients.Resource]bool{clients.Users: true},
			ListedWhole:  map[clients.Resource]bool{clients.Clients: true, clients.Users: true},
			Scopes:       []string{toggl.ScopeMe, toggl.ScopeWorkspace},
		},
		Fake: func(now func() time.Time) *toggltest.Server { return toggltest.New(toggltest.Options{Clock: now}) },
		Source: func(f *toggltest.Server, o conformance.Options, log zerolog.Logger) (clients.Source, error) {
			return toggl.New(toggl.Params{
				Base: provider.Base{Name: "toggl-conf", BaseURL: f.URL(), Token: f.Token(),
					RateLimit: o.RateLimit, Resources: toggl.Resources, Env: provider.Env{Logger: log, OnResponse: o.OnResponse}},
				WorkspaceID: f.WorkspaceID(), PageSize: o.PageSize, Scope: o.Scope,
			})
		},
		Put:    conformancePut,
		Delete: func(f *toggltest.Server, r clients.Resource, id int64) { f.Delete(r, id) },
	})
}

// conformancePut stores content where the mirror's content column reads
// it: an entry's description, a name, or a user's fullname (first_name up
// to the first space).
func conformancePut(f *toggltest.Server, now time.Time, r clients.Resource, id int64, content string) {
	switch r {
	case clients.TimeEntries:
		f.PutTimeEntry(toggltest.TimeEntry{
			ID: id, UserID: 7, ProjectID: 8, Description: &content,
			Start: now.Add(-time.Hour), Stop: &now, Duration: 3600,
		})
	case clients.Projects:
		f.PutProject(toggltest.Project{ID: id, ClientID: 9, Name: content, Active: true})
	case clients.Clients:
		f.PutClient(toggltest.Client{ID: id, Name: content})
	case clients.Users:
		f.PutUser(toggltest.User{ID: id, Fullname: content, Email: "u@example.com"})
	case clients.Tasks:
		f.PutTask(toggltest.Task{ID: id, ProjectID: 8, Name: content, Active: true})
	default:
		panic("toggl conformance: no record for " + string(r))
	}
}

// Projects and tasks page by number over a live list: one deleted on page 1
// while the client is between pages shifts the rest up, and the first of
// page 2 is never served. A first sync lists them whole, so nothing later
// would bring it.
func TestWorkspaceListingLosesNothingWhenARecordLeavesMidWalk(t *testing.T) {
	t.Parallel()
	for _, r := range []clients.Resource{clients.Projects, clients.Tasks} {
		t.Run(string(r), func(t *testing.T) {
			t.Parallel()
			f := newFake(t, toggltest.Options{})
			at := f.Now().Add(-time.Hour)
			for i := 1; i <= 450; i++ {
				if r == clients.Projects {
					f.PutProject(toggltest.Project{ID: int64(i), Name: fmt.Sprintf("P%d", i), Active: true, At: at})
				} else {
					f.PutTask(toggltest.Task{ID: int64(i), ProjectID: 1, Name: fmt.Sprintf("T%d", i), Active: true, At: at})
				}
			}
			logs := &sourcetest.SyncBuffer{}
			c := newClient(t, f, logs)
			var once sync.Once
			f.OnList(func(rq fakeapi.Request) {
				if rq.Query.Get("page") == "2" {
					once.Do(func() { f.Delete(r, 1) }) // the first record of page 1
				}
			})
			ctx := zerolog.New(logs).WithContext(t.Context())
			got := map[string]bool{}
			err := c.List(ctx, r, clients.Window{}, func(_ context.Context, p clients.Page) error {
				for _, rec := range p.Records {
					got[rec.ID] = true
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for i := 2; i <= 450; i++ {
				if !got[strconv.Itoa(i)] {
					t.Errorf("%s %d was never served", r, i)
				}
			}
			// Projects (no total) walk again; tasks (total_count) read the
			// page before again.
			if !strings.Contains(logs.String(), "listing shifted while walking; ") {
				t.Errorf("no Info line about the shifted listing")
			}
		})
	}
}

// putDays adds perDay entries on each of days consecutive days from first.
func putDays(f *toggltest.Server, first clients.Date, days, perDay int, nextID *int64) {
	for d := range days {
		for i := range perDay {
			start := first.AddDays(d).Time().Add(time.Duration(i) * time.Minute)
			stop := start.Add(time.Minute)
			*nextID++
			f.PutTimeEntry(toggltest.TimeEntry{ID: *nextID, UserID: 1, Start: start, Stop: &stop, Duration: 60, At: start.Add(time.Hour)})
		}
	}
}

// Toggl serves at most a thousand entries per /me/time_entries response and
// says nothing when it cuts. A reconcile range holding more is listed whole,
// in windows small enough to stay under the cap.
func TestDateRangeOverTheCapIsListedInWindows(t *testing.T) {
	t.Parallel()
	f := newFake(t, toggltest.Options{EntryCap: 1000})
	today := clients.DateOf(f.Now().UTC())
	var id int64
	putDays(f, today.AddDays(-40), 25, 100, &id) // 2,500 entries
	c := newClient(t, f, nil)
	pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{From: today.AddDays(-45), To: today})
	if err != nil {
		t.Fatal(err)
	}
	if got := sourcetest.Records(pages); len(got) != 2500 {
		t.Fatalf("%d entries listed, want 2500", len(got))
	}
	if n := f.RequestCount(); n > 20 {
		t.Errorf("%d requests for 2,500 entries", n)
	}
}

// A single day over the cap cannot be split further: ErrCapped, so that
// reconcile tombstones nothing.
func TestSingleDayOverTheCapIsCapped(t *testing.T) {
	t.Parallel()
	f := newFake(t, toggltest.Options{EntryCap: 1000})
	today := clients.DateOf(f.Now().UTC())
	var id int64
	putDays(f, today.AddDays(-10), 1, 1001, &id)
	putDays(f, today.AddDays(-5), 3, 10, &id)
	c := newClient(t, f, nil)
	_, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{From: today.AddDays(-20), To: today})
	if !errors.Is(err, clients.ErrCapped) {
		t.Fatalf("err = %v, want ErrCapped", err)
	}
}

// A `since` listing cannot be split by date, but `before` narrows it: one
// that comes back at the cap pages backwards from its oldest start until a
// page is under the cap. Where Toggl ignores `before`, the page gets no
// older and the listing ends in ErrCapped, so the cursor never moves past
// what the cap hid.
func TestSinceListingAtTheCapPagesBackWithBefore(t *testing.T) {
	t.Parallel()
	for _, ignored := range []bool{false, true} {
		t.Run(fmt.Sprintf("before ignored %v", ignored), func(t *testing.T) {
			t.Parallel()
			f := newFake(t, toggltest.Options{EntryCap: 1000, IgnoreBefore: ignored})
			today := clients.DateOf(f.Now().UTC())
			var id int64
			putDays(f, today.AddDays(-3), 2, 1200, &id) // 2,400 entries, 1,200 a day
			c := newClient(t, f, nil)
			for _, w := range []clients.Window{{}, {UpdatedSince: f.Now().Add(-10 * 24 * time.Hour)}} {
				f.ResetRequests()
				pages, err := sourcetest.Collect(t, c, clients.TimeEntries, w)
				switch {
				case ignored && !errors.Is(err, clients.ErrCapped):
					t.Errorf("window %+v: err = %v, want ErrCapped", w, err)
				case !ignored && err != nil:
					t.Errorf("window %+v: %v", w, err)
				case !ignored && len(sourcetest.Records(pages)) != 2400:
					t.Errorf("window %+v: %d entries, want 2400", w, len(sourcetest.Records(pages)))
				}
				if n := countPath(f, "/me/time_entries"); n > 3 || (ignored && n != 2) {
					t.Errorf("window %+v: %d requests", w, n)
				}
			}
		})
	}
}

// Tasks come in an envelope with total_count: a walk whose pages add up to
// the total is taken without a confirming second walk, and requests ask
// for the documented page/per_page.
func TestTasksEnvelopeWalkedByItsTotal(t *testing.T) {
	t.Parallel()
	f := newFake(t, toggltest.Options{})
	at := f.Now().Add(-time.Hour)
	for i := 1; i <= 450; i++ {
		f.PutTask(toggltest.Task{ID: int64(i), ProjectID: 1, Name: fmt.Sprintf("T%d", i), Active: true, At: at})
	}
	c := newClient(t, f, nil)
	pages, err := sourcetest.Collect(t, c, clients.Tasks, clients.Window{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(sourcetest.Records(pages)); n != 450 || f.RequestCount() != 3 {
		t.Fatalf("%d tasks in %d requests, want 450 in 3", n, f.RequestCount())
	}
	for i, rq := range f.Requests() {
		if rq.Path != "/workspaces/4242/tasks" || rq.Query.Get("page") != strconv.Itoa(i+1) || rq.Query.Get("per_page") != "200" {
			t.Errorf("request %+v", rq)
		}
	}
	// A provider that stops before the pages its total announced cut the
	// listing short: ErrCapped, so that reconcile tombstones nothing.
	f.ResetRequests()
	f.SetTaskTotalBias(200)
	_, err = sourcetest.Collect(t, c, clients.Tasks, clients.Window{})
	if !errors.Is(err, clients.ErrCapped) {
		t.Fatalf("err = %v, want ErrCapped", err)
	}
}

// quotaWaits lists three clients listings against f and returns the quota
// waits the client took.
func quotaWaits(t *testing.T, f *toggltest.Server, window time.Duration, pause time.Duration) []time.Duration {
	t.Helper()
	var mu sync.Mutex
	var waits []time.Duration
	c := newClient(t, f, nil, func(p *toggl.Params, _ *httpx.Config) {
		p.QuotaWindow = window
		p.OnWait = func(reason string, d time.Duration) {
			if reason == "quota" {
				mu.Lock()
				waits = append(waits, d)
				mu.Unlock()
			}
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Second)
	defer cancel()
	for i := range 3 {
		if i == 1 {
			time.Sleep(pause)
		}
		if err := c.List(ctx, clients.Clients, clients.Window{}, func(context.Context, clients.Page) error { return nil }); err != nil {
			t.Fatalf("listing %d: %v", i, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return waits
}

// With Toggl's headers, a 402 waits the X-Toggl-Quota-Resets-In it states:
// here 2 s, though the client's own window is an hour.
func TestQuota402WaitsTheStatedResetsIn(t *testing.T) {
	t.Parallel()
	f := newFake(t, toggltest.Options{Quota: 2, QuotaWindow: 2 * time.Second})
	waits := quotaWaits(t, f, time.Hour, 0)
	if len(waits) != 1 || waits[0] > 2*time.Second || waits[0] < time.Second {
		t.Fatalf("quota waits %v, want one of about 2s (the stated Resets-In)", waits)
	}
}

// Without headers, a 402 waits until the window after the first request of
// the current window, as the client tracked it: the first listing started
// it, 1 s later the third is refused, and the wait is the 2 s left, not a
// whole window and not the next clock multiple.
func TestQuota402WithoutHeadersWaitsForTheTrackedWindow(t *testing.T) {
	t.Parallel()
	const window = 3 * time.Second
	f := newFake(t, toggltest.Options{Quota: 2, QuotaWindow: window, NoQuotaHeaders: true})
	waits := quotaWaits(t, f, window, time.Second)
	// 2 s left, plus the margin (window/20) for the fake's window starting
	// when the first request arrived.
	if len(waits) != 1 || waits[0] > 2400*time.Millisecond || waits[0] < 1700*time.Millisecond {
		t.Fatalf("quota waits %v, want one of about 2s", waits)
	}
	statuses := map[int]int{}
	for _, r := range f.Requests() {
		statuses[r.Status]++
	}
	if statuses[402] != 1 || statuses[200] != 3 {
		t.Errorf("statuses %v", statuses)
	}
}

// The docs' tracking example is v8-shaped: wid and pid, and no user id at
// all. In /me/time_entries every entry is the token owner's, so the owner's
// id (GET /me) stands in, and pid is the project.
func TestV8ShapedEntryTakesTheOwnerAndPid(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Date", time.Date(2026, 1, 30, 9, 10, 0, 0, time.UTC).Format(http.TimeFormat))
		switch {
		case strings.HasSuffix(r.URL.Path, "/me/time_entries"):
			fmt.Fprint(w, `[{
"id": 436694100,
"wid": 777,
"pid": 193791,
"billable": false,
"start": "2026-01-30T09:08:04+00:00",
"duration": -1,
"description": "Running time entry",
"at": "2026-01-30T09:08:12+00:00"
}]`)
		case strings.HasSuffix(r.URL.Path, "/me"):
			fmt.Fprint(w, `{"id": 5123, "email": "a@example.com", "fullname": "A", "timezone": "Europe/Berlin"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c := kind.Build(t, toggl.Params{
		Base: provider.Base{Name: "tg", BaseURL: srv.URL + "/api/v9", Token: "secret-token",
			RateLimit: httpx.RateLimit{Requests: 1000, Per: time.Second},
			Env:       provider.Env{Version: "test", Logger: zerolog.New(zerolog.NewTestWriter(t))}},
		WorkspaceID: 777,
		Quota:       &toggl.Quota{},
	})
	pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{})
	if err != nil {
		t.Fatal(err)
	}
	recs := sourcetest.Records(pages)
	rec, ok := recs["436694100"]
	if !ok {
		t.Fatalf("entry not served: %v", recs)
	}
	te := schema.TimeEntries
	if got := te.Text(rec, "user_id"); got != "5123" {
		t.Errorf("user_id %q, want the /me id 5123", got)
	}
	if got := te.Text(rec, "project_id"); got != "193791" {
		t.Errorf("project_id %q, want pid 193791", got)
	}
	if !te.Bool(rec, "is_running") {
		t.Error("a running entry (duration -1) is not running")
	}
}

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
	f, c, now := lastFiveDays(t, func(id int64) int64 { return 10 + id%2 })
	putEntry(f, 9, 11, now.AddDate(0, 0, -40))
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

// lastFiveDays is a workspace-scope client over a fake that serves two
// entries a report page, holding entries 1 to 5 of user(id), spent at noon
// one to five days before the source's now (returned, in UTC).
func lastFiveDays(t *testing.T, user func(id int64) int64) (*toggltest.Server, *toggl.Client, time.Time) {
	t.Helper()
	f := newFake(t, toggltest.Options{ReportPageCap: 2})
	now := f.Now().UTC()
	noon := clients.DateOf(now).Time().Add(12 * time.Hour)
	for i := int64(1); i <= 5; i++ {
		putEntry(f, i, user(i), noon.AddDate(0, 0, -int(i)))
	}
	return f, newClient(t, f, nil, workspaceScope), now
}

// A listing that fails part way tombstones nothing; the next complete one
// does.
func TestWorkspaceFailedListingTombstonesNothing(t *testing.T) {
	t.Parallel()
	f, c, now := lastFiveDays(t, func(int64) int64 { return 11 })
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
	// Every entry dated in the window (those just outside may come too).
	if recs := sourcetest.Records(pages); recs["1"].ID == "" || recs["2"].ID == "" {
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
	moveAndDelete(t, f, c, clients.Window{UpdatedSince: now.Add(-time.Hour)}, clients.DateOf(noon.AddDate(0, 0, -40))) // back-dated out of the window
	// The first confirmation asks for both absent ids; the later ranges
	// only for the one not found yet.
	qs := f.ReportQueries()
	i := slices.IndexFunc(qs, func(q toggltest.ReportQuery) bool { return q.TimeEntryIDs != nil })
	if i < 0 || len(qs[i].TimeEntryIDs) != 2 || qs[i].TimeEntryIDs[0] != 1 || qs[i].TimeEntryIDs[1] != 2 {
		t.Errorf("confirmation searches %+v: want the two absent ids first", qs)
	}
	// (Searches without ids learn the workspace's earliest year.)
	j := len(qs) - 1
	for j > 0 && qs[j].TimeEntryIDs == nil {
		j--
	}
	if last := qs[j]; !slices.Equal(last.TimeEntryIDs, []int64{2}) {
		t.Errorf("last confirmation search %+v: want only the id not found", last)
	}
}

// Issue 23, item 2: an entry moved to a later day than the window's end
// (after tomorrow for an incremental pass, after the window for a
// backfill) is absent from the listing but not deleted: the lookup by id
// finds it wherever it was moved within a year of the window or of today,
// and it is handed over live, never as a tombstone.
func TestWorkspaceEntryMovedForwardIsNotTombstoned(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		window func(today clients.Date) clients.Window
		at, to func(today clients.Date) clients.Date // the entry's day, then after its move
	}{
		{"incremental, moved after tomorrow", func(today clients.Date) clients.Window { return clients.Window{UpdatedSince: today.Time()} },
			func(today clients.Date) clients.Date { return today.AddDays(-2) }, func(today clients.Date) clients.Date { return today.AddDays(10) }},
		{"backfill, moved after the window", func(today clients.Date) clients.Window {
			return clients.Window{From: today.AddDays(-400), To: today.AddDays(-390)}
		}, func(today clients.Date) clients.Date { return today.AddDays(-395) }, func(today clients.Date) clients.Date { return today.AddDays(-20) }},
		{"backfill, moved to next year", func(today clients.Date) clients.Window {
			return clients.Window{From: today.AddDays(-400), To: today.AddDays(-390)}
		}, func(today clients.Date) clients.Date { return today.AddDays(-395) }, func(today clients.Date) clients.Date { return today.AddDays(300) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, toggltest.Options{})
			today := clients.DateOf(f.Now().UTC())
			putEntry(f, 1, 11, tc.at(today).Time().Add(12*time.Hour))
			putEntry(f, 2, 12, tc.at(today).Time().Add(13*time.Hour))
			moveAndDelete(t, f, newClient(t, f, nil, workspaceScope), tc.window(today), tc.to(today))
		})
	}
}

// moveAndDelete lists w, moves entry 1 to the day to and deletes entry 2 at
// the fake, lists w again and checks that entry 1 comes live on its new day
// and entry 2 as a tombstone.
func moveAndDelete(t *testing.T, f *toggltest.Server, c *toggl.Client, w clients.Window, to clients.Date) {
	t.Helper()
	if _, err := sourcetest.Collect(t, c, clients.TimeEntries, w); err != nil {
		t.Fatal(err)
	}
	putEntry(f, 1, 11, to.Time().Add(12*time.Hour))
	f.Delete(clients.TimeEntries, 2)
	pages, err := sourcetest.Collect(t, c, clients.TimeEntries, w)
	if err != nil {
		t.Fatal(err)
	}
	recs := sourcetest.Records(pages)
	moved := recs["1"]
	if moved.DeletedAt != nil || moved.Row == nil {
		t.Fatalf("moved entry handed over as %+v, want it live on %s", moved, to)
	}
	if d := schema.At[clients.Date](&moved, schema.TimeEntries.Index("spent_date")); d != to {
		t.Errorf("moved entry spent %s, want %s", d, to)
	}
	if recs["2"].DeletedAt == nil {
		t.Errorf("deleted entry: %+v", recs["2"])
	}
}

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
	if r := sourcetest.Records(pages); r["1"].ID == "" {
		t.Errorf("window %v: %v", day.AddDays(1), sourcetest.IDs(pages))
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

// The budget planner's count of a pass and of a reconcile run, held
// against the fake's request log (data of one page per listing).
func TestPassCostMatchesTheRequestLog(t *testing.T) {
	t.Parallel()
	for _, scope := range []string{toggl.ScopeMe, toggl.ScopeWorkspace} {
		t.Run(scope, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, toggltest.Options{})
			now := f.Now().UTC()
			for i := int64(1); i <= 3; i++ {
				putEntry(f, i, 1, now.Add(-time.Duration(i)*time.Hour))
			}
			c := newClient(t, f, nil, func(p *toggl.Params, _ *httpx.Config) { p.Scope = scope })
			s := provider.Settings{Scope: scope}
			span := 15 * time.Minute
			sourcetest.CheckPassCost(t, c, f, toggl.Resources,
				func(clients.Resource) clients.Window { return clients.Window{UpdatedSince: now.Add(-span)} },
				func(r clients.Resource) provider.Cost { return toggl.PassCost(r, provider.PassShape{Span: span}, s) })
			sourcetest.CheckPassCost(t, c, f, toggl.Resources, sourcetest.ReconcileWindow(clients.DateOf(now), 90),
				func(r clients.Resource) provider.Cost {
					return toggl.PassCost(r, provider.PassShape{Reconcile: true, Days: 98}, s)
				})
		})
	}
}

// Toggl lists only active clients, projects and tasks unless asked for
// both (its reference; the fake does the same): archiving must read as
// is_active false, not as a deletion a reconcile tombstones while time
// entries still point at the record.
func TestArchivedStaysMirroredThroughReconcile(t *testing.T) {
	t.Parallel()
	clk := conformance.NewClock()
	f := newFake(t, toggltest.Options{Clock: clk.Now})
	f.PutClient(toggltest.Client{ID: 5, Name: "ABC"})
	f.PutProject(toggltest.Project{ID: 1, ClientID: 5, Name: "Site", Active: true})
	f.PutTask(toggltest.Task{ID: 6, ProjectID: 1, Name: "Design", Active: true})
	clk.Advance(time.Second)
	c := newClient(t, f, nil)
	resources := []clients.Resource{clients.Clients, clients.Projects, clients.Tasks}
	p, pool := sourcetest.Mirror(t, poller.Source{Source: c, Resources: resources, Overlap: time.Minute})
	ctx := t.Context()
	if _, err := p.Incremental(ctx, c.Name()); err != nil {
		t.Fatal(err)
	}

	clk.Advance(time.Hour)
	f.PutClient(toggltest.Client{ID: 5, Name: "ABC", Archived: true})
	f.PutProject(toggltest.Project{ID: 1, ClientID: 5, Name: "Site", Active: false})
	f.PutTask(toggltest.Task{ID: 6, ProjectID: 1, Name: "Design", Active: false})
	clk.Advance(time.Second)
	if _, err := p.Incremental(ctx, c.Name()); err != nil {
		t.Fatal(err)
	}
	res, err := p.Reconcile(ctx, c.Name())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Counts.Tombstoned != 0 {
			t.Errorf("reconcile of %s tombstoned %d", r.Resource, r.Counts.Tombstoned)
		}
	}
	for r, id := range map[clients.Resource]string{clients.Clients: "5", clients.Projects: "1", clients.Tasks: "6"} {
		var active, deleted bool
		q := fmt.Sprintf(`SELECT is_active, deleted_at IS NOT NULL FROM %s WHERE source = $1 AND id = $2`, r)
		if err := pool.QueryRow(ctx, q, c.Name(), id).Scan(&active, &deleted); err != nil {
			t.Fatalf("%s %s: %v", r, id, err)
		}
		if active || deleted {
			t.Errorf("archived %s %s: is_active %v, tombstoned %v; want inactive and live", r, id, active, deleted)
		}
	}
}

// quotaCounter counts the client's quota waits.
func quotaCounter(window time.Duration, n *atomic.Int32) opt {
	return func(p *toggl.Params, _ *httpx.Config) {
		p.QuotaWindow = window
		p.OnWait = func(reason string, _ time.Duration) {
			if reason == "quota" {
				n.Add(1)
			}
		}
	}
}

// Toggl answers 402 for paid-only features too (tasks on Free). With
// X-Toggl-Quota-Remaining above 0 the quota is not spent: the listing fails
// at once, as unsupported, naming the resource, and nothing waits.
func TestPlanGated402WithQuotaLeftFailsAtOnce(t *testing.T) {
	t.Parallel()
	f := newFake(t, toggltest.Options{Quota: 100, PlanGated: []clients.Resource{clients.Tasks}})
	f.PutClient(toggltest.Client{ID: 5, Name: "ABC"})
	var waits atomic.Int32
	c := newClient(t, f, nil, quotaCounter(time.Hour, &waits))
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err := sourcetest.CollectContext(ctx, c, clients.Tasks, clients.Window{})
	if !errors.Is(err, toggl.ErrPlanGated) || !errors.Is(err, clients.ErrUnsupported) || !strings.Contains(err.Error(), "plan does not include tasks") ||
		!strings.Contains(err.Error(), "remove tasks from the source's resources") {
		t.Fatalf("err = %v", err)
	}
	if f.RequestCount() != 1 || waits.Load() != 0 || !c.QuotaWaitUntil().IsZero() {
		t.Errorf("%d requests, %d quota waits, waiting until %v", f.RequestCount(), waits.Load(), c.QuotaWaitUntil())
	}
	if _, err := sourcetest.Collect(t, c, clients.Clients, clients.Window{}); err != nil {
		t.Errorf("clients after the gated tasks: %v", err)
	}
}

// Without quota headers a 402 is first taken as a spent quota and waited
// out; one that still comes after the window reset is the plan's: the
// resource is skipped (the others sync), and from then on it fails at once,
// without another wait.
func TestPlanGated402AfterAQuotaWaitIsSkippedAndRemembered(t *testing.T) {
	t.Parallel()
	f := newFake(t, toggltest.Options{PlanGated: []clients.Resource{clients.Tasks}})
	now := f.Now()
	f.PutTimeEntry(toggltest.TimeEntry{ID: 1, UserID: 7, Start: now.Add(-time.Hour), Stop: &now, Duration: 3600})
	var waits atomic.Int32
	c := newClient(t, f, nil, quotaCounter(time.Second, &waits))
	p, _ := sourcetest.Mirror(t, poller.Source{Source: c, Resources: []clients.Resource{clients.Tasks, clients.TimeEntries}, Overlap: time.Minute})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	res, err := p.Incremental(ctx, c.Name())
	if err != nil || len(res) != 1 || res[0].Resource != clients.TimeEntries || res[0].Counts.Inserted != 1 {
		t.Fatalf("first pass: %+v, %v", res, err)
	}
	if n := countPath(f, "/workspaces/4242/tasks"); n != 2 || waits.Load() != 1 {
		t.Fatalf("tasks asked %d times, %d quota waits; want 2 and 1", n, waits.Load())
	}
	if _, err := sourcetest.Collect(t, c, clients.Tasks, clients.Window{}); !errors.Is(err, clients.ErrUnsupported) || !strings.Contains(err.Error(), "plan does not include tasks") {
		t.Fatalf("second listing: %v", err)
	}
	// Refused at once: no second quota wait (counted, not timed).
	if n := countPath(f, "/workspaces/4242/tasks"); n != 3 || waits.Load() != 1 {
		t.Errorf("tasks asked %d times, %d quota waits: want a third request refused at once", n, waits.Load())
	}
}

// A user who changes nothing for longer than Toggl serves `since` (about
// three months) keeps syncing: each complete since listing covers up to
// its Date, so the cursor keeps up instead of staying at the newest `at`
// seen and falling out of what Toggl serves.
func TestIdleForMonthsKeepsSyncing(t *testing.T) {
	t.Parallel()
	clk := conformance.NewClock()
	f := newFake(t, toggltest.Options{Clock: clk.Now})
	start := clk.Now().Add(-time.Hour)
	stop := start.Add(30 * time.Minute)
	f.PutTimeEntry(toggltest.TimeEntry{ID: 1, UserID: 7, Start: start, Stop: &stop, Duration: 1800, At: clk.Now().Add(-time.Minute)})
	clk.Advance(time.Second)
	c := newClient(t, f, nil)
	p, pool := sourcetest.Mirror(t, poller.Source{Source: c, Resources: []clients.Resource{clients.TimeEntries}, Overlap: time.Minute})
	ctx := t.Context()
	for i := range 5 { // idle passes a minute apart write no cursor
		clk.Advance(time.Minute)
		res, err := p.Incremental(ctx, c.Name())
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && res[0].HighWaterAfter.After(res[0].HighWaterBefore) {
			t.Fatalf("idle pass %d moved the cursor %s → %s: a write every idle pass", i, res[0].HighWaterBefore, res[0].HighWaterAfter)
		}
	}
	for range 10 { // a pass every 12 days, for 120 days, with nothing changed
		if _, err := p.Incremental(ctx, c.Name()); err != nil {
			t.Fatalf("day %d: %v", int(clk.Now().Sub(start).Hours()/24), err)
		}
		clk.Advance(12 * 24 * time.Hour)
	}
	f.PutTimeEntry(toggltest.TimeEntry{ID: 1, UserID: 7, Start: start, Stop: &stop, Duration: 1800, Description: str("back"), At: clk.Now()})
	clk.Advance(time.Second)
	if _, err := p.Incremental(ctx, c.Name()); err != nil {
		t.Fatal(err)
	}
	var notes string
	if err := pool.QueryRow(ctx, `SELECT coalesce(notes, '') FROM time_entries WHERE source = $1 AND id = '1'`, c.Name()).Scan(&notes); err != nil || notes != "back" {
		t.Fatalf("notes %q, %v; want the edit made after four idle months", notes, err)
	}
}

// A genuine spent quota, no quota headers, and a quota window that another
// user of the same token (a CLI sync, another source, another tool) opened
// before this client's: the client's tracked wait ends before Toggl's reset
// and the retry still gets 402. That is a quota spent again, not a plan
// gate: time entries are never gated, and a body speaking of a limit is a
// quota.
func TestGenuineQuota402IsNotAPlanGate(t *testing.T) {
	t.Parallel()
	const w = 2 * time.Second
	f := newFake(t, toggltest.Options{Quota: 3, QuotaWindow: w, NoQuotaHeaders: true})
	now := f.Now()
	f.PutTimeEntry(toggltest.TimeEntry{ID: 1, UserID: 7, Start: now.Add(-time.Hour), Stop: &now, Duration: 3600})
	other := func() {
		req, _ := http.NewRequest(http.MethodGet, f.URL()+"/me", nil)
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(f.Token()+":api_token")))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	c := newClient(t, f, nil, func(p *toggl.Params, _ *httpx.Config) { p.QuotaWindow = w })
	start := time.Now()
	other() // Toggl's window opens here
	time.Sleep(w / 2)
	if _, err := sourcetest.Collect(t, c, clients.Clients, clients.Window{}); err != nil { // ours opens here
		t.Fatal(err)
	}
	time.Sleep(time.Until(start.Add(w + 100*time.Millisecond)))
	for range 3 { // Toggl's next window opens and is spent by the other user
		other()
	}
	_, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{UpdatedSince: now.Add(-2 * time.Hour)})
	if errors.Is(err, toggl.ErrPlanGated) || errors.Is(err, clients.ErrUnsupported) {
		t.Fatalf("a spent quota was taken for a plan gate: %v", err)
	}
}

// Toggl's "3 months" may be calendar months, 89 days back from 1 May: the
// first sync asks within that.
func TestFirstSyncWithinThreeCalendarMonths(t *testing.T) {
	t.Parallel()
	f := newFake(t, toggltest.Options{SinceLimit: 89 * 24 * time.Hour})
	c := newClient(t, f, nil)
	if _, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{}); err != nil {
		t.Fatalf("first sync where Toggl serves 89 days: %v", err)
	}
}

// Issue 23, item 3: with scope me, a workspace webhook delivers every
// user's time-entry events, but the me listings cover only the token
// owner's entries: DecodeEvent hands over the owner's, never another
// user's (which a reconcile would tombstone and the next event write back).
// Before /me told who the owner is, none is handed over.
func TestDecodeEventScopeMeOnlyTheOwnersEntries(t *testing.T) {
	t.Parallel()
	f := newFake(t, toggltest.Options{})
	now := f.Now().UTC()
	putEntry(f, 5, toggltest.OwnerID, now.Add(-2*time.Hour))
	putEntry(f, 6, 2, now.Add(-3*time.Hour)) // another user's
	c := newClient(t, f, nil)
	event := func(id int64) []byte {
		stop := now.Add(-time.Hour)
		return fmt.Appendf(nil, `{"id":%d,"workspace_id":%d,"project_id":null,"task_id":null,"user_id":%d,"billable":false,"description":"x","start":%q,"stop":%q,"duration":1800,"tags":[],"tag_ids":[],"at":%q,"server_deleted_at":null}`,
			id, toggltest.DefaultWorkspaceID, map[int64]int64{5: toggltest.OwnerID, 6: 2}[id], now.Add(-90*time.Minute).Format(time.RFC3339), stop.Format(time.RFC3339), now.Format(time.RFC3339))
	}
	if recs, ok, err := c.DecodeEvent(clients.TimeEntries, event(6), now); err != nil || ok || len(recs) > 0 {
		t.Fatalf("before /me: %d records, ok %v, %v", len(recs), ok, err)
	}
	if _, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{}); err != nil {
		t.Fatal(err)
	}
	recs, ok, err := c.DecodeEvent(clients.TimeEntries, event(5), now)
	if err != nil || !ok || len(recs) != 1 || recs[0].ID != "5" {
		t.Fatalf("the owner's entry: %v, ok %v, %v", recs, ok, err)
	}
	if recs, ok, err := c.DecodeEvent(clients.TimeEntries, event(6), now); err != nil || ok || len(recs) > 0 {
		t.Fatalf("another user's entry: %d records, ok %v, %v: want none (the me listings never return it)", len(recs), ok, err)
	}
}

// Issue 22: a backfill finishes while entries already served are deleted
// between two requests, in both scopes: /me by date windows (each one
// response: nothing between pages to shift), the detailed search by its
// X-Next-* keyset headers (a deletion above the cursor moves nothing it
// resumes at).
func TestBackfillFinishesWhileServedEntriesAreDeleted(t *testing.T) {
	t.Parallel()
	for _, scope := range []string{toggl.ScopeMe, toggl.ScopeWorkspace} {
		t.Run(scope, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, toggltest.Options{ReportPageCap: 20})
			today := clients.DateOf(f.Now().UTC())
			first := today.AddDays(-30)
			var ids []int64
			for d := range 20 {
				for i := range 10 {
					id := int64(1000 + d*10 + i)
					putEntry(f, id, 11, first.AddDays(d).Time().Add(9*time.Hour+time.Duration(i)*time.Minute))
					ids = append(ids, id)
				}
			}
			gone := map[int64]bool{}
			served := map[int64]bool{}
			var mu sync.Mutex
			f.OnList(func(fakeapi.Request) {
				mu.Lock()
				defer mu.Unlock()
				n := 0
				for _, id := range ids {
					if served[id] && !gone[id] && n < 2 {
						gone[id] = true
						f.Delete(clients.TimeEntries, id)
						n++
					}
				}
			})
			c := newClient(t, f, nil, func(p *toggl.Params, _ *httpx.Config) {
				p.Scope = scope
			})
			got := map[int64]bool{}
			err := c.List(t.Context(), clients.TimeEntries, clients.Window{From: first, To: first.AddDays(19)}, func(_ context.Context, p clients.Page) error {
				mu.Lock()
				defer mu.Unlock()
				for _, r := range p.Records {
					id, _ := strconv.ParseInt(r.ID, 10, 64)
					got[id], served[id] = true, true
				}
				return nil
			})
			if err != nil {
				t.Fatalf("backfill failed: %v", err)
			}
			if len(gone) == 0 && scope == toggl.ScopeWorkspace {
				t.Fatal("nothing was deleted during the walk")
			}
			for _, id := range ids {
				if !gone[id] && !got[id] {
					t.Errorf("entry %d was never served", id)
				}
			}
		})
	}
}
