package httpx_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/internal/slowdown"
)

const token = "hv-secret-token-0123456789"

// server counts requests and answers with handler(n) where n counts from 1.
type server struct {
	*httptest.Server
	n atomic.Int64
}

func newServer(t *testing.T, h func(n int64, w http.ResponseWriter, r *http.Request)) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h(s.n.Add(1), w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func fastConfig(logs *bytes.Buffer) httpx.Config {
	cfg := httpx.Config{
		Source:      "acme",
		Version:     "1.2.3",
		Contact:     "ops@example.com",
		BackoffBase: time.Millisecond,
		BackoffMax:  5 * time.Millisecond,
		Timeout:     2 * time.Second,
		Headers:     http.Header{"Authorization": {"Bearer " + token}},
	}
	if logs != nil {
		cfg.Logger = zerolog.New(logs).Level(zerolog.DebugLevel)
	}
	return cfg
}

func get(t *testing.T, c *httpx.Client, url string) (*httpx.Response, error) {
	t.Helper()
	return c.Do(t.Context(), httpx.Request{URL: url, Resource: "time_entries", Page: 3})
}

// failNth answers the nth request with status and every other with {}.
func failNth(nth int64, status int) func(int64, http.ResponseWriter, *http.Request) {
	return func(n int64, w http.ResponseWriter, _ *http.Request) {
		if n == nth {
			w.WriteHeader(status)
			return
		}
		w.Write([]byte(`{}`))
	}
}

// getOK does a GET through c that must succeed after exactly requests
// requests to s.
func (s *server) getOK(t *testing.T, c *httpx.Client, requests int64) {
	t.Helper()
	if _, err := get(t, c, s.URL); err != nil {
		t.Fatalf("err = %v after %d requests", err, s.n.Load())
	}
	if n := s.n.Load(); n != requests {
		t.Fatalf("requests = %d, want %d", n, requests)
	}
}

// getErr does a GET through c that must fail with target after exactly
// requests requests to s.
func (s *server) getErr(t *testing.T, c *httpx.Client, target error, requests int64) {
	t.Helper()
	if _, err := get(t, c, s.URL); !errors.Is(err, target) || s.n.Load() != requests {
		t.Fatalf("err = %v after %d requests; want %v after %d", err, s.n.Load(), target, requests)
	}
}

func TestRetriesAlways500MakesExactlyMaxAttempts(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	})
	cfg := fastConfig(nil)
	cfg.MaxAttempts = 4 // 3 retries
	_, err := get(t, httpx.New(cfg), s.URL+"/v2/time_entries")
	if got := s.n.Load(); got != 4 {
		t.Fatalf("requests = %d, want 4", got)
	}
	var he *httpx.Error
	if !errors.As(err, &he) || he.Kind != httpx.KindStatus || he.Status != 500 || he.Attempts != 4 {
		t.Fatalf("err = %#v", err)
	}
	if !errors.Is(err, httpx.ErrStatus) || errors.Is(err, httpx.ErrUnauthorized) {
		t.Fatalf("errors.Is mismatch for %v", err)
	}
	for _, want := range []string{"acme", "time_entries", "page 3", "HTTP 500", "after 4 attempts", "body: boom"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if !he.Temporary() {
		t.Error("5xx should be temporary")
	}
}

func TestRetryThenSuccess(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
		if n <= 2 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.Header().Set("Date", "Tue, 03 Mar 2026 10:00:00 GMT")
		w.Write([]byte(`{"ok":true}`))
	})
	var waits []string
	cfg := fastConfig(nil)
	cfg.OnWait = func(reason string, _ time.Duration) { waits = append(waits, reason) }
	resp, err := get(t, httpx.New(cfg), s.URL)
	if err != nil {
		t.Fatal(err)
	}
	if s.n.Load() != 3 || string(resp.Body) != `{"ok":true}` || resp.Status != 200 {
		t.Fatalf("n=%d resp=%+v", s.n.Load(), resp)
	}
	if want := time.Date(2026, 3, 3, 10, 0, 0, 0, time.UTC); !resp.Date.Equal(want) {
		t.Errorf("Date = %v, want %v", resp.Date, want)
	}
	if resp.ReceivedAt.IsZero() {
		t.Error("ReceivedAt not set")
	}
	if strings.Join(waits, ",") != "backoff,backoff" {
		t.Errorf("waits = %v", waits)
	}
}

func TestDateHeaderAbsentIsZero(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		w.Header()["Date"] = nil // suppress the server's automatic Date
		w.Write([]byte(`{}`))
	})
	resp, err := get(t, httpx.New(fastConfig(nil)), s.URL)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Date.IsZero() {
		t.Fatalf("Date = %v, want zero", resp.Date)
	}
}

// A 429's Retry-After, in seconds or as an HTTP date, is waited out
// without spending the failure budget. A date is measured against the
// source's Date header, not our clock: here the source is an hour ahead.
func Test429RetryAfterIsWaitedWithoutSpendingFailureBudget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		header func(http.Header)
	}{
		{"seconds", func(h http.Header) { h.Set("Retry-After", "1") }},
		{"HTTP date against a skewed Date", func(h http.Header) {
			src := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
			h.Set("Date", src.Format(http.TimeFormat))
			h.Set("Retry-After", src.Add(time.Second).Format(http.TimeFormat))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var first time.Time
			var second time.Duration
			s := newServer(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
				if n == 1 {
					first = time.Now()
					tc.header(w.Header())
					w.WriteHeader(http.StatusTooManyRequests)
					return
				}
				second = time.Since(first)
				w.Write([]byte(`{}`))
			})
			cfg := fastConfig(nil)
			cfg.MaxAttempts = 1 // no failure retries at all: the 429 must not count
			var reasons []string
			cfg.OnWait = func(r string, d time.Duration) { reasons = append(reasons, r+":"+d.String()) }
			s.getOK(t, httpx.New(cfg), 2)
			// At least the second asked for; how much later is the
			// machine's (OnWait below says the wait was 1s).
			if second < time.Second {
				t.Fatalf("second request after %v, want at least 1s", second)
			}
			if len(reasons) == 0 || reasons[0] != "retry_after:1s" {
				t.Fatalf("OnWait = %v", reasons)
			}
		})
	}
}

func Test429WithoutRetryAfterUsesDefault(t *testing.T) {
	t.Parallel()
	s := newServer(t, failNth(1, http.StatusTooManyRequests))
	cfg := fastConfig(nil)
	cfg.DefaultRetryAfter = 150 * time.Millisecond
	var got time.Duration
	cfg.OnWait = func(r string, d time.Duration) {
		if r == "retry_after" {
			got = d
		}
	}
	if _, err := get(t, httpx.New(cfg), s.URL); err != nil {
		t.Fatal(err)
	}
	if s.n.Load() != 2 || got != 150*time.Millisecond {
		t.Fatalf("requests = %d, wait %v", s.n.Load(), got)
	}
}

func Test429PausesConcurrentCallers(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var arrivals []time.Time
	var limitedAt time.Time
	s := newServer(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		mu.Unlock()
		if n == 3 {
			mu.Lock()
			limitedAt = time.Now()
			mu.Unlock()
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Write([]byte(`{}`))
	})
	cfg := fastConfig(nil)
	cfg.RateLimit = httpx.RateLimit{Requests: 50, Per: time.Second}
	c := httpx.New(cfg)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 3 {
				if _, err := get(t, c, s.URL); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(arrivals) != 13 {
		t.Fatalf("requests = %d, want 13 (12 + one 429)", len(arrivals))
	}
	// Each of the three other callers may have had one request past the
	// limiter when the 429 came back: those may land during the pause (on
	// a busy machine, late in it); nothing else may. Counted, not timed:
	// without the pause the other nine requests land in it.
	var during []time.Duration
	for _, a := range arrivals {
		if d := a.Sub(limitedAt); d > 0 && d < 950*time.Millisecond {
			during = append(during, d)
		}
	}
	if len(during) > 3 {
		t.Errorf("%d requests landed during the pause, at %v after the 429; at most 3 were already sent", len(during), during)
	}
}

func Test402WaitsForQuota(t *testing.T) {
	t.Parallel()
	s := newServer(t, failNth(1, http.StatusPaymentRequired))
	cfg := fastConfig(nil)
	cfg.MaxAttempts = 1
	cfg.QuotaWait = func(*http.Response) time.Duration { return 100 * time.Millisecond }
	var reason string
	cfg.OnWait = func(r string, _ time.Duration) { reason = r }
	start := time.Now()
	if _, err := get(t, httpx.New(cfg), s.URL); err != nil {
		t.Fatal(err)
	}
	if s.n.Load() != 2 || reason != "quota" || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("requests = %d reason %q", s.n.Load(), reason)
	}
}

// A 402 the NotQuota hook says is not a spent quota fails the call at once
// with the hook's error: no wait, no pause. The hook is told of the waits
// the call has had and sees which call it was.
func Test402NotQuotaFailsAtOnce(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusPaymentRequired) })
	cfg := fastConfig(nil)
	cfg.QuotaWait = func(*http.Response) time.Duration { return 50 * time.Millisecond }
	gated := errors.New("plan lacks it")
	var seen []string
	cfg.NotQuota = func(resp *http.Response, waits int) error {
		seen = append(seen, fmt.Sprintf("%s %d", resp.Request.URL.Path, waits))
		if waits > 0 {
			return gated
		}
		return nil
	}
	var quota int
	cfg.OnWait = func(r string, _ time.Duration) {
		if r == "quota" {
			quota++
		}
	}
	_, err := get(t, httpx.New(cfg), s.URL+"/x?page=1")
	var he *httpx.Error
	if !errors.Is(err, gated) || !errors.As(err, &he) || he.Kind != httpx.KindStatus || he.Status != http.StatusPaymentRequired {
		t.Fatalf("err = %v", err)
	}
	if s.n.Load() != 2 || quota != 1 || fmt.Sprint(seen) != "[/x 0 /x 1]" {
		t.Errorf("%d requests, %d quota waits, hook saw %v", s.n.Load(), quota, seen)
	}
}

func TestUntilNextHour(t *testing.T) {
	t.Parallel()
	h := http.Header{"Date": {"Tue, 03 Mar 2026 10:45:00 GMT"}}
	if got := httpx.UntilNextHour(h); got != 15*time.Minute {
		t.Fatalf("UntilNextHour = %v", got)
	}
}

func TestDroppedConnectionIsRetried(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				panic(err)
			}
			conn.Close()
			return
		}
		w.Write([]byte(`{}`))
	})
	s.getOK(t, httpx.New(fastConfig(nil)), 2)
}

// Each retry budget, spent, ends the call with its own error after
// exactly the requests it allows.
func TestBudgetsEndTheCall(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		handler   http.HandlerFunc
		configure func(*httpx.Config)
		want      error
		requests  int64
	}{
		{"rate limit waits", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
		}, func(c *httpx.Config) { c.MaxRateLimitWaits = 3 }, httpx.ErrRateLimited, 4},
		{"dropped connections", func(w http.ResponseWriter, _ *http.Request) {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		}, func(c *httpx.Config) { c.MaxAttempts = 3 }, httpx.ErrTransport, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) { tc.handler(w, r) })
			cfg := fastConfig(nil)
			tc.configure(&cfg)
			s.getErr(t, httpx.New(cfg), tc.want, tc.requests)
		})
	}
}

func TestPerRequestTimeoutIsRetried(t *testing.T) {
	t.Parallel()
	// The first request hangs until the client gives up on it: what is
	// checked is that the client did (the server saw it go), not how fast.
	gaveUp := make(chan struct{})
	s := newServer(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			select {
			case <-r.Context().Done():
				close(gaveUp)
			case <-time.After(time.Minute):
			}
			return
		}
		w.Write([]byte(`{}`))
	})
	cfg := fastConfig(nil)
	cfg.Timeout = 100 * time.Millisecond
	if _, err := get(t, httpx.New(cfg), s.URL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-gaveUp:
	default:
		t.Fatal("the first request was answered by another, not given up on")
	}
	if s.n.Load() != 2 {
		t.Fatalf("requests = %d, want 2", s.n.Load())
	}
}

func TestMaxRetryTimeBoundsFailures(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	cfg := fastConfig(nil)
	cfg.MaxAttempts = 100
	cfg.BackoffBase = 50 * time.Millisecond
	cfg.BackoffMax = 50 * time.Millisecond
	cfg.MaxRetryTime = 200 * time.Millisecond
	// Bounded by the retry time, not by MaxAttempts: well under 100
	// attempts, whatever the machine's speed (a slow one makes fewer).
	_, err := get(t, httpx.New(cfg), s.URL)
	if !errors.Is(err, httpx.ErrStatus) || s.n.Load() >= 100 {
		t.Fatalf("err = %v after %d requests", err, s.n.Load())
	}
}

func TestContextCancelReturnsPromptly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		h    func(w http.ResponseWriter, r *http.Request)
	}{
		{"during 429 wait", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "60")
			w.WriteHeader(http.StatusTooManyRequests)
		}},
		{"during slow response", func(_ http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		}},
		{"during backoff", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) { tc.h(w, r) })
			cfg := fastConfig(nil)
			cfg.Timeout = 30 * time.Second
			cfg.BackoffBase, cfg.BackoffMax = time.Minute, time.Minute
			cfg.MaxAttempts = 10
			ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := httpx.New(cfg).Do(ctx, httpx.Request{URL: s.URL})
			if el := time.Since(start); el > time.Second {
				t.Fatalf("returned after %v", el)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want context deadline", err)
			}
		})
	}
}

func TestUnauthorizedAndNotFoundNotRetried(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		want   error
	}{
		{401, httpx.ErrUnauthorized},
		{403, httpx.ErrUnauthorized},
		{404, httpx.ErrNotFound},
		{422, httpx.ErrStatus},
	} {
		s := newServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(tc.status)
		})
		_, err := get(t, httpx.New(fastConfig(nil)), s.URL)
		if !errors.Is(err, tc.want) || s.n.Load() != 1 {
			t.Errorf("status %d: err = %v after %d requests", tc.status, err, s.n.Load())
		}
		var he *httpx.Error
		if errors.As(err, &he) && he.Temporary() {
			t.Errorf("status %d reported temporary", tc.status)
		}
	}
}

func TestRedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	var other atomic.Int64
	evil := newServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) { other.Add(1) })
	s := newServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, evil.URL, http.StatusFound)
	})
	_, err := get(t, httpx.New(fastConfig(nil)), s.URL)
	if !errors.Is(err, httpx.ErrStatus) || other.Load() != 0 {
		t.Fatalf("err = %v, other host got %d", err, other.Load())
	}
}

func TestHeadersAndUserAgent(t *testing.T) {
	t.Parallel()
	var got http.Header
	s := newServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Write([]byte(`{}`))
	})
	cfg := fastConfig(nil)
	cfg.PlainHeaders = http.Header{"Harvest-Account-Id": {"42"}}
	if _, err := get(t, httpx.New(cfg), s.URL); err != nil {
		t.Fatal(err)
	}
	if ua := got.Get("User-Agent"); ua != "tidemark/1.2.3 (ops@example.com)" {
		t.Errorf("User-Agent = %q", ua)
	}
	if got.Get("Authorization") != "Bearer "+token || got.Get("Harvest-Account-Id") != "42" {
		t.Errorf("headers = %v", got)
	}
}

// The token never appears in an error or a log line, whatever the server
// echoes back and whatever the failure path.
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(token+":api_token"))
	echo := func(status int) func(int64, http.ResponseWriter, *http.Request) {
		return func(_ int64, w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			// Long prefix so that the token straddles the snippet's cut.
			w.Write([]byte(strings.Repeat("x", 190) + " got " + r.Header.Get("Authorization")))
		}
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, tc := range []struct {
		name, auth string
		url        func(t *testing.T) string
	}{
		{"500 echo", "Bearer " + token, func(t *testing.T) string { return newServer(t, echo(500)).URL }},
		{"401 echo", "Bearer " + token, func(t *testing.T) string { return newServer(t, echo(401)).URL }},
		{"basic 403 echo", basic, func(t *testing.T) string { return newServer(t, echo(403)).URL }},
		{"connection refused", "Bearer " + token, func(*testing.T) string { return closed.URL + "/v2/x" }},
		{"bad url", "Bearer " + token, func(*testing.T) string { return "http://[::1" + token }},
		{"token in url", "Bearer " + token, func(*testing.T) string { return closed.URL + "/v2/x?t=" + token }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			cfg := fastConfig(&logs)
			cfg.MaxAttempts = 2
			cfg.Headers = http.Header{"Authorization": {tc.auth}}
			_, err := get(t, httpx.New(cfg), tc.url(t))
			if err == nil {
				t.Fatal("want error")
			}
			for _, where := range []string{err.Error(), logs.String()} {
				if strings.Contains(where, token) || strings.Contains(where, token[:12]) {
					t.Errorf("secret leaked: %s", where)
				}
			}
			var he *httpx.Error
			if errors.As(err, &he) && len(he.Body) > httpx.SnippetLen+len("…") {
				t.Errorf("snippet %d bytes", len(he.Body))
			}
		})
	}
}

func TestDecodeErrorFormat(t *testing.T) {
	t.Parallel()
	err := httpx.DecodeError("acme", "time_entries", 2, "time_entries[4].updated_at", "missing", []byte("{\"id\":1,\n\"x\":2}"))
	want := `decode acme time_entries page 2: field time_entries[4].updated_at: missing; body: {"id":1, "x":2}`
	if err.Error() != want {
		t.Fatalf("got  %s\nwant %s", err, want)
	}
	if !errors.Is(err, httpx.ErrDecode) {
		t.Fatal("not ErrDecode")
	}
	c := httpx.New(fastConfig(nil))
	e2 := c.DecodeError("users", 1, "x", "bad", []byte("token="+token))
	if strings.Contains(e2.Error(), token) {
		t.Fatal("client DecodeError leaked secret")
	}
}

func TestIntervalGuaranteesWindow(t *testing.T) {
	t.Parallel()
	for _, rl := range []httpx.RateLimit{{100, 15 * time.Second}, {10, 500 * time.Millisecond}, {1, time.Second}, {7, 3 * time.Second}} {
		iv := rl.Interval()
		// Requests+1 requests spaced iv apart span more than Per.
		if time.Duration(rl.Requests)*iv <= rl.Per {
			t.Errorf("%+v: interval %v lets %d requests into one window", rl, iv, rl.Requests+1)
		}
	}
	// One request a second (Toggl's leaky bucket): a margin for jitter on
	// the way, so that two requests never arrive less than a second apart.
	if iv := (httpx.RateLimit{Requests: 1, Per: time.Second}).Interval(); iv < 1010*time.Millisecond || iv > 1050*time.Millisecond {
		t.Errorf("1 per second: interval %v, want about 1.02 s", iv)
	}
	// Harvest: sustained rate within 1% of the budget.
	rl := httpx.RateLimit{Requests: 100, Per: 15 * time.Second}
	if perWindow := float64(rl.Per) / float64(rl.Interval()); perWindow < 98.99 {
		t.Errorf("sustains %.2f per window, want ≥ 99", perWindow)
	}
}

// Concurrent callers, timestamps taken when the client sends: no window of
// length Per ever holds more than Requests, start-up included, and the
// throughput stays near the budget.
func TestLimiterSlidingWindowUnderConcurrency(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var at []time.Time
	s := newServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{}`))
	})
	rl := httpx.RateLimit{Requests: 10, Per: 500 * time.Millisecond}
	cfg := fastConfig(nil)
	cfg.RateLimit = rl
	// Stamped when the client sends, not when the server's handler runs:
	// on a busy machine the handler's lag bunches requests that were sent
	// apart, which says nothing of the limiter.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	cfg.Transport = sendStamps(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		return tr.RoundTrip(r)
	})
	c := httpx.New(cfg)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for ctx.Err() == nil {
				_, _ = c.Do(ctx, httpx.Request{URL: s.URL})
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	// A send stamp still lags the limiter's grant by however late its
	// goroutine runs after the wait, which brings it closer to the next
	// ones (a busy 2-core machine showed 11 sends within 500 ms): the
	// window allows that much lag (a fifth of Per, scaled by
	// TIDEMARK_TEST_SLOWDOWN). A limiter a quarter over budget still fails.
	window := max(rl.Per-slowdown.Scale(rl.Per/5), rl.Per/2)
	maxIn := 0
	for i := range at {
		n := 0
		for j := i; j < len(at) && at[j].Sub(at[i]) <= window; j++ {
			n++
		}
		maxIn = max(maxIn, n)
	}
	if maxIn > rl.Requests {
		t.Errorf("a %v window held %d requests, budget %d per %v (less %v for scheduling lag)", window, maxIn, rl.Requests, rl.Per, rl.Per-window)
	}
	budget := float64(rl.Requests) * float64(elapsed) / float64(rl.Per)
	if float64(len(at)) < 0.85*budget {
		t.Errorf("%d requests in %v, budget %.0f", len(at), elapsed, budget)
	}
	t.Logf("%d requests in %v (budget %.0f), max per window %d", len(at), elapsed, budget, maxIn)
}

// A 402 quota wait or a 429 Retry-After wait longer than MaxRetryTime must
// not use up the retry budget: the 5xx after it still gets its retry.
func TestWaitsDoNotSpendRetryTime(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		wait, bad int // the first response, then the second
		configure func(*httpx.Config)
	}{
		{"quota", http.StatusPaymentRequired, http.StatusServiceUnavailable, func(cfg *httpx.Config) {
			cfg.QuotaWait = func(*http.Response) time.Duration { return 300 * time.Millisecond }
		}},
		{"retry after", http.StatusTooManyRequests, http.StatusBadGateway, func(cfg *httpx.Config) {
			cfg.DefaultRetryAfter = 300 * time.Millisecond
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
				switch n {
				case 1:
					w.WriteHeader(tc.wait)
				case 2:
					w.WriteHeader(tc.bad)
				default:
					w.Write([]byte(`{}`))
				}
			})
			cfg := fastConfig(nil)
			cfg.MaxRetryTime = 200 * time.Millisecond
			tc.configure(&cfg)
			s.getOK(t, httpx.New(cfg), 3)
		})
	}
}

// Limiter spacing longer than MaxRetryTime must not use up the retry
// budget either, before the first attempt or between retries.
func TestLimiterSpacingDoesNotSpendRetryTime(t *testing.T) {
	t.Parallel()
	s := newServer(t, failNth(2, http.StatusServiceUnavailable))
	cfg := fastConfig(nil)
	cfg.MaxRetryTime = 200 * time.Millisecond
	cfg.RateLimit = httpx.RateLimit{Requests: 1, Per: 300 * time.Millisecond}
	c := httpx.New(cfg)
	// The first call takes the limiter's only token, so the second waits
	// 300 ms before its first attempt (and again before its retry).
	if _, err := get(t, c, s.URL); err != nil {
		t.Fatal(err)
	}
	s.getOK(t, c, 3)
}

// What does count: time spent in failed attempts. Slow 503s use up
// MaxRetryTime even with negligible back-off.
func TestSlowFailuresSpendRetryTime(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		time.Sleep(100 * time.Millisecond)
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	cfg := fastConfig(nil)
	cfg.MaxAttempts = 100
	cfg.MaxRetryTime = 250 * time.Millisecond
	_, err := get(t, httpx.New(cfg), s.URL)
	if !errors.Is(err, httpx.ErrStatus) {
		t.Fatalf("err = %v", err)
	}
	if n := s.n.Load(); n < 2 || n > 4 {
		t.Fatalf("requests = %d, want about 3", n)
	}
}

// raw hijacks the connection and writes s as the whole response, then
// closes (with a reset when rst is set).
func raw(w http.ResponseWriter, s string, rst bool) {
	conn, bw, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	bw.WriteString(s)
	bw.Flush()
	if tc, ok := conn.(*net.TCPConn); ok && rst {
		tc.SetLinger(0) // close sends RST instead of FIN
	}
	conn.Close()
}

// Each way a 200's body can arrive short, then the whole body.
var cutForms = []struct {
	name string
	cut  func(w http.ResponseWriter, body []byte)
}{
	{"content-length longer than sent", func(w http.ResponseWriter, body []byte) {
		raw(w, fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:len(body)/2]), false)
	}},
	{"chunked, closed mid-body", func(w http.ResponseWriter, body []byte) {
		half := body[:len(body)/2]
		raw(w, fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(half), half), false)
	}},
	{"connection reset mid-body", func(w http.ResponseWriter, body []byte) {
		raw(w, fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:len(body)/2]), true)
	}},
	{"prefix written, length matches", func(w http.ResponseWriter, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body[:len(body)/2]) // the server sets Content-Length to what was written
	}},
	{"prefix written, small, no content type", func(w http.ResponseWriter, body []byte) {
		w.Write(body[:40])
	}},
	{"prefix written, chunked, clean end", func(w http.ResponseWriter, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush() // chunked, with its terminating chunk
	}},
	{"prefix, connection close without length", func(w http.ResponseWriter, body []byte) {
		raw(w, fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n%s", body[:len(body)/2]), false)
	}},
	{"cut inside a string after a backslash", func(w http.ResponseWriter, body []byte) {
		i := strings.Index(string(body), `\\`)
		w.Write(body[:i+1])
	}},
	{"prefix, empty, json content type", func(w http.ResponseWriter, _ []byte) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("Content-Length", "0")
	}},
}

// A 200 whose body did not arrive whole is a transport fault, in each form
// it takes: cut once, it is retried and the whole body returned; cut every
// time, it uses up the retry budget like a 5xx, and the error says what
// happened.
func TestCutBodyIsATransportFault(t *testing.T) {
	t.Parallel()
	body := httpx.HarvestPage(60)
	for _, tc := range cutForms {
		t.Run(tc.name+"/once", func(t *testing.T) {
			t.Parallel()
			s := newServer(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
				if n == 1 {
					tc.cut(w, body)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.Write(body)
			})
			var waits []string
			cfg := fastConfig(nil)
			cfg.OnWait = func(r string, _ time.Duration) { waits = append(waits, r) }
			resp, err := get(t, httpx.New(cfg), s.URL)
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if s.n.Load() != 2 || string(resp.Body) != string(body) {
				t.Fatalf("requests = %d, body %d bytes, want 2 and %d", s.n.Load(), len(resp.Body), len(body))
			}
			if strings.Join(waits, ",") != "backoff" {
				t.Errorf("waits = %v, want one back-off", waits)
			}
		})
		t.Run(tc.name+"/always", func(t *testing.T) {
			t.Parallel()
			s := newServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) { tc.cut(w, body) })
			cfg := fastConfig(nil)
			cfg.MaxAttempts = 3
			_, err := httpx.New(cfg).Do(t.Context(), httpx.Request{URL: s.URL + "/v2/time_entries?page=3", Resource: "time_entries", Page: 3})
			var he *httpx.Error
			if !errors.As(err, &he) || he.Kind != httpx.KindTransport || he.Attempts != 3 || s.n.Load() != 3 {
				t.Fatalf("err = %#v after %d requests", err, s.n.Load())
			}
			if !errors.Is(err, httpx.ErrTransport) || !errors.Is(err, httpx.ErrBodyCutShort) || !he.Temporary() {
				t.Errorf("errors.Is mismatch for %v", err)
			}
			for _, want := range []string{"acme time_entries page 3", "GET /v2/time_entries", "after 3 attempts", "body cut short", "bytes received"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if strings.Contains(err.Error(), token) {
				t.Errorf("error leaks the token: %s", err)
			}
		})
	}
}

// A complete body that is not what the provider documents is bad input,
// not a transfer fault: returned at once, as received, for the provider to
// report.
func TestCompleteMalformedBodyIsReturned(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, ctype, body string }{
		{"bad value", "application/json", `{"a":}`},
		{"html", "text/html; charset=utf-8", "<!DOCTYPE html>\n<html><body>down for maintenance</body></html>\n"},
		{"html labelled json", "application/json", "<html><body>oops</body></html>"},
		{"trailing garbage", "application/json", `{"a":1} trailing`},
		{"mismatched brackets", "application/json", `{"a":[1,2}}`},
		{"empty, no content type", "", ""},
		{"scalar", "application/json", `12`},
		{"closed after whitespace", "application/json", " \n[1, {\"x\": \"]\"}]\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
				w.Header()["Content-Type"] = []string{tc.ctype}
				w.Write([]byte(tc.body))
			})
			resp, err := get(t, httpx.New(fastConfig(nil)), s.URL)
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if s.n.Load() != 1 || string(resp.Body) != tc.body {
				t.Fatalf("requests = %d, body %q", s.n.Load(), resp.Body)
			}
		})
	}
}

// Only 2xx bodies are checked: a 5xx's truncated JSON is just a 5xx, and a
// 4xx returns at once with its (partial) body.
func TestCutBodyOfErrorStatusIsNotSpecial(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		w.Write([]byte(`{"error":"inva`))
	})
	_, err := get(t, httpx.New(fastConfig(nil)), s.URL)
	var he *httpx.Error
	if !errors.As(err, &he) || he.Kind != httpx.KindStatus || he.Status != 422 || s.n.Load() != 1 {
		t.Fatalf("err = %v after %d requests", err, s.n.Load())
	}
}

// With a Decode hook the provider's decoder decides: a body it finds cut
// short is requested again within the budget (no second completeness pass),
// any other decode error is returned as it is, at once.
func TestDecodeHookDecidesWhatIsCutShort(t *testing.T) {
	t.Parallel()
	body := httpx.HarvestPage(60)
	s := newServer(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if n == 1 {
			w.Write(body[:len(body)/2])
			return
		}
		w.Write(body)
	})
	c := httpx.New(fastConfig(nil))
	var calls int
	var decoded []byte
	resp, err := c.Do(t.Context(), httpx.Request{URL: s.URL, Resource: "time_entries", Page: 1,
		Decode: func(b []byte, _ time.Time) error {
			calls++
			if !json.Valid(b) {
				return fmt.Errorf("page 1: %w", httpx.ErrBodyCutShort)
			}
			decoded = b
			return nil
		}})
	if err != nil || calls != 2 || string(decoded) != string(body) || string(resp.Body) != string(body) {
		t.Fatalf("err %v, %d decodes", err, calls)
	}

	bad := errors.New("time_entries[0].id: missing")
	calls = 0
	_, err = c.Do(t.Context(), httpx.Request{URL: s.URL, Resource: "time_entries", Page: 1,
		Decode: func([]byte, time.Time) error { calls++; return bad }})
	if err != bad || calls != 1 {
		t.Fatalf("a decode error that is not a cut body: %v after %d decodes, want it returned at once", err, calls)
	}
}

// A wait of LongWait or more gives the caller's hold back and takes it
// again after (a daemon's pass slot); a shorter one (the limiter's
// spacing) keeps it.
func TestLongWaitsHooks(t *testing.T) {
	var left, back int
	ctx := httpx.WithLongWaits(context.Background(), func() { left++ }, func(context.Context) error { back++; return nil })
	if err := httpx.Sleep(ctx, time.Millisecond); err != nil || left+back != 0 {
		t.Fatalf("a short wait: left %d, back %d, %v", left, back, err)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := httpx.Sleep(short, httpx.LongWait); err == nil || left != 1 || back != 1 {
		t.Fatalf("a long wait cut short: left %d, back %d, %v", left, back, err)
	}
}

// Issue 22: a hostile Retry-After (a year, or seconds that overflow a
// Duration) parks the source for MaxRetryAfter at most, never for ever or
// for a negative wait.
func TestRetryAfterBounded(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"9223372036854775807", "31536000", "99999999999", time.Now().AddDate(1, 0, 0).UTC().Format(http.TimeFormat)} {
		h := http.Header{"Retry-After": {v}}
		if d := httpx.RetryAfter(h, time.Second); d != httpx.MaxRetryAfter {
			t.Errorf("Retry-After %s: wait %v, want %v", v, d, httpx.MaxRetryAfter)
		}
	}
}

// sendStamps is a RoundTripper of a func (tests that watch sends).
type sendStamps func(*http.Request) (*http.Response, error)

func (f sendStamps) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
