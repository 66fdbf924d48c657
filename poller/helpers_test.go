package poller_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/poller"
)

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newPoller is poller.New for a test: it fails the test on error and closes
// the poller when the test ends.
func newPoller(t *testing.T, params poller.Params) *poller.Poller {
	t.Helper()
	p, err := poller.New(params)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// startDaemon starts a daemon over p that runs its first passes at once; it
// is stopped when the test ends (before p closes). Stopping it earlier too
// is harmless.
func startDaemon(t *testing.T, p *poller.Poller, s poller.Schedule) *poller.Daemon {
	t.Helper()
	d, err := poller.NewDaemon(p, config.CronParser, []poller.Schedule{s})
	if err != nil {
		t.Fatal(err)
	}
	d.Start(context.Background(), true)
	t.Cleanup(func() { _ = d.Stop(context.Background()) })
	return d
}

func waitFor(t *testing.T, d time.Duration, ok func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitForLog waits until logs hold text, and shows them if they never do.
func waitForLog(t *testing.T, logs *syncBuffer, d time.Duration, text string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(logs.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q logged:\n%s", text, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// backfillFrom is the first day of the backfill tests' ranges.
var backfillFrom = clients.Date{Year: 2026, Month: 1, Day: 1}

// daily returns a fake source with n entries, one a day from backfillFrom.
func daily(n int, notes string) *fakeSource {
	src := newFakeSource("acme", t0)
	for i := 0; i < n; i++ {
		src.put(i+1, backfillFrom.AddDays(i), notes)
	}
	return src
}

// incremental runs an incremental pass of source "acme" that must succeed.
func incremental(t *testing.T, p *poller.Poller) []poller.Result {
	t.Helper()
	res, err := p.Incremental(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	return res
}
