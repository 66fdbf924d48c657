package fakeapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
)

var testDialect = fakeapi.Dialect{
	Base:     "/api",
	Fault:    func(status int) string { return `{"fault":` + strconv.Itoa(status) + `}` },
	HTMLPage: "<html>down</html>",
}

// newKit serves a page of two records on /api/items, broken as Malform
// says for page 1.
func newKit(t *testing.T, c fakeapi.Config) *fakeapi.Kit {
	t.Helper()
	var k *fakeapi.Kit
	k = fakeapi.New(testDialect, c, func(w http.ResponseWriter, r *http.Request) {
		k.Listing(r)
		k.WritePage(w, []byte(`[{"id":1},{"id":2}]`), k.Malformed("items", 1))
	})
	t.Cleanup(k.Close)
	return k
}

type answer struct {
	status int
	header http.Header
	body   string
	err    error
}

// client opens a connection per request: a dropped one is not retried.
var client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

func get(k *fakeapi.Kit) answer {
	resp, err := client.Get(k.URL() + "/items")
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b), err}
}

func TestInjectedFaults(t *testing.T) {
	t.Parallel()
	k := newKit(t, fakeapi.Config{RetryAfter: "7"})

	k.FailNext(2, 503)
	for range 2 {
		if a := get(k); a.status != 503 || a.body != `{"fault":503}` {
			t.Fatalf("FailNext: %d %q", a.status, a.body)
		}
	}
	if a := get(k); a.status != 200 {
		t.Fatalf("after FailNext: %d", a.status)
	}
	k.DropNext(1)
	if a := get(k); a.err == nil {
		t.Fatalf("DropNext: answered %d", a.status)
	}
	k.SlowNext(1, 100*time.Millisecond)
	start := time.Now()
	if a := get(k); a.status != 200 || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("SlowNext: %d after %v", a.status, time.Since(start))
	}
	k.RateLimitNext(1, "")
	if a := get(k); a.status != 429 || a.header.Get("Retry-After") != "7" {
		t.Fatalf("RateLimitNext without its own Retry-After: %d %q", a.status, a.header.Get("Retry-After"))
	}
	k.RateLimitNext(1, "3")
	if a := get(k); a.status != 429 || a.header.Get("Retry-After") != "3" {
		t.Fatalf("RateLimitNext: %d %q", a.status, a.header.Get("Retry-After"))
	}
	k.SetFaultRates(1, 0)
	if a := get(k); a.status != 500 {
		t.Fatalf("fault rate 1: %d", a.status)
	}
	k.SetFaultRates(0, 1)
	if a := get(k); a.status != 429 || a.header.Get("Retry-After") != "1" {
		t.Fatalf("rate-limit rate 1: %d %q", a.status, a.header.Get("Retry-After"))
	}
	k.SetFaultRates(0, 0)

	var got []int
	for _, r := range k.Requests() {
		got = append(got, r.Status)
		if r.Path != "/items" || r.At.IsZero() || r.SourceAt.IsZero() {
			t.Errorf("log entry %+v", r)
		}
	}
	if want := []int{503, 503, 200, 0, 200, 429, 429, 500, 429}; fmtInts(got) != fmtInts(want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	k.ResetRequests()
	if k.RequestCount() != 0 {
		t.Fatal("ResetRequests kept the log")
	}
}

func fmtInts(v []int) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestLimits(t *testing.T) {
	t.Parallel()
	t.Run("window", func(t *testing.T) {
		t.Parallel()
		k := newKit(t, fakeapi.Config{Window: httpx.RateLimit{Requests: 2, Per: time.Minute}, WindowRetryAfter: true})
		get(k)
		get(k)
		a := get(k)
		if ra, _ := strconv.Atoi(a.header.Get("Retry-After")); a.status != 429 || ra < 59 || ra > 60 {
			t.Fatalf("3rd request: %d Retry-After %q", a.status, a.header.Get("Retry-After"))
		}
		if a := get(k); a.status != 429 {
			t.Fatalf("a 429 freed a slot: %d", a.status)
		}
	})
	t.Run("window without Retry-After", func(t *testing.T) {
		t.Parallel()
		k := newKit(t, fakeapi.Config{Window: httpx.RateLimit{Requests: 1, Per: time.Minute}})
		get(k)
		if a := get(k); a.status != 429 || a.header.Get("Retry-After") != "" {
			t.Fatalf("2nd request: %d Retry-After %q", a.status, a.header.Get("Retry-After"))
		}
	})
	t.Run("bucket", func(t *testing.T) {
		t.Parallel()
		k := newKit(t, fakeapi.Config{Bucket: httpx.RateLimit{Requests: 2, Per: 200 * time.Millisecond}})
		var codes []int
		for range 3 {
			codes = append(codes, get(k).status)
		}
		time.Sleep(150 * time.Millisecond) // drains one
		codes = append(codes, get(k).status)
		if fmtInts(codes) != "[200,200,429,200]" {
			t.Fatalf("codes %v", codes)
		}
	})
	t.Run("quota", func(t *testing.T) {
		t.Parallel()
		clk := fakeapi.NewClock(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC))
		k := newKit(t, fakeapi.Config{Clock: clk.Now, Quota: 1})
		first, second := get(k), get(k)
		clk.Advance(time.Hour)
		third := get(k)
		if first.status != 200 || second.status != 402 || second.body != `{"fault":402}` || third.status != 200 {
			t.Fatalf("quota: %d %d %q, next window %d", first.status, second.status, second.body, third.status)
		}
	})
}

func TestClockDateAndListingHook(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC))
	k := newKit(t, fakeapi.Config{Clock: clk.Now, Skew: -time.Hour})
	var seen []fakeapi.Request
	k.OnList(func(r fakeapi.Request) { seen = append(seen, r) })
	a := get(k)
	if d, _ := http.ParseTime(a.header.Get("Date")); !d.Equal(clk.Now().Add(-time.Hour)) {
		t.Fatalf("Date %q, want the skewed source clock", a.header.Get("Date"))
	}
	if len(seen) != 1 || seen[0].Seq != 1 || seen[0].Path != "/items" || !seen[0].SourceAt.Equal(k.Now()) {
		t.Fatalf("hook saw %+v", seen)
	}
}

func TestMalformedPages(t *testing.T) {
	t.Parallel()
	k := newKit(t, fakeapi.Config{})
	for _, tc := range []struct {
		m     fakeapi.Malformation
		ctype string
		body  string // all of it: Content-Length says as much
	}{
		{0, "application/json; charset=utf-8", `[{"id":1},{"id":2}]`},
		{fakeapi.BadJSON, "application/json; charset=utf-8", `[,{"id":1},{"id":2}]`},
		{fakeapi.CutShort, "application/json; charset=utf-8", `[{"id":1}`},
		{fakeapi.HTMLPage, "text/html; charset=utf-8", "<html>down</html>"},
		{fakeapi.MissingVersion, "application/json; charset=utf-8", `[{"id":1},{"id":2}]`}, // the dialect's to render
	} {
		k.Malform("items", 1, tc.m)
		a := get(k)
		if a.status != 200 || a.body != tc.body || a.header.Get("Content-Type") != tc.ctype || a.err != nil {
			t.Errorf("%d: %d %q %q %v", tc.m, a.status, a.body, a.header.Get("Content-Type"), a.err)
		}
	}
	k.Malform("items", 1, 0)
	if k.Malformed("items", 1) != 0 {
		t.Fatal("Malform(…, 0) did not heal")
	}
}

func TestLateKeepsTheOrderOfARecordsWrites(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC))
	got := map[string]string{}
	l := fakeapi.Late[string, string]{
		Delays: fakeapi.Delays{Delay: time.Minute, Every: 2},
		Now:    clk.Now,
		Apply:  func(k, v string) { got[k] = v },
	}
	l.Lock()
	l.Write("a", clk.Now(), "a0") // 1st write: visible at once (Every 2)
	l.Write("a", clk.Now(), "a1") // 2nd: late
	l.Write("a", clk.Now(), "a2") // 3rd: quick, but after a1
	l.Write("b", clk.Now(), "b1") // 4th: late
	l.Write("c", clk.Now(), "c1") // 5th: quick
	v, ok := l.Last("a")
	l.Unlock()
	if got["a"] != "a0" || got["b"] != "" || got["c"] != "c1" || l.Pending() != 3 {
		t.Fatalf("before the delay: %v, %d waiting", got, l.Pending())
	}
	if !ok || v != "a2" {
		t.Fatalf("Last(a) = %q %v", v, ok)
	}
	clk.Advance(time.Minute)
	if l.Pending() != 0 || got["a"] != "a2" || got["b"] != "b1" {
		t.Fatalf("after the delay: %v, %d waiting", got, l.Pending())
	}
}
