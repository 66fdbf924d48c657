package harvest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/harvest"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/internal/sourcetest"
	"github.com/tidemarkhq/tidemark/clients/provider"
	"github.com/tidemarkhq/tidemark/internal/conformance"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
	"github.com/tidemarkhq/tidemark/internal/fakeapi/harvestfake"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/poller"
	"github.com/tidemarkhq/tidemark/schema"
)

var base = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

func newFake(t *testing.T, o harvestfake.Options) *harvestfake.Server {
	return sourcetest.Closed(t, harvestfake.New(o))
}

// seed adds reference data and n entries: entry i is spent on day i%7 before
// base and updated i seconds after base.
func seed(f *harvestfake.Server, n int) {
	f.PutClient(harvestfake.Client{ID: 10, Name: "ABC Corp", Currency: "EUR", IsActive: true, UpdatedAt: base})
	f.PutUser(harvestfake.User{ID: 20, FirstName: "Kim", LastName: "Allen", Email: "kim@example.com", IsActive: true, UpdatedAt: base})
	f.PutProject(harvestfake.Project{ID: 30, ClientID: 10, Name: "Website", Code: "WEB", IsActive: true, IsBillable: true, UpdatedAt: base})
	f.PutTask(harvestfake.Task{ID: 40, Name: "Design", IsActive: true, UpdatedAt: base})
	notes := "first \"draft\"\n"
	for i := 1; i <= n; i++ {
		e := harvestfake.TimeEntry{
			ID: int64(1000 + i), SpentDate: clients.DateOf(base).AddDays(-(i % 7)),
			Hours: fmt.Sprintf("%d.25", i%8), UserID: 20, ProjectID: 30, TaskID: 40, ClientID: 10,
			Billable: i%2 == 0, IsClosed: i%3 == 0, UpdatedAt: base.Add(time.Duration(i) * time.Second),
		}
		if i%4 == 0 {
			e.Notes = &notes
		}
		if i%5 == 0 {
			e.InvoiceID, e.IsBilled, e.IsLocked = 555, true, true
		}
		f.PutTimeEntry(e)
	}
	// Two records of every resource read from its declaration (one company),
	// nested ones under the first record of their parent.
	first := map[clients.Resource]int64{clients.Users: 20}
	for i, r := range harvest.Resources {
		def, _ := schema.Lookup(r)
		if _, ok := harvest.Endpoints[r]; !ok {
			continue
		}
		for k := range 2 - btoi(def.Singleton) {
			id := int64(500 + i*10 + k)
			d := sampleDoc(def, id, conformance.ContentValue(r, "word"), clients.DateOf(base))
			d.Parent, d.UpdatedAt = first[def.Parent], base.Add(time.Duration(k)*time.Second)
			f.PutDoc(r, d)
			if k == 0 {
				first[r] = id
			}
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

type opt = sourcetest.Opt[harvest.Params]

var kind = sourcetest.Kind[harvest.Params, *harvest.Client]{
	HTTPConfig: harvest.HTTPConfig, New: harvest.New,
	SetHTTP: func(p *harvest.Params, h *httpx.Client) { p.HTTP = h },
}

func newClient(t *testing.T, f *harvestfake.Server, opts ...opt) *harvest.Client {
	t.Helper()
	return kind.Build(t, harvest.Params{
		Base: provider.Base{Name: "acme", BaseURL: f.URL(), Token: f.Token(),
			RateLimit: httpx.RateLimit{Requests: 1000, Per: time.Second},
			Env: provider.Env{Contact: "ops@example.com", Version: "test",
				Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)}},
		AccountID: f.AccountID(), PerPage: 10,
	}, opts...)
}

func TestListFollowsLinksBothPaginationStyles(t *testing.T) {
	t.Parallel()
	for _, cursor := range []bool{false, true} {
		t.Run(fmt.Sprintf("cursor=%v", cursor), func(t *testing.T) {
			t.Parallel()
			f := newFake(t, harvestfake.Options{Cursor: cursor, Skew: -time.Hour})
			seed(f, 25)
			c := newClient(t, f)
			pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{})
			if err != nil {
				t.Fatal(err)
			}
			if len(pages) != 3 || f.RequestCount() != 3 {
				t.Fatalf("pages = %d, requests = %d, want 3 and 3", len(pages), f.RequestCount())
			}
			var want []string
			for _, id := range f.IDs(clients.TimeEntries) {
				want = append(want, strconv.FormatInt(id, 10))
			}
			if got := sourcetest.IDs(pages); !reflect.DeepEqual(got, want) {
				t.Fatalf("ids = %v\nwant  %v", got, want)
			}
			for i, p := range pages {
				if p.Number != i+1 || p.Resource != clients.TimeEntries {
					t.Errorf("page %d: Number %d Resource %s", i, p.Number, p.Resource)
				}
				// SourceTime is the fake's (skewed) clock, not ours.
				if d := time.Until(p.SourceTime); d > -59*time.Minute || d < -61*time.Minute {
					t.Errorf("SourceTime %v is not the source's clock", p.SourceTime)
				}
				for _, r := range p.Records {
					if r.FetchedAt.IsZero() || time.Since(r.FetchedAt) > time.Minute {
						t.Errorf("FetchedAt = %v", r.FetchedAt)
					}
				}
			}
			for _, rq := range f.Requests() {
				if rq.UserAgent != "tidemark/test (ops@example.com)" || rq.Query.Get("per_page") != "10" {
					t.Errorf("request %+v", rq)
				}
				if cursor != rq.Query.Has("cursor") && rq.Seq > 1 {
					t.Errorf("request %d query %v", rq.Seq, rq.Query)
				}
			}
		})
	}
}

func TestNormalizationMatchesTruth(t *testing.T) {
	t.Parallel()
	f := newFake(t, harvestfake.Options{})
	seed(f, 12)
	c := newClient(t, f)
	st := f.State()
	for _, r := range schema.Resources() {
		pages, err := sourcetest.Collect(t, c, r, clients.Window{})
		if err != nil {
			t.Fatal(err)
		}
		want := st.Expected(r)
		n := 0
		for _, p := range pages {
			for _, rec := range p.Records {
				n++
				exp, ok := want[rec.ID]
				if !ok {
					t.Fatalf("%s: unexpected id %s", r, rec.ID)
				}
				if def, _ := schema.Lookup(r); def.Singleton {
					// Versioned by the page's Date.
					exp.Version, rec.CreatedAt = rec.Version, rec.Version
				} else if !strings.HasPrefix(string(rec.Raw), `{"id":`+rec.ID) || !strings.HasSuffix(string(rec.Raw), "}") {
					t.Errorf("%s %s: Raw = %s", r, rec.ID, rec.Raw)
				}
				if rec.CreatedAt.IsZero() || rec.CreatedAt.After(rec.Version) {
					t.Errorf("%s %s: CreatedAt %s (version %s)", r, rec.ID, rec.CreatedAt, rec.Version)
				}
				got := rec
				got.Raw, got.FetchedAt, got.CreatedAt = nil, time.Time{}, time.Time{}
				if !reflect.DeepEqual(got, exp) {
					t.Errorf("%s %s:\n got %+v %#v\nwant %+v %#v", r, rec.ID, got, got.Row, exp, exp.Row)
				}
			}
		}
		if n != len(want) {
			t.Errorf("%s: %d records, want %d", r, n, len(want))
		}
	}
}

func TestWindowsQueryParameters(t *testing.T) {
	t.Parallel()
	f := newFake(t, harvestfake.Options{})
	seed(f, 30)
	c := newClient(t, f, func(p *harvest.Params, _ *httpx.Config) { p.PerPage = 2000 })

	// Zero time: no updated_since at all.
	if _, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{}); err != nil {
		t.Fatal(err)
	}
	since := base.Add(20*time.Second + 300*time.Millisecond).In(time.FixedZone("CET", 3600))
	pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{UpdatedSince: since})
	if err != nil {
		t.Fatal(err)
	}
	// Sub-second precision is dropped (rounding down only re-delivers).
	if got := len(sourcetest.IDs(pages)); got != 11 {
		t.Errorf("updated_since listing returned %d, want 11 (>= 20 s)", got)
	}
	from, to := clients.DateOf(base).AddDays(-3), clients.DateOf(base).AddDays(-1)
	pages, err = sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{From: from, To: to})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		for _, r := range p.Records {
			if d := schema.TimeEntries.Date(r, "spent_date"); d.Before(from) || d.After(to) {
				t.Errorf("entry %s spent %v outside %v..%v", r.ID, d, from, to)
			}
		}
	}
	if len(sourcetest.IDs(pages)) != 14 {
		t.Errorf("date listing: %d entries, want 14", len(sourcetest.IDs(pages)))
	}
	reqs := f.Requests()
	if q := reqs[0].Query; q.Has("updated_since") || q.Has("from") || q.Get("per_page") != "2000" {
		t.Errorf("zero window query = %v", q)
	}
	if q := reqs[1].Query; q.Get("updated_since") != "2026-03-01T09:00:20Z" {
		t.Errorf("updated_since = %q", q.Get("updated_since"))
	}
	if q := reqs[2].Query; q.Get("from") != "2026-02-26" || q.Get("to") != "2026-02-28" || q.Has("updated_since") {
		t.Errorf("date query = %v", q)
	}
}

func TestUnsupported(t *testing.T) {
	t.Parallel()
	f := newFake(t, harvestfake.Options{})
	c := newClient(t, f, func(p *harvest.Params, _ *httpx.Config) {
		p.Resources = []clients.Resource{clients.TimeEntries, clients.Projects}
	})
	d := clients.DateOf(base)
	if _, err := sourcetest.Collect(t, c, clients.Projects, clients.Window{From: d, To: d}); !errors.Is(err, clients.ErrUnsupported) {
		t.Errorf("projects by date: err = %v", err)
	}
	if _, err := sourcetest.Collect(t, c, clients.Users, clients.Window{}); !errors.Is(err, clients.ErrUnsupported) {
		t.Errorf("unconfigured resource: err = %v", err)
	}
	if f.RequestCount() != 0 {
		t.Errorf("requests = %d, want 0", f.RequestCount())
	}
	if got := c.Resources(); !reflect.DeepEqual(got, []clients.Resource{clients.TimeEntries, clients.Projects}) || c.Name() != "acme" {
		t.Errorf("Resources = %v Name = %s", got, c.Name())
	}
}

func TestMalformedPagesNameSourceResourcePageField(t *testing.T) {
	t.Parallel()
	sourcetest.EachMalformation(t, "time_entries[0].updated_at", func(t *testing.T, m sourcetest.Malformed) {
		f := newFake(t, harvestfake.Options{})
		seed(f, 25)
		f.Malform("time_entries", 2, m.M)
		pages, err := sourcetest.Collect(t, newClient(t, f), clients.TimeEntries, clients.Window{})
		sourcetest.WantDecodeError(t, err, "acme", "time_entries", 2, m.Field, m.What)
		if len(pages) != 1 {
			t.Errorf("fn got %d pages before the bad one, want 1", len(pages))
		}
		if f.RequestCount() != 2 {
			t.Errorf("requests = %d, want 2 (a decode error is not retried)", f.RequestCount())
		}
	})
}

func TestRetriesAgainstFake(t *testing.T) {
	t.Parallel()
	// Faults the client rides out: the listing completes, in the pages the
	// data makes, after the requests (and the time) the fault costs.
	for _, tc := range []struct {
		name            string
		entries         int
		fault           func(*harvestfake.Server)
		opts            []opt
		pages, requests int
		atLeast         time.Duration
	}{
		{name: "5xx then success", entries: 5, fault: func(f *harvestfake.Server) { f.FailNext(2, 503) }, pages: 1, requests: 3},
		{
			name: "slow response times out and is retried", entries: 5, fault: func(f *harvestfake.Server) { f.SlowNext(1, 5*time.Second) },
			opts: []opt{func(_ *harvest.Params, c *httpx.Config) { c.Timeout = 100 * time.Millisecond }}, pages: 1, requests: 2,
		},
		{
			name: "429 honoured without spending retries", entries: 25, fault: func(f *harvestfake.Server) { f.RateLimitNext(1, "1") },
			opts: []opt{func(_ *harvest.Params, c *httpx.Config) { c.MaxAttempts = 1 }}, pages: 3, requests: 4, atLeast: time.Second,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, harvestfake.Options{})
			seed(f, tc.entries)
			tc.fault(f)
			c := newClient(t, f, tc.opts...)
			start := time.Now()
			pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{})
			if err != nil || len(pages) != tc.pages || f.RequestCount() != tc.requests || time.Since(start) < tc.atLeast {
				t.Fatalf("err = %v pages %d requests %d in %v, want %d pages in %d requests", err, len(pages), f.RequestCount(), time.Since(start), tc.pages, tc.requests)
			}
		})
	}
	t.Run("5xx exhausts", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, harvestfake.Options{})
		seed(f, 5)
		f.FailNext(100, 500)
		_, err := sourcetest.Collect(t, newClient(t, f, func(_ *harvest.Params, c *httpx.Config) { c.MaxAttempts = 4 }), clients.TimeEntries, clients.Window{})
		if !errors.Is(err, httpx.ErrStatus) || !strings.Contains(err.Error(), "acme time_entries page 1") || f.RequestCount() != 4 {
			t.Fatalf("err = %v after %d requests", err, f.RequestCount())
		}
	})
	t.Run("dropped connection", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, harvestfake.Options{})
		seed(f, 15)
		if _, err := sourcetest.Collect(t, newClient(t, f), clients.TimeEntries, clients.Window{}); err != nil {
			t.Fatal(err)
		}
		f.ResetRequests()
		f.DropNext(1)
		pages, err := sourcetest.Collect(t, newClient(t, f), clients.TimeEntries, clients.Window{})
		if err != nil || len(pages) != 2 || f.RequestCount() != 3 {
			t.Fatalf("err = %v pages %d requests %d", err, len(pages), f.RequestCount())
		}
	})
	t.Run("fake's own rate limit", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, harvestfake.Options{RateLimit: httpx.RateLimit{Requests: 2, Per: time.Second}})
		seed(f, 35) // 4 pages
		pages, err := sourcetest.Collect(t, newClient(t, f), clients.TimeEntries, clients.Window{})
		if err != nil || len(pages) != 4 {
			t.Fatalf("err = %v pages %d", err, len(pages))
		}
		var limited int
		for _, r := range f.Requests() {
			if r.Status == 429 {
				limited++
			}
		}
		if limited == 0 || f.RequestCount() != 4+limited {
			t.Fatalf("requests %d with %d 429s", f.RequestCount(), limited)
		}
	})
}

func TestWrongTokenIsUnauthorizedNotRetriedNotLeaked(t *testing.T) {
	t.Parallel()
	f := newFake(t, harvestfake.Options{})
	const bad = "wrong-secret-token-xyz"
	c := newClient(t, f, func(p *harvest.Params, _ *httpx.Config) { p.Token = bad })
	_, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{})
	if !errors.Is(err, httpx.ErrUnauthorized) || f.RequestCount() != 1 {
		t.Fatalf("err = %v after %d requests", err, f.RequestCount())
	}
	if strings.Contains(err.Error(), bad) {
		t.Fatalf("token in error: %v", err)
	}
	c = newClient(t, f, func(p *harvest.Params, _ *httpx.Config) { p.AccountID = "999" })
	if _, err := sourcetest.Collect(t, c, clients.Users, clients.Window{}); !errors.Is(err, httpx.ErrUnauthorized) {
		t.Fatalf("wrong account: err = %v", err)
	}
}

// A 403 is a token whose user lacks a right (invoices need an
// administrator or manager), not a bad token: the resource is unsupported
// (skipped with a warning), and so are the lists under its records.
func TestForbiddenResourceIsUnsupported(t *testing.T) {
	t.Parallel()
	f := newFake(t, harvestfake.Options{Forbidden: []clients.Resource{schema.Invoices.Name}})
	seed(f, 3)
	c := newClient(t, f)
	for _, r := range []clients.Resource{schema.Invoices.Name, schema.InvoicePayments.Name} {
		_, err := sourcetest.Collect(t, c, r, clients.Window{})
		if !errors.Is(err, clients.ErrUnsupported) || errors.Is(err, httpx.ErrUnauthorized) ||
			!strings.Contains(err.Error(), "lacks the permission") || strings.Contains(err.Error(), "check the source's token") {
			t.Errorf("%s: err = %v, want unsupported naming the missing permission", r, err)
		}
	}
	if _, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{}); err != nil {
		t.Errorf("time_entries: %v", err)
	}
}

// A pass over a token without the right to list invoices mirrors the rest,
// tick after tick, and fails nothing.
func TestForbiddenResourceIsSkippedByThePoller(t *testing.T) {
	t.Parallel()
	rs := []clients.Resource{clients.Users, schema.Invoices.Name, schema.InvoicePayments.Name, clients.TimeEntries}
	e := newAccountEnvWith(t, harvestfake.Options{Forbidden: []clients.Resource{schema.Invoices.Name}}, rs...)
	e.f.PutUser(harvestfake.User{ID: 20, FirstName: "Kim", LastName: "Allen", Email: "kim@example.com", IsActive: true})
	e.f.PutTimeEntry(harvestfake.TimeEntry{ID: 1, SpentDate: clients.DateOf(e.clk.Now()), Hours: "1.0", UserID: 20, ProjectID: 30})
	for tick := range 2 {
		e.clk.Advance(time.Second)
		res, err := e.p.Incremental(t.Context(), "acme")
		if err != nil {
			t.Fatalf("tick %d: %v", tick, err)
		}
		var got []string
		for _, r := range res {
			got = append(got, string(r.Resource))
		}
		if strings.Join(got, " ") != "users time_entries" {
			t.Fatalf("tick %d: results for %v, want users and time_entries", tick, got)
		}
	}
	var n int
	if err := e.pool.QueryRow(t.Context(), `SELECT count(*) FROM time_entries WHERE source = 'acme'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("time entries mirrored: %d (%v)", n, err)
	}
}

// A server that serves fewer records a page than asked (Harvest served
// 100 in 2019) is walked by the size it serves: its full pages are not
// short ones.
func TestServedPageSizeBelowAskedIsWalked(t *testing.T) {
	t.Parallel()
	f := newFake(t, harvestfake.Options{PerPageCap: 4})
	seed(f, 25)
	pages, err := sourcetest.Collect(t, newClient(t, f), clients.TimeEntries, clients.Window{})
	if err != nil || len(pages) != 7 || len(sourcetest.IDs(pages)) != 25 || f.RequestCount() != 7 {
		t.Fatalf("err = %v, %d pages of %d entries in %d requests, want 7 of 25 in 7", err, len(pages), len(sourcetest.IDs(pages)), f.RequestCount())
	}
}

func TestNextLinkToAnotherHostIsRejected(t *testing.T) {
	t.Parallel()
	var evil atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { evil.Add(1) }))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"users":[],"links":{"next":%q}}`, other.URL+"/v2/users?page=2")
	}))
	defer srv.Close()
	c, err := harvest.New(harvest.Params{Base: provider.Base{Name: "acme", BaseURL: srv.URL + "/v2", Token: "secret-token", Env: provider.Env{Contact: "x"}}, AccountID: "1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sourcetest.Collect(t, c, clients.Users, clients.Window{})
	if !errors.Is(err, httpx.ErrDecode) || !strings.Contains(err.Error(), "links.next") || evil.Load() != 0 {
		t.Fatalf("err = %v, other host hit %d times", err, evil.Load())
	}
}

// A base_url on a reverse proxy gets Harvest's bodies as they are, with
// links to api.harvestapp.com: they are followed on the proxy.
func TestNextLinkOnHarvestsHostIsFollowedOnTheBase(t *testing.T) {
	t.Parallel()
	f := newFake(t, harvestfake.Options{})
	seed(f, 25)
	fake, _ := url.Parse(f.URL())
	var proxied atomic.Int64
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		proxied.Add(1)
		pr.Out.URL.Scheme, pr.Out.URL.Host = fake.Scheme, fake.Host
		pr.Out.URL.Path = strings.TrimPrefix(pr.In.URL.Path, "/harvest")
		pr.Out.Host = "api.harvestapp.com" // the fake's links name the host asked for
	}})
	defer proxy.Close()
	c := newClient(t, f, func(p *harvest.Params, _ *httpx.Config) { p.BaseURL = proxy.URL + "/harvest/v2" })
	pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{})
	if err != nil || len(sourcetest.IDs(pages)) != 25 || proxied.Load() != 3 || f.RequestCount() != 3 {
		t.Fatalf("err = %v, %d entries, %d requests through the proxy, %d at the fake", err, len(sourcetest.IDs(pages)), proxied.Load(), f.RequestCount())
	}
}

func TestRawIsExactBytesAndDecimalsExact(t *testing.T) {
	t.Parallel()
	rec := "{ \"id\" : 7,\n \"spent_date\":\"2026-01-02\", \"hours\": 1.3333333333333333333, \"notes\":null, \"unknown\":{\"x\":[1,2]},\n" +
		"\"user\":{\"id\":1},\"project\":{\"id\":2},\"task\":null,\"client\":{\"id\":3},\"invoice\":{\"id\":4,\"number\":\"9\"},\"billable\":true,\n" +
		"\"updated_at\":\"2026-01-02T10:00:00Z\" }"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"time_entries":[ %s ],"links":{"next":null}}`, rec)
	}))
	defer srv.Close()
	c, err := harvest.New(harvest.Params{Base: provider.Base{Name: "acme", BaseURL: srv.URL, Token: "t0ken", Env: provider.Env{Contact: "x"}}, AccountID: "1"})
	if err != nil {
		t.Fatal(err)
	}
	pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{})
	if err != nil {
		t.Fatal(err)
	}
	got := pages[0].Records[0]
	if string(got.Raw) != rec {
		t.Errorf("Raw = %q\nwant  %q", got.Raw, rec)
	}
	te := schema.TimeEntries
	if te.Decimal(got, "hours") != "1.3333333333333333333" || !te.IsNull(got, "notes") || !te.IsNull(got, "task_id") ||
		te.Text(got, "invoice_id") != "4" || te.Text(got, "client_id") != "3" || !te.Bool(got, "billable") {
		t.Errorf("row = %#v", got.Row)
	}
}

func TestParamsValidate(t *testing.T) {
	t.Parallel()
	sourcetest.WantValidation(t, harvest.New, harvest.Params{Base: provider.Base{Name: "acme", Token: "t", Env: provider.Env{Contact: "c"}}, AccountID: "1"}, []sourcetest.Refusal[harvest.Params]{
		{Key: "account_id", Change: func(p *harvest.Params) { p.AccountID = "" }},
		{Key: "contact", Change: func(p *harvest.Params) { p.Contact = "" }},
		{Key: "per_page", Change: func(p *harvest.Params) { p.PerPage = 2001 }},
	})
}

func TestStopsAtFnError(t *testing.T) {
	t.Parallel()
	f := newFake(t, harvestfake.Options{})
	seed(f, 25)
	boom := errors.New("boom")
	calls := 0
	err := newClient(t, f).List(t.Context(), clients.TimeEntries, clients.Window{}, func(context.Context, clients.Page) error {
		calls++
		// A slow write: the page read ahead is served meanwhile, and a
		// fetcher that reads further ahead has time to ask for a third.
		for deadline := time.Now().Add(10 * time.Second); f.RequestCount() < 2 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		return boom
	})
	// The page read ahead may have been requested, never more.
	if !errors.Is(err, boom) || calls != 1 || f.RequestCount() > 2 {
		t.Fatalf("err = %v after %d calls and %d requests", err, calls, f.RequestCount())
	}
}

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

// A listing whose first record is deleted every time a page 2 is asked
// (a deletion above the walk between every two pages) still finishes: each
// shift costs one request (page 1 again, from the last date known
// complete), and every entry still there was served.
func TestListingUnderSteadyDeletionsFinishes(t *testing.T) {
	t.Parallel()
	f := newFake(t, harvestfake.Options{})
	seed(f, 25)
	c := newClient(t, f)
	f.OnList(func(rq fakeapi.Request) {
		if rq.Query.Get("page") == "2" {
			f.Delete(clients.TimeEntries, f.IDs(clients.TimeEntries)[0])
		}
	})
	pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{})
	if err != nil {
		t.Fatalf("err = %v, want the listing to finish", err)
	}
	got := map[string]bool{}
	for _, p := range pages {
		for _, r := range p.Records {
			got[r.ID] = true
		}
	}
	for _, id := range f.IDs(clients.TimeEntries) {
		if !got[strconv.FormatInt(id, 10)] {
			t.Errorf("entry %d was never served", id)
		}
	}
	if n := f.RequestCount(); n > 8 {
		t.Errorf("%d requests for 3 pages", n)
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

func TestMain(m *testing.M) { pgtest.Main(m) }

// Harvest hides every deletion from updated_since: reconcile finds them.
func TestConformance(t *testing.T) {
	caps := conformance.Capabilities{Deletions: map[clients.Resource]conformance.Deletion{},
		ListedWhole: map[clients.Resource]bool{}, ListedUnderParents: map[clients.Resource]bool{}}
	for _, r := range conformanceResources {
		caps.Deletions[r] = conformance.Reconciled
		def, _ := schema.Lookup(r)
		if def.NoSince {
			caps.ListedWhole[r] = true
		}
		if def.Parent != "" {
			caps.ListedUnderParents[r] = true
		}
	}
	conformance.Run(t, conformance.Provider[*harvestfake.Server]{
		Caps: caps,
		Fake: func(now func() time.Time) *harvestfake.Server {
			return harvestfake.New(harvestfake.Options{NoRateLimit: true, Clock: now})
		},
		Source: func(f *harvestfake.Server, o conformance.Options, log zerolog.Logger) (clients.Source, error) {
			return harvest.New(harvest.Params{
				Base: provider.Base{Name: "harvest-conf", BaseURL: f.URL(), Token: f.Token(), RateLimit: o.RateLimit,
					Resources: conformanceResources, Env: provider.Env{Contact: "ops@example.com", Logger: log, OnResponse: o.OnResponse}},
				AccountID: f.AccountID(), PerPage: o.PageSize,
			})
		},
		Put:    conformancePut,
		Delete: func(f *harvestfake.Server, r clients.Resource, id int64) { f.Delete(r, id) },
	})
}

// conformanceResources are every resource Harvest serves but the company,
// which is one record per account (TestCompany checks it).
var conformanceResources = func() []clients.Resource {
	var out []clients.Resource
	for _, r := range harvest.Resources {
		if t, _ := schema.Lookup(r); !t.Singleton {
			out = append(out, r)
		}
	}
	return out
}()

// conformancePut stores content where the mirror's content column reads
// it: notes, name, or a user's first_name.
func conformancePut(f *harvestfake.Server, now time.Time, r clients.Resource, id int64, content string) {
	switch r {
	case clients.TimeEntries:
		f.PutTimeEntry(harvestfake.TimeEntry{
			ID: id, SpentDate: clients.DateOf(now), Hours: "1.5", Notes: &content, UserID: 7, ProjectID: 8,
		})
	case clients.Projects:
		f.PutProject(harvestfake.Project{ID: id, ClientID: 9, Name: content, IsActive: true})
	case clients.Clients:
		f.PutClient(harvestfake.Client{ID: id, Name: content, Currency: "EUR", IsActive: true})
	case clients.Users:
		f.PutUser(harvestfake.User{ID: id, FirstName: content, LastName: "Doe", Email: "u@example.com", IsActive: true})
	case clients.Tasks:
		f.PutTask(harvestfake.Task{ID: id, Name: content, IsActive: true})
	default:
		def, ok := schema.Lookup(r)
		if !ok {
			panic("harvest conformance: no record for " + string(r))
		}
		if def.Parent != "" {
			// Each record under its own parent, created first.
			if _, ok := f.Get(def.Parent, id); !ok {
				conformancePut(f, now, def.Parent, id, "parent")
			}
		}
		f.PutDoc(r, sampleDoc(def, id, conformance.ContentValue(r, content), clients.DateOf(now)))
	}
}

// sampleDoc is a plausible record of a declared resource with content in
// its content column, one line per child table, under parent id.
func sampleDoc(def *schema.Table, id int64, content string, day clients.Date) harvestfake.Doc {
	col, _ := conformance.ContentColumn(def.Name)
	d := harvestfake.Doc{ID: id, Values: harvestfake.Sample(def, content, col, day)}
	for _, c := range def.Children {
		d.Lines = append(d.Lines, harvestfake.Line{ID: id*10 + 1, Values: harvestfake.SampleLine(c, day)})
	}
	if def.Parent != "" {
		d.Parent = id
	}
	return d
}

// accountEnv is a fake, a source serving rs and a poller over a fresh
// database.
type accountEnv struct {
	f    *harvestfake.Server
	clk  *fakeapi.Clock
	pool *pgxpool.Pool
	p    *poller.Poller
}

func newAccountEnv(t *testing.T, rs ...clients.Resource) *accountEnv {
	t.Helper()
	return newAccountEnvWith(t, harvestfake.Options{}, rs...)
}

// newAccountEnvWith is newAccountEnv over a fake with options o (its clock
// and rate limit are the env's).
func newAccountEnvWith(t *testing.T, o harvestfake.Options, rs ...clients.Resource) *accountEnv {
	t.Helper()
	clk := conformance.NewClock()
	o.NoRateLimit, o.Clock = true, clk.Now
	f := newFake(t, o)
	c, err := harvest.New(harvest.Params{
		Base: provider.Base{Name: "acme", BaseURL: f.URL(), Token: f.Token(), Resources: rs,
			Env: provider.Env{Contact: "ops@example.com", Logger: zerolog.New(zerolog.NewTestWriter(t))}},
		AccountID: f.AccountID(),
	})
	if err != nil {
		t.Fatal(err)
	}
	pool := pgtest.DB(t)
	p, err := poller.New(poller.Params{Pool: pool, Sources: []poller.Source{{Source: c, Resources: rs, Overlap: time.Minute}},
		Logger: zerolog.New(zerolog.NewTestWriter(t))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return &accountEnv{f: f, clk: clk, pool: pool, p: p}
}

func (e *accountEnv) pass(t *testing.T, r clients.Resource) poller.Result {
	t.Helper()
	e.clk.Advance(time.Second)
	res, err := e.p.Incremental(t.Context(), "acme", r)
	if err != nil {
		t.Fatalf("incremental %s: %v", r, err)
	}
	return res[0]
}

// lines returns invoice 1's lines as "id:amount", and their row versions
// (xmin), in line order.
func (e *accountEnv) lines(t *testing.T) (got []string, xmins []string) {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT l.id || ':' || l.amount::text, l.xmin::text, l.parent_hash = i.content_hash
		FROM invoice_line_items l JOIN invoices i ON i.source = l.source AND i.id = l.invoice_id
		WHERE l.source = 'acme' AND l.invoice_id = '1' ORDER BY l.id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s, x string
		var current bool
		if err := rows.Scan(&s, &x, &current); err != nil {
			t.Fatal(err)
		}
		if !current {
			t.Errorf("line %s was not taken from the invoice's current content", s)
		}
		got, xmins = append(got, s), append(xmins, x)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got, xmins
}

func invoice(day clients.Date, amounts ...string) harvestfake.Doc {
	d := harvestfake.Doc{ID: 1, Values: harvestfake.Sample(schema.Invoices, "note", "notes", day)}
	for i, a := range amounts {
		v := harvestfake.SampleLine(schema.Invoices.Children[0], day)
		v["amount"] = clients.Decimal(a)
		d.Lines = append(d.Lines, harvestfake.Line{ID: int64(11 + i), Values: v})
	}
	return d
}

// TestInvoiceLinesFollowTheirInvoice: an invoice's lines are written with
// it, untouched when it is delivered again, replaced as a whole when its
// content changes, refused (with the invoice) when one is malformed, and
// gone when reconcile finds the invoice deleted.
func TestInvoiceLinesFollowTheirInvoice(t *testing.T) {
	t.Parallel()
	e := newAccountEnv(t, schema.Invoices.Name)
	day := clients.DateOf(e.clk.Now())
	e.f.PutDoc(schema.Invoices.Name, invoice(day, "100.00", "25.50"))
	e.pass(t, schema.Invoices.Name)
	got, x1 := e.lines(t)
	if strings.Join(got, " ") != "11:100.00 12:25.50" {
		t.Fatalf("lines %v", got)
	}

	if c := e.pass(t, schema.Invoices.Name).Counts; c.Unchanged != 1 {
		t.Errorf("re-delivery counts %+v", c)
	}
	if _, x2 := e.lines(t); strings.Join(x2, " ") != strings.Join(x1, " ") {
		t.Errorf("re-delivery rewrote the lines: xmin %v → %v", x1, x2)
	}

	e.clk.Advance(2 * time.Minute)
	e.f.PutDoc(schema.Invoices.Name, invoice(day, "80.00"))
	e.pass(t, schema.Invoices.Name)
	if got, _ := e.lines(t); strings.Join(got, " ") != "11:80.00" {
		t.Fatalf("lines after the edit %v, want 11:80.00 alone", got)
	}

	e.clk.Advance(2 * time.Minute)
	bad := invoice(day, "1.00")
	bad.Lines[0].Values["amount"] = "lots"
	e.f.PutDoc(schema.Invoices.Name, bad)
	e.clk.Advance(time.Second)
	_, err := e.p.Incremental(t.Context(), "acme", schema.Invoices.Name)
	if err == nil || !strings.Contains(err.Error(), "invoices[0].line_items[0].amount") {
		t.Fatalf("a malformed line: %v, want an error naming invoices[0].line_items[0].amount", err)
	}
	if got, _ := e.lines(t); strings.Join(got, " ") != "11:80.00" {
		t.Fatalf("lines after a refused page %v", got)
	}

	e.f.Delete(schema.Invoices.Name, 1)
	e.clk.Advance(2 * time.Minute)
	if _, err := e.p.Reconcile(t.Context(), "acme", schema.Invoices.Name); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.lines(t); len(got) != 0 {
		t.Errorf("lines of a deleted invoice: %v", got)
	}
}

// TestCompany: the company is one row per source, keyed by the account id,
// versioned by the page's Date; an unchanged company writes nothing, a
// changed one is updated, a malformed answer changes nothing.
func TestCompany(t *testing.T) {
	t.Parallel()
	e := newAccountEnv(t, schema.Company.Name)
	day := clients.DateOf(e.clk.Now())
	co := harvestfake.Doc{ID: 1, Values: harvestfake.Sample(schema.Company, "Acme Agency", "name", day)}
	e.f.PutDoc(schema.Company.Name, co)
	if c := e.pass(t, schema.Company.Name).Counts; c.Inserted != 1 {
		t.Fatalf("first pass %+v", c)
	}
	if c := e.pass(t, schema.Company.Name).Counts; c.Unchanged != 1 {
		t.Errorf("unchanged company: %+v", c)
	}
	co.Values["name"], co.Values["approval_feature"] = "Acme & Co", true
	e.f.PutDoc(schema.Company.Name, co)
	if c := e.pass(t, schema.Company.Name).Counts; c.Updated != 1 {
		t.Errorf("changed company: %+v", c)
	}
	var id, name string
	var approvals bool
	if err := e.pool.QueryRow(context.Background(), `SELECT id, name, approval_feature FROM company WHERE source = 'acme'`).Scan(&id, &name, &approvals); err != nil {
		t.Fatal(err)
	}
	if id != e.f.AccountID() || name != "Acme & Co" || !approvals {
		t.Errorf("company row %s %q %v", id, name, approvals)
	}
	for _, m := range []fakeapi.Malformation{fakeapi.HTMLPage, fakeapi.BadJSON} {
		e.f.MalformResource(schema.Company.Name, m)
		e.clk.Advance(time.Second)
		if _, err := e.p.Incremental(t.Context(), "acme", schema.Company.Name); err == nil || !strings.Contains(err.Error(), "company") {
			t.Errorf("%v: %v, want a decode error naming company", m, err)
		}
	}
}

// Issue 22: the company has no stamp; its version is the page's Date, else
// when the response was received. Behind a proxy that drops Date every
// pass failed for ever.
func TestCompanyWithoutDateHeader(t *testing.T) {
	t.Parallel()
	e := newAccountEnv(t, schema.Company.Name)
	e.f.DropDate(true)
	co := harvestfake.Doc{ID: 1, Values: harvestfake.Sample(schema.Company, "Acme Agency", "name", clients.DateOf(e.clk.Now()))}
	e.f.PutDoc(schema.Company.Name, co)
	if c := e.pass(t, schema.Company.Name).Counts; c.Inserted != 1 {
		t.Fatalf("first pass %+v", c)
	}
	var v time.Time
	if err := e.pool.QueryRow(context.Background(), `SELECT updated_at FROM company WHERE source = 'acme'`).Scan(&v); err != nil || v.IsZero() {
		t.Fatalf("company version %v: %v", v, err)
	}
}

// TestPassCostMatchesRequests holds the planner's model (PassCost) to the
// fake's request log: one request per resource in a pass after the first,
// and under every parent in a reconcile.
func TestPassCostMatchesRequests(t *testing.T) {
	t.Parallel()
	f := newFake(t, harvestfake.Options{NoRateLimit: true})
	seed(f, 3)
	// One parent each, as the planner assumes for invoices and estimates.
	for _, r := range []clients.Resource{schema.Invoices.Name, schema.Estimates.Name} {
		f.Delete(r, f.IDs(r)[0])
	}
	c := newClient(t, f)
	shape := provider.PassShape{Users: 1}
	since := func(clients.Resource) clients.Window { return clients.Window{UpdatedSince: base.Add(time.Hour)} }
	sourcetest.CheckPassCost(t, c, f, harvest.Resources, since,
		func(r clients.Resource) provider.Cost { return harvest.PassCost(r, shape, provider.Settings{}) })
	shape.Reconcile, shape.Days = true, 97
	sourcetest.CheckPassCost(t, c, f, harvest.Resources, sourcetest.ReconcileWindow(clients.DateOf(base), 90),
		func(r clients.Resource) provider.Cost { return harvest.PassCost(r, shape, provider.Settings{}) })
}

// BenchmarkList lists 20,000 time entries in pages of 2,000 from the fake
// over loopback HTTP, without a rate limit: the client side of a backfill
// (request, read, decode) per record. The fake renders in this process, so
// its cost is in the figure too.
func BenchmarkList(b *testing.B) {
	f := harvestfake.New(harvestfake.Options{NoRateLimit: true})
	b.Cleanup(f.Close)
	seed(f, 20_000)
	p := harvest.Params{
		Base: provider.Base{Name: "acme", BaseURL: f.URL(), Token: f.Token(),
			Env: provider.Env{Contact: "ops@example.com", Version: "bench", Logger: zerolog.Nop()}},
		AccountID: f.AccountID(),
	}
	cfg := harvest.HTTPConfig(p)
	cfg.RateLimit = httpx.RateLimit{}
	p.HTTP = httpx.New(cfg)
	c, err := harvest.New(p)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		err := c.List(context.Background(), clients.TimeEntries, clients.Window{}, func(_ context.Context, pg clients.Page) error {
			n += len(pg.Records)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/record")
}

// Harvest stamps to the second, and a payment added in the second of its
// invoice's updated_at leaves that stamp as it was: the listing that read
// the invoice's payments in that second must not vouch for the next one.
// Once the invoice's stamp is older than the listing's clock by the
// overlap, an unchanged invoice is skipped (an idle pass is one request).
func TestNestedChildInTheParentsSecondIsListed(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(base)
	f := newFake(t, harvestfake.Options{NoRateLimit: true, Clock: clk.Now})
	inv, _ := schema.Lookup(clients.Resource("invoices"))
	pay, _ := schema.Lookup(clients.Resource("invoice_payments"))
	doc := func(def *schema.Table, id, parent int64) harvestfake.Doc {
		d := sampleDoc(def, id, conformance.ContentValue(def.Name, "word"), clients.DateOf(base))
		d.Parent, d.UpdatedAt = parent, base
		return d
	}
	f.PutDoc(inv.Name, doc(inv, 1, 0))
	f.PutDoc(pay.Name, doc(pay, 11, 1))
	c := newClient(t, f)
	w := clients.Window{UpdatedSince: base.Add(-time.Minute), Overlap: time.Minute}
	list := func() map[string]clients.Record {
		t.Helper()
		pages, err := sourcetest.Collect(t, c, pay.Name, w)
		if err != nil {
			t.Fatal(err)
		}
		return sourcetest.Records(pages)
	}
	if got := list(); len(got) != 1 {
		t.Fatalf("first listing: %v", got)
	}
	f.PutDoc(pay.Name, doc(pay, 12, 1)) // same second: the invoice keeps its stamp
	if got := list(); got["12"].ID == "" {
		t.Fatalf("the payment added in its invoice's second was not listed: %v", got)
	}
	clk.Advance(2 * time.Minute)
	list()
	n := f.RequestCount()
	list()
	if d := f.RequestCount() - n; d != 1 {
		t.Errorf("a listing with the invoice settled and unchanged made %d requests, want 1", d)
	}
}

// An invoice deleted between the listing of invoices and the listing of
// its payments answers 404 there: it has no payments now, and the others'
// are listed (whichever of the listings under a parent it was).
func TestNestedListingUnderADeletedParentIsEmpty(t *testing.T) {
	t.Parallel()
	inv, pay := schema.Invoices, schema.InvoicePayments
	for gone := int64(1); gone <= 3; gone++ {
		t.Run(fmt.Sprint(gone), func(t *testing.T) {
			t.Parallel()
			f := newFake(t, harvestfake.Options{NoRateLimit: true})
			for id := int64(1); id <= 3; id++ {
				d := sampleDoc(inv, id, conformance.ContentValue(inv.Name, "word"), clients.DateOf(base))
				d.UpdatedAt = base.Add(time.Duration(id) * time.Second)
				f.PutDoc(inv.Name, d)
				p := sampleDoc(pay, 10+id, conformance.ContentValue(pay.Name, "word"), clients.DateOf(base))
				p.Parent, p.UpdatedAt = id, d.UpdatedAt
				f.PutDoc(pay.Name, p)
			}
			f.OnList(func(r fakeapi.Request) {
				if r.Path == fmt.Sprintf("/invoices/%d/payments", gone) {
					f.Delete(inv.Name, gone)
				}
			})
			pages, err := sourcetest.Collect(t, newClient(t, f), pay.Name, clients.Window{})
			if err != nil {
				t.Fatal(err)
			}
			got := sourcetest.IDs(pages)
			slices.Sort(got)
			var want []string
			for id := int64(1); id <= 3; id++ {
				if id != gone {
					want = append(want, fmt.Sprint(10+id))
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("payments %v, want %v", got, want)
			}
		})
	}
	// Every list answering 404 is not deletions but lists asked for in
	// the wrong place: read as empty, a reconcile would tombstone them all.
	f := newFake(t, harvestfake.Options{NoRateLimit: true})
	for id := int64(1); id <= 3; id++ {
		d := sampleDoc(inv, id, conformance.ContentValue(inv.Name, "word"), clients.DateOf(base))
		f.PutDoc(inv.Name, d)
	}
	f.OnList(func(r fakeapi.Request) {
		var id int64
		if _, err := fmt.Sscanf(r.Path, "/invoices/%d/payments", &id); err == nil {
			f.Delete(inv.Name, id)
		}
	})
	if _, err := sourcetest.Collect(t, newClient(t, f), pay.Name, clients.Window{}); err == nil || !strings.Contains(err.Error(), "every list under the 3 invoices asked answered 404") {
		t.Fatalf("every child list answering 404: %v", err)
	}
}

// A running timer's hours grow while its updated_at stands still: the
// mirror follows them pass after pass (the running timers are listed
// again), and once none runs an idle pass is one request again.
func TestRunningTimerHoursFollowed(t *testing.T) {
	t.Parallel()
	e := newAccountEnv(t, clients.TimeEntries)
	now := e.clk.Now().UTC().Truncate(time.Second)
	timer := harvestfake.TimeEntry{ID: 1, SpentDate: clients.DateOf(now), Hours: "0.0", UserID: 20, ProjectID: 30,
		IsRunning: true, TimerStartedAt: now, UpdatedAt: now}
	e.f.PutTimeEntry(timer)
	e.f.PutTimeEntry(harvestfake.TimeEntry{ID: 2, SpentDate: clients.DateOf(now), Hours: "1.0", UserID: 20, ProjectID: 30, UpdatedAt: now})
	hours := func() string {
		t.Helper()
		var h string
		if err := e.pool.QueryRow(t.Context(), `SELECT hours::text FROM time_entries WHERE source = 'acme' AND id = '1'`).Scan(&h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	e.pass(t, clients.TimeEntries)
	for i, want := range []string{"0.50", "1.00"} {
		e.clk.Advance(30*time.Minute - time.Second) // pass adds the second
		// Another entry moves the cursor past the timer's updated_at.
		e.f.PutTimeEntry(harvestfake.TimeEntry{ID: int64(3 + i), SpentDate: clients.DateOf(now), Hours: "1.0", UserID: 20, ProjectID: 30})
		e.pass(t, clients.TimeEntries)
		if got := hours(); got != want {
			t.Fatalf("running timer's hours in the mirror %s, want %s", got, want)
		}
	}
	// Stopped: its stamp moves; the pass after it finds none running.
	timer.IsRunning, timer.Hours, timer.UpdatedAt = false, "1.00", time.Time{}
	e.f.PutTimeEntry(timer)
	e.pass(t, clients.TimeEntries)
	e.clk.Advance(10 * time.Minute)
	e.pass(t, clients.TimeEntries)
	for range 2 {
		e.f.ResetRequests()
		e.pass(t, clients.TimeEntries)
		if n := e.f.RequestCount(); n != 1 {
			t.Errorf("idle pass with no timer running: %d requests, want 1", n)
		}
	}
}

// A client that knows nothing of running timers yet (a restart with a
// cursor) lists them once; with none running, each pass after costs one
// request.
func TestIdleIncrementalIsOneRequestOnceNoTimerRuns(t *testing.T) {
	t.Parallel()
	f := newFake(t, harvestfake.Options{NoRateLimit: true})
	seed(f, 3)
	c := newClient(t, f)
	w := clients.Window{UpdatedSince: base.Add(time.Hour)}
	var got []int
	for range 3 {
		f.ResetRequests()
		if _, err := sourcetest.Collect(t, c, clients.TimeEntries, w); err != nil {
			t.Fatal(err)
		}
		got = append(got, f.RequestCount())
	}
	if !slices.Equal(got, []int{2, 1, 1}) {
		t.Errorf("requests per pass %v, want [2 1 1]", got)
	}
	if q := f.Requests()[0].Query; q.Get("is_running") != "" {
		t.Errorf("idle pass asked %v", q)
	}
}
