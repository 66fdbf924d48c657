package httpx_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients/httpx"
)

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
