package httpx_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients/httpx"
)

// A 402 quota wait longer than MaxRetryTime must not use up the retry
// budget: the 503 after it still gets its retry.
func TestQuotaWaitDoesNotSpendRetryTime(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
		switch n {
		case 1:
			w.WriteHeader(http.StatusPaymentRequired)
		case 2:
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.Write([]byte(`{}`))
		}
	})
	cfg := fastConfig(nil)
	cfg.MaxRetryTime = 200 * time.Millisecond
	cfg.QuotaWait = func(*http.Response) time.Duration { return 300 * time.Millisecond }
	if _, err := get(t, httpx.New(cfg), s.URL); err != nil {
		t.Fatalf("err = %v after %d requests", err, s.n.Load())
	}
	if s.n.Load() != 3 {
		t.Fatalf("requests = %d, want 3", s.n.Load())
	}
}

// The same for a 429 Retry-After wait.
func TestRetryAfterWaitDoesNotSpendRetryTime(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
		switch n {
		case 1:
			w.WriteHeader(http.StatusTooManyRequests)
		case 2:
			w.WriteHeader(http.StatusBadGateway)
		default:
			w.Write([]byte(`{}`))
		}
	})
	cfg := fastConfig(nil)
	cfg.MaxRetryTime = 200 * time.Millisecond
	cfg.DefaultRetryAfter = 300 * time.Millisecond
	if _, err := get(t, httpx.New(cfg), s.URL); err != nil {
		t.Fatalf("err = %v after %d requests", err, s.n.Load())
	}
	if s.n.Load() != 3 {
		t.Fatalf("requests = %d, want 3", s.n.Load())
	}
}

// Limiter spacing longer than MaxRetryTime must not use up the retry
// budget either, before the first attempt or between retries.
func TestLimiterSpacingDoesNotSpendRetryTime(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
		if n == 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(`{}`))
	})
	cfg := fastConfig(nil)
	cfg.MaxRetryTime = 200 * time.Millisecond
	cfg.RateLimit = httpx.RateLimit{Requests: 1, Per: 300 * time.Millisecond}
	c := httpx.New(cfg)
	// The first call takes the limiter's only token, so the second waits
	// 300 ms before its first attempt (and again before its retry).
	if _, err := get(t, c, s.URL); err != nil {
		t.Fatal(err)
	}
	if _, err := get(t, c, s.URL); err != nil {
		t.Fatalf("err = %v after %d requests", err, s.n.Load())
	}
	if s.n.Load() != 3 {
		t.Fatalf("requests = %d, want 3", s.n.Load())
	}
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
