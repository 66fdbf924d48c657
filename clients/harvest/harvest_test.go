package harvest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/harvest"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/internal/sourcetest"
	"github.com/tidemarkhq/tidemark/internal/conformance"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
	"github.com/tidemarkhq/tidemark/internal/fakeapi/harvestfake"
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
		Name: "acme", BaseURL: f.URL(), AccountID: f.AccountID(), Token: f.Token(),
		Contact: "ops@example.com", Version: "test", PerPage: 10,
		RateLimit: httpx.RateLimit{Requests: 1000, Per: time.Second},
		Logger:    zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel),
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
	for _, tc := range []struct {
		m     fakeapi.Malformation
		field string
		what  string
	}{
		{fakeapi.BadJSON, "field (page)", "not JSON"},
		{fakeapi.HTMLPage, "field (page)", "body: <!DOCTYPE html>"},
		{fakeapi.MissingVersion, "field time_entries[0].updated_at", "missing"},
		{fakeapi.WrongType, "field time_entries[0].updated_at", "want string, got number"},
	} {
		t.Run(strconv.Itoa(int(tc.m)), func(t *testing.T) {
			t.Parallel()
			f := newFake(t, harvestfake.Options{})
			seed(f, 25)
			f.Malform("time_entries", 2, tc.m)
			c := newClient(t, f)
			pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{})
			if !errors.Is(err, httpx.ErrDecode) {
				t.Fatalf("err = %v", err)
			}
			if len(pages) != 1 {
				t.Errorf("fn got %d pages before the bad one, want 1", len(pages))
			}
			for _, want := range []string{"decode acme time_entries page 2", tc.field, tc.what} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if f.RequestCount() != 2 {
				t.Errorf("requests = %d, want 2 (a decode error is not retried)", f.RequestCount())
			}
		})
	}
}

func TestRetriesAgainstFake(t *testing.T) {
	t.Parallel()
	t.Run("5xx then success", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, harvestfake.Options{})
		seed(f, 5)
		f.FailNext(2, 503)
		if _, err := sourcetest.Collect(t, newClient(t, f), clients.TimeEntries, clients.Window{}); err != nil {
			t.Fatal(err)
		}
		if f.RequestCount() != 3 {
			t.Fatalf("requests = %d, want 3", f.RequestCount())
		}
	})
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
	t.Run("slow response times out and is retried", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, harvestfake.Options{})
		seed(f, 5)
		f.SlowNext(1, 5*time.Second)
		c := newClient(t, f, func(_ *harvest.Params, c *httpx.Config) { c.Timeout = 100 * time.Millisecond })
		if _, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{}); err != nil {
			t.Fatal(err)
		}
		if f.RequestCount() != 2 {
			t.Fatalf("requests = %d, want 2", f.RequestCount())
		}
	})
	t.Run("429 honoured without spending retries", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, harvestfake.Options{})
		seed(f, 25)
		f.RateLimitNext(1, "1")
		c := newClient(t, f, func(_ *harvest.Params, c *httpx.Config) { c.MaxAttempts = 1 })
		start := time.Now()
		pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{})
		if err != nil || len(pages) != 3 || f.RequestCount() != 4 || time.Since(start) < time.Second {
			t.Fatalf("err = %v pages %d requests %d in %v", err, len(pages), f.RequestCount(), time.Since(start))
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

func TestNextLinkToAnotherHostIsRejected(t *testing.T) {
	t.Parallel()
	var evil atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { evil.Add(1) }))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"users":[],"links":{"next":%q}}`, other.URL+"/v2/users?page=2")
	}))
	defer srv.Close()
	c, err := harvest.New(harvest.Params{Name: "acme", BaseURL: srv.URL + "/v2", AccountID: "1", Token: "secret-token", Contact: "x"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sourcetest.Collect(t, c, clients.Users, clients.Window{})
	if !errors.Is(err, httpx.ErrDecode) || !strings.Contains(err.Error(), "links.next") || evil.Load() != 0 {
		t.Fatalf("err = %v, other host hit %d times", err, evil.Load())
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
	c, err := harvest.New(harvest.Params{Name: "acme", BaseURL: srv.URL, AccountID: "1", Token: "t0ken", Contact: "x"})
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
	ok := harvest.Params{Name: "acme", AccountID: "1", Token: "t", Contact: "c"}
	for _, tc := range []struct {
		mod  func(*harvest.Params)
		want string
	}{
		{func(p *harvest.Params) { p.Name = "" }, "name"},
		{func(p *harvest.Params) { p.AccountID = "" }, "account_id"},
		{func(p *harvest.Params) { p.Token = "" }, "token"},
		{func(p *harvest.Params) { p.Contact = "" }, "contact"},
		{func(p *harvest.Params) { p.PerPage = 2001 }, "per_page"},
		{func(p *harvest.Params) { p.BaseURL = "ftp://x" }, "base_url"},
		{func(p *harvest.Params) { p.Resources = []clients.Resource{"invoice"} }, "resources"},
	} {
		p := ok
		tc.mod(&p)
		if _, err := harvest.New(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want error naming %s, got %v", tc.want, err)
		}
	}
	if _, err := harvest.New(ok); err != nil {
		t.Fatal(err)
	}
}

func TestStopsAtFnError(t *testing.T) {
	t.Parallel()
	f := newFake(t, harvestfake.Options{})
	seed(f, 25)
	boom := errors.New("boom")
	calls := 0
	err := newClient(t, f).List(t.Context(), clients.TimeEntries, clients.Window{}, func(context.Context, clients.Page) error {
		calls++
		return boom
	})
	// The page read ahead may have been requested, never more.
	if !errors.Is(err, boom) || calls != 1 || f.RequestCount() > 2 {
		t.Fatalf("err = %v after %d calls and %d requests", err, calls, f.RequestCount())
	}
}
