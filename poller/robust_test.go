package poller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
	"github.com/tidemarkhq/tidemark/schema"
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
	if _, err := d.RunTriggered("boom", []clients.Resource{clients.TimeEntries}, nil); err != nil && !strings.Contains(err.Error(), "panic") {
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

// badRecord serves record id with hours the mirror refuses while bad.
type badRecord struct {
	*fakeSource
	id  string
	bad atomic.Bool
}

func (b *badRecord) List(ctx context.Context, r clients.Resource, w clients.Window, fn func(context.Context, clients.Page) error) error {
	return b.fakeSource.List(ctx, r, w, func(ctx context.Context, pg clients.Page) error {
		for i := range pg.Records {
			if pg.Records[i].ID == b.id && b.bad.Load() {
				rec := pg.Records[i]
				rec.Row = slices.Clone(rec.Row)
				rec.Row[schema.TE.Hours] = clients.Decimal("NaN")
				pg.Records[i] = rec
			}
		}
		return fn(ctx, pg)
	})
}

// Issue 22: a record that cannot be stored fails alone. The rest of its
// page goes in; it waits in record_quarantine, named with its error and
// counted in the run; the cursor stays below its version, so every later
// pass reads it again, until it goes in.
func TestUnstorableRecordIsQuarantinedAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := newFakeSource("acme", t0)
	src.put(1, day, "a")
	src.tick(time.Minute)
	src.put(2, day, "b")
	src.tick(time.Minute)
	src.put(3, day, "c")
	src.put(4, day, "d")
	src.tick(time.Minute)
	bad := &badRecord{fakeSource: src, id: "2"}
	bad.bad.Store(true)
	pool := pgtest.DB(t)
	p := newPoller(t, poller.Params{Pool: pool, Logger: zerolog.New(zerolog.NewTestWriter(t)),
		Sources: []poller.Source{{Source: bad, Overlap: time.Second}}})
	v2 := src.truth()["2"]
	for pass := 1; pass <= 2; pass++ {
		res := incremental(t, p)
		if c := res[0].Counts; c.Quarantined != 1 || c.Inserted+c.Unchanged != c.Fetched-1 {
			t.Fatalf("pass %d counts %+v, want the others stored, 1 quarantined", pass, c)
		}
		if hw := highWater(t, p, "acme"); !hw.Before(v2) {
			t.Fatalf("pass %d: cursor %v moved past the quarantined record's version %v", pass, hw, v2)
		}
		qs, err := p.Store().QuarantinedRecords(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		if len(qs) != 1 || qs[0].ID != "2" || qs[0].Failures != pass || !strings.Contains(qs[0].Error, "hours") || !qs[0].Version.Equal(v2) {
			t.Fatalf("pass %d: quarantine %+v, want record 2 failed %d times on hours", pass, qs, pass)
		}
	}
	if m := mirror(t, pool, "acme"); len(m) != 3 {
		t.Fatalf("mirror %v, want the 3 good records", m)
	}
	var runs int64
	if err := pool.QueryRow(ctx, `SELECT sum(quarantined) FROM sync_runs WHERE source = 'acme' AND status = 'ok'`).Scan(&runs); err != nil || runs != 2 {
		t.Fatalf("sync_runs count %d quarantined records (%v), want 2", runs, err)
	}
	// Fixed at the source (or by an upgrade): the next pass stores it,
	// empties the quarantine, and the cursor moves on.
	bad.bad.Store(false)
	incremental(t, p)
	assertConverged(t, pool, src)
	if qs, err := p.Store().QuarantinedRecords(ctx, "acme"); err != nil || len(qs) != 0 {
		t.Fatalf("quarantine after the fix: %+v, %v", qs, err)
	}
	if hw := highWater(t, p, "acme"); hw.Before(src.truth()["4"]) {
		t.Fatalf("cursor %v did not move on after the fix", hw)
	}
}

// noVersion serves record id without a version while bad.
type noVersion struct{ *badRecord }

func (n noVersion) List(ctx context.Context, r clients.Resource, w clients.Window, fn func(context.Context, clients.Page) error) error {
	return n.fakeSource.List(ctx, r, w, func(ctx context.Context, pg clients.Page) error {
		for i := range pg.Records {
			if pg.Records[i].ID == n.id && n.bad.Load() {
				pg.Records[i].Version = time.Time{}
			}
		}
		return fn(ctx, pg)
	})
}

// A quarantined record without a version cannot be placed below the
// cursor: the cursor does not move until it goes in.
func TestQuarantinedRecordWithoutVersionHoldsTheCursor(t *testing.T) {
	t.Parallel()
	src := onDay(day, "a", "b", "c")
	nv := noVersion{&badRecord{fakeSource: src, id: "2"}}
	nv.bad.Store(true)
	pool := pgtest.DB(t)
	p := newPoller(t, poller.Params{Pool: pool, Logger: zerolog.Nop(), Sources: []poller.Source{{Source: nv, Overlap: time.Second}}})
	if c := incremental(t, p)[0].Counts; c.Quarantined != 1 {
		t.Fatalf("counts %+v, want 1 quarantined", c)
	}
	if hw := highWater(t, p, "acme"); !hw.IsZero() {
		t.Fatalf("cursor moved to %v past a quarantined record without a version", hw)
	}
	nv.bad.Store(false)
	incremental(t, p)
	assertConverged(t, pool, src)
	if hw := highWater(t, p, "acme"); hw.IsZero() {
		t.Fatal("cursor did not move once the record went in")
	}
}
