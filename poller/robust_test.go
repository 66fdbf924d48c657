package poller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/provider/listing"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/logtest"
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
