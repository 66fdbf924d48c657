package poller_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/provider/listing"
	"github.com/tidemarkhq/tidemark/cursor"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/logtest"
	"github.com/tidemarkhq/tidemark/internal/metrics"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/poller"
)

// panicky is a client with a bug: its listing panics, on the pass's own
// goroutine or (readAhead) on the read-ahead fetch goroutine.
type panicky struct {
	*fakeSource
	readAhead bool
}

func (p panicky) List(ctx context.Context, r clients.Resource, w clients.Window, fn func(context.Context, clients.Page) error) error {
	var bug map[string]int
	if p.readAhead {
		return listing.ReadAhead(ctx, fn, func(ctx context.Context, send func(listing.Fetched) bool) {
			bug["total_entries"] = 1 // assignment to a nil map
		})
	}
	var pages []clients.Page
	return fn(ctx, pages[len(pages)]) // index out of range
}

func countSourceRuns(t *testing.T, pool *pgxpool.Pool, source, kind, status, errLike string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM sync_runs WHERE source = $1 AND kind = $2 AND status = $3 AND coalesce(error, '') LIKE $4`,
		source, kind, status, errLike).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// onDayNamed is onDay for a source named name.
func onDayNamed(name string, d clients.Date, notes ...string) *fakeSource {
	src := onDay(d, notes...)
	src.name = name
	return src
}

// Issue 22: a panic in one source's pass (its own goroutine, or the
// read-ahead fetch goroutine) is recovered, logged with source, resource
// and stack, recorded as a failed run and backed off; the daemon and the
// other sources go on. Before, it took the whole process down.
func TestPanickingSourceFailsAloneInTheDaemon(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	healthy := onDay(today(), "a")
	var logs logtest.Buffer
	p := newPoller(t, poller.Params{Pool: pool, Logger: zerolog.New(&logs), Sources: []poller.Source{
		{Source: healthy},
		{Source: panicky{fakeSource: onDayNamed("boom", today(), "b")}},
		{Source: panicky{fakeSource: onDayNamed("boom-ahead", today(), "c"), readAhead: true}},
	}})
	var scheds []poller.Schedule
	for _, s := range []string{"acme", "boom", "boom-ahead"} {
		scheds = append(scheds, poller.Schedule{Source: s, Incremental: "@every 1s"})
	}
	d, err := poller.NewDaemon(p, config.CronParser, scheds)
	if err != nil {
		t.Fatal(err)
	}
	d.Start(context.Background(), true)
	t.Cleanup(func() { _ = d.Stop(context.Background()) })
	waitFor(t, 30*time.Second, func() bool {
		return countSourceRuns(t, pool, "acme", "incremental", "ok", "%") >= 3 &&
			countSourceRuns(t, pool, "boom", "incremental", "failed", "%panic: runtime error: index out of range%") >= 1 &&
			countSourceRuns(t, pool, "boom-ahead", "incremental", "failed", "%panic: assignment to entry in nil map%") >= 1
	}, "the healthy source to keep syncing beside two panicking ones, whose runs fail")
	waitForLog(t, &logs, 5*time.Second, "recovered from a panic")
	for _, want := range []string{`"source":"boom"`, `"resource":"time_entries"`, `"stack":"goroutine`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the panic's log line lacks %s", want)
		}
	}
	// A webhook-triggered pass of a panicking source fails the same way.
	if _, err := d.RunTriggered("boom", []clients.Resource{clients.TimeEntries}); err != nil && !strings.Contains(err.Error(), "panic") {
		t.Errorf("triggered pass: %v", err)
	}
	// So does a backfill.
	_, err = p.Backfill(context.Background(), poller.BackfillParams{Source: "boom-ahead", Resource: clients.TimeEntries, From: today(), To: today()})
	if err == nil || !strings.Contains(err.Error(), "panic") {
		t.Errorf("backfill of a panicking source: %v, want its panic as the error", err)
	}
	if n := countSourceRuns(t, pool, "boom-ahead", "backfill", "failed", "%panic%"); n != 1 {
		t.Errorf("%d failed backfill runs recorded, want 1", n)
	}
}

// stuckCapped is a source whose listing stays capped (clients.ErrCapped)
// until healed.
type stuckCapped struct {
	*fakeSource
	mu     sync.Mutex
	healed bool
}

func (c *stuckCapped) List(ctx context.Context, r clients.Resource, w clients.Window, fn func(context.Context, clients.Page) error) error {
	c.mu.Lock()
	healed := c.healed
	c.mu.Unlock()
	if !healed {
		return fmt.Errorf("time_entries: %w: the provider stopped at page 3 of the 9 its envelope announced", clients.ErrCapped)
	}
	return c.fakeSource.List(ctx, r, w, fn)
}

// backoffGauge is the capped back-off gauge of acme/time_entries in m (0
// when absent).
func backoffGauge(t *testing.T, m *metrics.Metrics) float64 {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "tidemark_resource_backoff_until_timestamp_seconds" {
			continue
		}
		for _, mt := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range mt.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["source"] == "acme" && labels["resource"] == "time_entries" && labels["reason"] == "capped" {
				return mt.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// Issue 22: a listing that stays capped was walked (up to 3 times) at
// every tick, for ever, without a state an operator could see. It is
// retried at the next tick once, then backs off exponentially (capped at
// CappedBackoffMax), shows in pass_state (for `cursors` and the status
// page) and in a metric, and the back-off ends with the first success.
func TestCappedListingBacksOffAndShows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.DB(t)
	src := &stuckCapped{fakeSource: onDay(today(), "a")}
	m := metrics.New()
	p := newPoller(t, poller.Params{Pool: pool, Logger: zerolog.Nop(), Observer: m, Sources: []poller.Source{{Source: src}}})
	d, err := poller.NewDaemon(p, config.CronParser, []poller.Schedule{{Source: "acme", Incremental: "@every 1s"}})
	if err != nil {
		t.Fatal(err)
	}
	const base = 4 * time.Second
	d.SetBackoff(base, time.Minute)
	d.Start(ctx, true)
	t.Cleanup(func() { _ = d.Stop(ctx) })
	var st cursor.PassState
	waitFor(t, 30*time.Second, func() bool {
		states, err := p.Store().PassStates(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range states {
			if s.Resource == "time_entries" && s.Kind == "incremental" && s.Failures >= 2 {
				st = s
				return true
			}
		}
		return false
	}, "a second capped failure")
	// The second failure in a row backs off by base (the first one is
	// retried at the next tick): not walked again at every tick.
	if st.BackoffUntil == nil || st.BackoffUntil.Sub(st.UpdatedAt) < base-time.Second {
		t.Fatalf("after %d capped failures: backoff until %v (recorded %v), want about %v later", st.Failures, st.BackoffUntil, st.UpdatedAt, base)
	}
	if !strings.Contains(st.LastError, clients.ErrCapped.Error()) {
		t.Errorf("last error %q does not say capped", st.LastError)
	}
	if g := backoffGauge(t, m); g == 0 {
		t.Error("no capped back-off gauge")
	}
	src.mu.Lock()
	src.healed = true
	src.mu.Unlock()
	waitFor(t, 30*time.Second, func() bool { return countRuns(t, pool, "time_entries", "incremental", "ok") >= 1 }, "the healed listing to sync")
	waitFor(t, 10*time.Second, func() bool {
		states, err := p.Store().PassStates(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range states {
			if s.Resource == "time_entries" && s.Kind == "incremental" && (s.Failures != 0 || s.BackoffUntil != nil) {
				return false
			}
		}
		return backoffGauge(t, m) == 0
	}, "the back-off to end with the success")
}
