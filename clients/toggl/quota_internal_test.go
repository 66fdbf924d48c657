package toggl

import (
	"net/http"
	"testing"
	"time"
)

// Toggl's quota window starts at the first request and lasts 60 minutes
// (support.toggl.com, api-webhook-limits). A 402 waits for the window the
// provider states in X-Toggl-Quota-Resets-In, else until 60 minutes after
// the first request of the window the client tracked.
func TestQuotaWaitForTheStatedWindow(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 10, 12, 50, 0, 0, time.UTC)
	first := now.Add(-50 * time.Minute) // 12:00, first request of the window
	h := http.Header{}
	h.Set("X-Toggl-Quota-Remaining", "0")
	h.Set("X-Toggl-Quota-Resets-In", "754")
	for _, tc := range []struct {
		name  string
		h     http.Header
		first time.Time
		want  time.Duration
	}{
		{"headers", h, first, 754 * time.Second},
		{"fractional seconds", http.Header{"X-Toggl-Quota-Resets-In": {"30.5"}}, first, 30500 * time.Millisecond},
		{"no headers: 60 minutes after the first request, and a second's margin", http.Header{}, first, 10*time.Minute + time.Second},
		{"no headers, window passed by our tracking", http.Header{}, now.Add(-2 * time.Hour), time.Hour},
		{"no headers, nothing tracked", http.Header{}, time.Time{}, time.Hour},
		{"unreadable header", http.Header{"X-Toggl-Quota-Resets-In": {"soon"}}, first, 10*time.Minute + time.Second},
		{"zero resets-in", http.Header{"X-Toggl-Quota-Resets-In": {"0"}}, first, time.Second},
	} {
		if got := quotaWait(tc.h, tc.first, time.Hour, now); got != tc.want {
			t.Errorf("%s: wait %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The window the client tracks starts at the first request after the
// previous one ended.
func TestQuotaTracksTheWindowStart(t *testing.T) {
	t.Parallel()
	var q Quota
	t0 := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	q.request(t0, time.Hour)
	q.request(t0.Add(59*time.Minute), time.Hour)
	if got := q.windowStart(); !got.Equal(t0) {
		t.Fatalf("window start %v, want %v", got, t0)
	}
	q.request(t0.Add(61*time.Minute), time.Hour)
	if got := q.windowStart(); !got.Equal(t0.Add(61 * time.Minute)) {
		t.Fatalf("window start %v, want the first request after the window", got)
	}
}
