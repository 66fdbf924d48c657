package toggl_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/toggl"
	"github.com/tidemarkhq/tidemark/clients/toggl/toggltest"
)

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
	start := time.Now()
	waits := quotaWaits(t, f, time.Hour, 0)
	if len(waits) != 1 || waits[0] > 2*time.Second || waits[0] < time.Second {
		t.Fatalf("quota waits %v, want one of about 2s (the stated Resets-In)", waits)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v", took)
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
