package harvestfake_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/internal/fakeapi/harvestfake"
)

var base = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

func newFake(t *testing.T, o harvestfake.Options) *harvestfake.Server {
	t.Helper()
	f := harvestfake.New(o)
	t.Cleanup(f.Close)
	for i := int64(1); i <= 5; i++ {
		f.PutTimeEntry(harvestfake.TimeEntry{ID: i, SpentDate: clients.DateOf(base).AddDays(-int(i % 3)), Hours: "1.0",
			UserID: 1, ProjectID: 1, UpdatedAt: base.Add(time.Duration(i) * time.Second)})
	}
	return f
}

type envelope struct {
	TimeEntries []struct {
		ID int64 `json:"id"`
	} `json:"time_entries"`
	PerPage      int  `json:"per_page"`
	TotalPages   int  `json:"total_pages"`
	TotalEntries int  `json:"total_entries"`
	NextPage     *int `json:"next_page"`
	PreviousPage *int `json:"previous_page"`
	Page         *int `json:"page"`
	Links        struct {
		First, Next, Previous, Last *string
	} `json:"links"`
}

func get(t *testing.T, f *harvestfake.Server, path string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, f.URL()+path, nil)
	req.Header.Set("Authorization", "Bearer "+f.Token())
	req.Header.Set("Harvest-Account-Id", f.AccountID())
	req.Header.Set("User-Agent", "test (t@example.com)")
	for k, v := range hdr {
		if v == "" {
			req.Header[k] = []string{""} // sent as absent
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func ids(t *testing.T, body []byte) (envelope, []int64) {
	t.Helper()
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	var out []int64
	for _, e := range env.TimeEntries {
		out = append(out, e.ID)
	}
	return env, out
}

func TestEnvelopeOrderAndPageNumbers(t *testing.T) {
	t.Parallel()
	f := newFake(t, harvestfake.Options{})
	resp, body := get(t, f, "/time_entries?per_page=2&page=2", nil)
	env, got := ids(t, body)
	// spent_date desc (i%3: 0 → base, 1, 2 days back), then id desc.
	// Order: 3 (day 0), 4 1 (day -1), 5 2 (day -2).
	if resp.StatusCode != 200 || len(got) != 2 || got[0] != 1 || got[1] != 5 {
		t.Fatalf("status %d ids %v", resp.StatusCode, got)
	}
	if env.PerPage != 2 || env.TotalPages != 3 || env.TotalEntries != 5 || *env.Page != 2 || *env.NextPage != 3 || *env.PreviousPage != 1 {
		t.Fatalf("envelope %+v", env)
	}
	if env.Links.Next == nil || env.Links.First == nil || env.Links.Last == nil || env.Links.Previous == nil {
		t.Fatalf("links %+v", env.Links)
	}
	if d, err := http.ParseTime(resp.Header.Get("Date")); err != nil || time.Since(d) > time.Minute {
		t.Fatalf("Date header %q", resp.Header.Get("Date"))
	}
}

func TestCursorPagination(t *testing.T) {
	t.Parallel()
	f := newFake(t, harvestfake.Options{Cursor: true})
	_, body := get(t, f, "/time_entries?per_page=2", nil)
	env, got := ids(t, body)
	if env.Page != nil || env.NextPage != nil || env.Links.Next == nil || len(got) != 2 {
		t.Fatalf("envelope %+v ids %v", env, got)
	}
	all := got
	for env.Links.Next != nil {
		resp, err := http.NewRequest(http.MethodGet, *env.Links.Next, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, body = get(t, f, resp.URL.Path[len("/v2"):]+"?"+resp.URL.RawQuery, nil)
		env, got = ids(t, body)
		all = append(all, got...)
	}
	if want := []int64{3, 4, 1, 5, 2}; len(all) != 5 || all[0] != want[0] || all[4] != want[4] {
		t.Fatalf("ids %v, want %v", all, want)
	}
}

func TestUpdatedSinceInclusiveOrExclusive(t *testing.T) {
	t.Parallel()
	since := base.Add(3 * time.Second).Format(time.RFC3339)
	for _, tc := range []struct {
		excl bool
		want int
	}{{false, 3}, {true, 2}} {
		f := newFake(t, harvestfake.Options{UpdatedSinceExclusive: tc.excl})
		_, body := get(t, f, "/time_entries?updated_since="+since, nil)
		if _, got := ids(t, body); len(got) != tc.want {
			t.Errorf("exclusive=%v: %d entries, want %d", tc.excl, len(got), tc.want)
		}
	}
}

func TestFromTo(t *testing.T) {
	t.Parallel()
	f := newFake(t, harvestfake.Options{})
	d := clients.DateOf(base).AddDays(-1).String()
	_, body := get(t, f, "/time_entries?from="+d+"&to="+d, nil)
	if _, got := ids(t, body); len(got) != 2 || got[0] != 4 || got[1] != 1 {
		t.Fatalf("ids %v", got)
	}
}

func TestRequestValidation(t *testing.T) {
	t.Parallel()
	f := newFake(t, harvestfake.Options{})
	for _, tc := range []struct {
		path   string
		hdr    map[string]string
		status int
	}{
		{"/time_entries?per_page=2001", nil, 422},
		{"/time_entries?per_page=0", nil, 422},
		{"/time_entries?updated_since=yesterday", nil, 422},
		{"/time_entries?from=03/01/2026", nil, 422},
		{"/time_entries", map[string]string{"User-Agent": ""}, 400},
		{"/time_entries", map[string]string{"Authorization": "Bearer nope"}, 401},
		{"/time_entries", map[string]string{"Harvest-Account-Id": "1"}, 401},
		{"/invoice", nil, 404},
		{"/time_entries?per_page=2000", nil, 200},
	} {
		resp, body := get(t, f, tc.path, tc.hdr)
		if resp.StatusCode != tc.status {
			t.Errorf("%s %v: %d, want %d (%s)", tc.path, tc.hdr, resp.StatusCode, tc.status, body)
		}
		if !json.Valid(body) {
			t.Errorf("%s: body not JSON: %s", tc.path, body)
		}
	}
}

func TestRateLimitSlidingWindow(t *testing.T) {
	t.Parallel()
	f := newFake(t, harvestfake.Options{RateLimit: httpx.RateLimit{Requests: 3, Per: 2 * time.Second}})
	for i := range 3 {
		if resp, _ := get(t, f, "/users", nil); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
	}
	resp, _ := get(t, f, "/users", nil)
	if ra, _ := strconv.Atoi(resp.Header.Get("Retry-After")); resp.StatusCode != 429 || ra < 1 || ra > 2 {
		t.Fatalf("4th request: %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if f.RequestCount() != 4 || f.Requests()[3].Status != 429 {
		t.Fatalf("log %+v", f.Requests())
	}
}

func TestSkewedDateAndDeletes(t *testing.T) {
	t.Parallel()
	f := newFake(t, harvestfake.Options{Skew: 90 * time.Minute})
	resp, _ := get(t, f, "/time_entries", nil)
	d, _ := http.ParseTime(resp.Header.Get("Date"))
	if off := time.Until(d); off < 89*time.Minute || off > 91*time.Minute {
		t.Fatalf("Date offset %v", off)
	}
	if !f.Delete(clients.TimeEntries, 3) || f.Delete(clients.TimeEntries, 3) {
		t.Fatal("Delete result")
	}
	_, body := get(t, f, "/time_entries", nil)
	if _, got := ids(t, body); len(got) != 4 {
		t.Fatalf("ids after delete %v", got)
	}
	if _, ok := f.State().Deleted[clients.TimeEntries][3]; !ok {
		t.Fatal("deletion not in State")
	}
}

func TestVisibilityDelay(t *testing.T) {
	t.Parallel()
	f := newFake(t, harvestfake.Options{VisibilityDelay: time.Second})
	f.PutTimeEntry(harvestfake.TimeEntry{ID: 99, SpentDate: clients.DateOf(base), Hours: "2.0", UserID: 1, ProjectID: 1})
	if _, ok := f.TimeEntry(99); !ok {
		t.Fatal("latest state not readable")
	}
	if f.Count(clients.TimeEntries) != 5 {
		t.Fatal("write visible before its delay")
	}
	time.Sleep(1100 * time.Millisecond) // stamp (whole seconds) + 1 s
	if f.Count(clients.TimeEntries) != 6 {
		t.Fatal("write not visible after its delay")
	}
}

// A running timer's hours grow with the source's clock; its updated_at
// does not move.
func TestRunningTimerHoursGrow(t *testing.T) {
	t.Parallel()
	clk := base
	f := newFake(t, harvestfake.Options{Clock: func() time.Time { return clk }})
	f.PutTimeEntry(harvestfake.TimeEntry{ID: 9, SpentDate: clients.DateOf(base), Hours: "0.5", UserID: 1, ProjectID: 1,
		IsRunning: true, TimerStartedAt: base, UpdatedAt: base})
	read := func() (hours float64, updated string) {
		_, body := get(t, f, "/time_entries?is_running=true", nil)
		var env struct {
			TimeEntries []struct {
				Hours     float64 `json:"hours"`
				UpdatedAt string  `json:"updated_at"`
			} `json:"time_entries"`
		}
		if err := json.Unmarshal(body, &env); err != nil || len(env.TimeEntries) != 1 {
			t.Fatalf("running entries: %s (%v)", body, err)
		}
		return env.TimeEntries[0].Hours, env.TimeEntries[0].UpdatedAt
	}
	h1, u1 := read()
	clk = clk.Add(90 * time.Minute)
	h2, u2 := read()
	if h1 != 0.5 || h2 != 2 || u1 != u2 {
		t.Errorf("hours %v then %v, updated_at %s then %s; want 0.5 then 2 and the same stamp", h1, h2, u1, u2)
	}
	if e := f.State().TimeEntries[9]; e.Hours != "2.00" {
		t.Errorf("State hours %s, want 2.00", e.Hours)
	}
}

// A fake with a per_page cap serves that many a page, and says so.
func TestPerPageCap(t *testing.T) {
	t.Parallel()
	f := newFake(t, harvestfake.Options{PerPageCap: 2})
	_, body := get(t, f, "/time_entries?per_page=10", nil)
	env, got := ids(t, body)
	if len(got) != 2 || env.PerPage != 2 || env.TotalPages != 3 || env.Links.Next == nil || !strings.Contains(*env.Links.Next, "per_page=2") {
		t.Errorf("ids %v, per_page %d, total_pages %d, next %v", got, env.PerPage, env.TotalPages, env.Links.Next)
	}
}
