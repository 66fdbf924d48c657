package poller_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/cursor"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/logtest"
	"github.com/tidemarkhq/tidemark/internal/pgcluster"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/migrations"
	"github.com/tidemarkhq/tidemark/poller"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var day = clients.Date{Year: 2026, Month: 3, Day: 1}

// t0 is the source's clock at the start of each test: far from ours, so a
// test passes only if nothing uses the local clock.
var t0 = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

func setup(t *testing.T, srcs ...*fakeSource) (*poller.Poller, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.DB(t)
	var ps []poller.Source
	for _, s := range srcs {
		ps = append(ps, poller.Source{Source: s, Overlap: 2 * time.Minute, MaxTombstones: 100, WindowDays: 3})
	}
	p := newPoller(t, poller.Params{Pool: pool, Sources: ps, Logger: zerolog.New(zerolog.NewTestWriter(t))})
	return p, pool
}

// syncedToday returns a fake source with one entry spent today per notes
// (ids from 1), and a poller (see setup) that has run an incremental pass.
func syncedToday(t *testing.T, notes ...string) (*fakeSource, *poller.Poller, *pgxpool.Pool) {
	t.Helper()
	src := onDay(today(), notes...)
	p, pool := setup(t, src)
	incremental(t, p)
	return src, p, pool
}

type row struct {
	version time.Time
	deleted bool
	notes   string
}

func mirror(t *testing.T, pool *pgxpool.Pool, source string) map[string]row {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT id, updated_at, deleted_at IS NOT NULL, coalesce(notes, '') FROM time_entries WHERE source = $1`, source)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]row{}
	for rows.Next() {
		var id string
		var r row
		if err := rows.Scan(&id, &r.version, &r.deleted, &r.notes); err != nil {
			t.Fatal(err)
		}
		out[id] = r
	}
	return out
}

// assertNoneTombstoned fails the test when a row of source "acme" is
// tombstoned.
func assertNoneTombstoned(t *testing.T, pool *pgxpool.Pool, why string) {
	t.Helper()
	for id, r := range mirror(t, pool, "acme") {
		if r.deleted {
			t.Fatalf("id %s tombstoned %s", id, why)
		}
	}
}

// assertConverged checks the mirror holds exactly the source's live records
// at their versions (deleted ones tombstoned, if present).
func assertConverged(t *testing.T, pool *pgxpool.Pool, src *fakeSource) {
	t.Helper()
	truth := src.truth()
	m := mirror(t, pool, src.name)
	for id, v := range truth {
		r, ok := m[id]
		switch {
		case !ok:
			t.Errorf("id %s missing from the mirror", id)
		case r.deleted:
			t.Errorf("id %s is live at the source but tombstoned", id)
		case !r.version.Equal(v):
			t.Errorf("id %s at version %v, source has %v", id, r.version, v)
		}
	}
	for id, r := range m {
		if _, ok := truth[id]; !ok && !r.deleted {
			t.Errorf("id %s deleted at the source but live in the mirror", id)
		}
	}
}

func highWater(t *testing.T, p *poller.Poller, source string) time.Time {
	t.Helper()
	c, err := p.Store().Load(context.Background(), source, string(clients.TimeEntries))
	if errors.Is(err, cursor.ErrNotFound) {
		return time.Time{}
	}
	if err != nil {
		t.Fatal(err)
	}
	return c.HighWater
}

func TestIncrementalConvergesAndCursorUsesSourceClock(t *testing.T) {
	t.Parallel()
	src := newFakeSource("acme", t0)
	for i := 1; i <= 10; i++ {
		src.put(i, day, "first")
		src.tick(time.Second)
	}
	p, pool := setup(t, src)

	res := incremental(t, p)
	assertConverged(t, pool, src)
	if got := res[0].Counts; got.Fetched != 10 || got.Inserted != 10 {
		t.Fatalf("counts %+v", got)
	}
	// The newest version seen (t0+9s), not our clock.
	if hw := highWater(t, p, "acme"); !hw.Equal(t0.Add(9 * time.Second)) {
		t.Fatalf("high water %v, want %v", hw, t0.Add(9*time.Second))
	}

	// Re-running changes nothing: every overlapping record is unchanged.
	res = incremental(t, p)
	if c := res[0].Counts; c.Inserted+c.Updated != 0 || c.Unchanged != c.Fetched {
		t.Fatalf("re-delivery wrote: %+v", c)
	}
}

func TestHighWaterCappedBySourceClockAtPassStart(t *testing.T) {
	t.Parallel()
	src := onDay(day, "a")
	// A record stamped after the source's clock at the first page (written
	// while the listing ran) must not carry the cursor past that clock.
	src.putAt(2, t0.Add(time.Hour), day, "future")
	p, _ := setup(t, src)
	incremental(t, p)
	if hw := highWater(t, p, "acme"); !hw.Equal(t0) {
		t.Fatalf("high water %v, want the source clock %v", hw, t0)
	}
}

func TestSourceClockBehindAndLateVisibleWritesAreNotLost(t *testing.T) {
	t.Parallel()
	// The source's clock runs 5 minutes behind ours: nothing may depend on ours.
	src := newFakeSource("acme", time.Now().UTC().Add(-5*time.Minute).Truncate(time.Second))
	p, pool := setup(t, src)
	id := 1
	for round := 0; round < 5; round++ {
		for i := 0; i < 4; i++ {
			src.put(id, day, "x")
			id++
			src.tick(time.Second)
		}
		incremental(t, p)
		// A write that becomes visible only now, stamped 90 s ago (within
		// the 2-minute overlap), like a long transaction at the source.
		src.mu.Lock()
		late := src.now.Add(-90 * time.Second)
		src.mu.Unlock()
		src.putAt(id, late, day, "late")
		id++
		src.tick(30 * time.Second)
	}
	incremental(t, p)
	assertConverged(t, pool, src)
}

func TestFailedPageKeepsCursorAndNextPassConverges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := newFakeSource("acme", t0)
	for i := 1; i <= 10; i++ {
		src.put(i, day, "v1")
	}
	p, pool := setup(t, src)
	src.failPage = 3
	_, err := p.Incremental(ctx, "acme")
	if !errors.Is(err, errInjected) || !strings.Contains(err.Error(), "acme/time_entries") || !strings.Contains(err.Error(), "page 3") {
		t.Fatalf("error %v, want the injected failure naming source, resource and page", err)
	}
	if hw := highWater(t, p, "acme"); !hw.IsZero() {
		t.Fatalf("cursor moved to %v after a failed pass", hw)
	}
	runs, err := p.Store().Runs(ctx, cursor.RunsParams{Source: "acme"})
	if err != nil || len(runs) != 1 || runs[0].Status != cursor.StatusFailed || !strings.Contains(runs[0].Error, "page 3") {
		t.Fatalf("runs %+v (%v)", runs, err)
	}
	incremental(t, p)
	assertConverged(t, pool, src)
}

func TestLeaseOnePassPerSourceAcrossProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := onDay(day, "a")
	p1, pool := setup(t, src)
	// A second "process": its own poller and lease connection, same database.
	p2 := newPoller(t, poller.Params{Pool: pool, Sources: []poller.Source{{Source: src}}, Logger: zerolog.Nop()})

	entered, leave := make(chan struct{}), make(chan struct{})
	var once sync.Once
	src.onPage = func(clients.Window, int) {
		once.Do(func() { close(entered); <-leave })
	}
	done := make(chan error)
	go func() { _, err := p1.Incremental(ctx, "acme"); done <- err }()
	<-entered
	if _, err := p2.Incremental(ctx, "acme"); !errors.Is(err, poller.ErrBusy) {
		t.Errorf("second process: %v, want ErrBusy", err)
	}
	if _, err := p1.Incremental(ctx, "acme"); !errors.Is(err, poller.ErrBusy) {
		t.Errorf("same process: %v, want ErrBusy", err)
	}
	close(leave)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := p2.Incremental(ctx, "acme"); err != nil {
		t.Fatalf("after release: %v", err)
	}
}

func TestBackfillResumesAndNeverMovesTheCursor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, from := daily(30, "old"), backfillFrom
	p, pool := setup(t, src)
	to := from.AddDays(29)

	// Fail in the 4th window (window_days 3): three windows are recorded.
	var windows int
	src.onPage = func(w clients.Window, page int) {
		if page == 1 {
			windows++
			if windows == 4 {
				src.mu.Lock()
				src.failPage = 1
				src.mu.Unlock()
			}
		}
	}
	_, err := p.Backfill(ctx, poller.BackfillParams{Source: "acme", Resource: clients.TimeEntries, From: from, To: to})
	if !errors.Is(err, errInjected) {
		t.Fatalf("first backfill: %v", err)
	}
	bfs, err := p.Store().Backfills(ctx, "acme")
	if err != nil || len(bfs) != 1 || bfs[0].Next != from.AddDays(9) || bfs[0].WindowsDone != 3 {
		t.Fatalf("progress after failure: %+v (%v)", bfs, err)
	}
	// Run again with the same range: resumes at the 4th window.
	var resumedFrom clients.Date
	src.onPage = func(w clients.Window, page int) {
		if resumedFrom.IsZero() {
			resumedFrom = w.From
		}
	}
	if _, err := p.Backfill(ctx, poller.BackfillParams{Source: "acme", Resource: clients.TimeEntries, From: from, To: to}); err != nil {
		t.Fatal(err)
	}
	if resumedFrom != from.AddDays(9) {
		t.Fatalf("resumed at %v, want %v", resumedFrom, from.AddDays(9))
	}
	assertConverged(t, pool, src)
	if hw := highWater(t, p, "acme"); !hw.IsZero() {
		t.Fatalf("backfill moved the incremental cursor to %v", hw)
	}
	bfs, _ = p.Store().Backfills(ctx, "acme")
	if bfs[0].Status != cursor.BackfillDone {
		t.Fatalf("backfill status %q", bfs[0].Status)
	}
}

func TestSlowBackfillPageAfterNewerIncrementalIsHarmless(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := onDay(day, "old")
	p, pool := setup(t, src)

	// The backfill fetches the old version, then stalls before applying it.
	fetched, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	src.onPage = func(w clients.Window, page int) {
		if w.ByDate() {
			once.Do(func() { close(fetched); <-release })
		}
	}
	bfDone := make(chan error)
	go func() {
		_, err := p.Backfill(ctx, poller.BackfillParams{Source: "acme", Resource: clients.TimeEntries, From: day, To: day})
		bfDone <- err
	}()
	<-fetched
	// Meanwhile the record is edited and the daemon applies the newer version.
	src.tick(time.Minute)
	src.put(1, day, "new")
	incremental(t, p)
	// Now the slow backfill page arrives with the old version (the fake
	// snapshots a listing when it starts).
	close(release)
	if err := <-bfDone; err != nil {
		t.Fatal(err)
	}
	if r := mirror(t, pool, "acme")["1"]; r.notes != "new" || !r.version.Equal(t0.Add(time.Minute)) {
		t.Fatalf("row regressed to %+v", r)
	}
}

func TestReconcileTombstonesDeletionsSafely(t *testing.T) {
	t.Parallel()
	src := beforeToday(6)
	p, pool := setup(t, src)
	incremental(t, p)
	src.remove(2)
	src.remove(5)
	src.tick(10 * time.Minute)

	// A listing that fails tombstones nothing.
	src.failPage = 2
	if _, err := p.Reconcile(context.Background(), "acme", clients.TimeEntries); !errors.Is(err, errInjected) {
		t.Fatalf("reconcile with failing listing: %v", err)
	}
	assertNoneTombstoned(t, pool, "by a failed listing")
	// Record 7 was stored a moment ago and is gone from the listing: its
	// version is newer than the listing's start minus the overlap, so it is
	// left alone this time (it may be a write not yet visible to listings).
	src.put(7, today(), "recent")
	incremental(t, p)
	src.remove(7)
	if res := reconcile(t, p, clients.TimeEntries); res[0].Counts.Tombstoned != 2 {
		t.Fatalf("tombstoned %d, want 2", res[0].Counts.Tombstoned)
	}
	if r := mirror(t, pool, "acme")["7"]; r.deleted {
		t.Fatal("a row newer than the listing's start was tombstoned")
	}
	src.tick(10 * time.Minute)
	reconcile(t, p, clients.TimeEntries)
	assertConverged(t, pool, src)
}

func TestReconcileCeilingRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := onDay(today(), "x", "x", "x", "x", "x")
	pool := pgtest.DB(t)
	p := newPoller(t, poller.Params{Pool: pool, Logger: zerolog.Nop(),
		Sources: []poller.Source{{Source: src, MaxTombstones: 2}}})
	incremental(t, p)
	for i := 1; i <= 4; i++ {
		src.remove(i)
	}
	src.tick(10 * time.Minute)
	_, err := p.Reconcile(ctx, "acme")
	if err == nil || !strings.Contains(err.Error(), "4") {
		t.Fatalf("reconcile over the ceiling: %v", err)
	}
	assertNoneTombstoned(t, pool, "although the ceiling refused")
}

func TestReconcileOfAnEmptyListingTombstonesEverything(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, p, pool := syncedToday(t, "x", "y")
	src.remove(1)
	src.remove(2)
	src.tick(10 * time.Minute)
	if res := reconcile(t, p); res[0].Counts.Tombstoned != 2 {
		t.Fatalf("tombstoned %d, want 2", res[0].Counts.Tombstoned)
	}
	assertConverged(t, pool, src)
	// An idle incremental pass (no records) is still recorded.
	incremental(t, p)
	runs, err := p.Store().Runs(ctx, cursor.RunsParams{Source: "acme"})
	if err != nil || runs[0].Status != cursor.StatusOK || runs[0].Kind != cursor.KindIncremental {
		t.Fatalf("last run %+v (%v)", runs[0], err)
	}
}

// falselyTombstone has a reconcile, ten minutes on, miss the live record
// id of source "acme" (a listing that shifted): it is tombstoned.
func falselyTombstone(t *testing.T, src *fakeSource, p *poller.Poller, pool *pgxpool.Pool, id string) {
	t.Helper()
	src.tick(10 * time.Minute)
	src.mu.Lock()
	src.hideOnce = map[string]bool{id: true}
	src.mu.Unlock()
	reconcile(t, p)
	if !mirror(t, pool, "acme")[id].deleted {
		t.Fatal("the missed record was not tombstoned (test setup)")
	}
}

// A reconcile whose listing missed a live record tombstones it; the next
// listing that returns it brings it back (the source says it is live).
func TestFalseTombstoneHealsAtTheNextListing(t *testing.T) {
	t.Parallel()
	src, p, pool := syncedToday(t, "x", "y")
	falselyTombstone(t, src, p, pool, "2")
	reconcile(t, p)
	assertConverged(t, pool, src)
}

func TestDaemonSkipsTicksWhilePassRunsAndStopsPromptly(t *testing.T) {
	t.Parallel()
	src := onDay(day, "a")
	block := make(chan struct{})
	var blocked sync.Once
	src.onPage = func(clients.Window, int) {
		blocked.Do(func() { <-block })
	}
	var logs logtest.Buffer
	p := newPoller(t, poller.Params{Pool: pgtest.DB(t), Sources: []poller.Source{{Source: src}}, Logger: zerolog.New(&logs)})
	d := startDaemon(t, p, poller.Schedule{Source: "acme", Incremental: "@every 1s"})
	waitForLog(t, &logs, 10*time.Second, "still running; skipping")
	// A normal state, not a warning (issue 26, 5).
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "still running; skipping") && !strings.Contains(l, `"level":"info"`) {
			t.Errorf("skipped tick logged as %s", l)
		}
	}
	close(block)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("stop took %v", took)
	}
	if !strings.Contains(logs.String(), `"source":"acme"`) {
		t.Fatal("log lines lack the source")
	}
}

func TestDaemonBacksOffAfterFailureAndRecovers(t *testing.T) {
	t.Parallel()
	src := onDay(day, "a")
	src.failPage = 1
	var logs logtest.Buffer
	p := newPoller(t, poller.Params{Pool: pgtest.DB(t), Sources: []poller.Source{{Source: src}}, Logger: zerolog.New(&logs)})
	startDaemon(t, p, poller.Schedule{Source: "acme", Incremental: "@every 1s"})
	waitForLog(t, &logs, 10*time.Second, "backing off after failures")
	if !strings.Contains(logs.String(), `"level":"error"`) || !strings.Contains(logs.String(), "pass failed") {
		t.Fatalf("failure not reported:\n%s", logs.String())
	}
}

func TestDaemonOwnsItsSourcesAndRunsQueuedBackfills(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, from := daily(9, "x"), backfillFrom
	pool := pgtest.DB(t)
	var logs logtest.Buffer
	p := newPoller(t, poller.Params{Pool: pool, Sources: []poller.Source{{Source: src, WindowDays: 3}}, Logger: zerolog.New(&logs)})
	startDaemon(t, p, poller.Schedule{Source: "acme", Incremental: "@every 1h"})

	// Another process (the CLI) sees the source owned, and queues instead.
	other := newPoller(t, poller.Params{Pool: pool, Sources: []poller.Source{{Source: src}}, Logger: zerolog.Nop()})
	waitForLog(t, &logs, 10*time.Second, "this daemon now owns the source")
	if _, err := other.TakeOwnership(ctx, "acme"); !errors.Is(err, poller.ErrBusy) {
		t.Fatalf("another process took the owned source: %v", err)
	}
	q, err := other.Store().QueueBackfill(ctx, cursor.BackfillParams{Source: "acme", Resource: "time_entries",
		From: from, To: from.AddDays(8), WindowDays: 3})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, func() bool {
		b, err := other.Store().Backfill(ctx, q.ID)
		return err == nil && b.Status == cursor.BackfillDone && b.WindowsDone == 3
	}, "the daemon to run the queued backfill")
}

// A reconcile tick that comes while an incremental pass runs is not
// dropped: it runs right after (daily reconciles coincide with ticks).
func TestDaemonRunsACoincidingReconcileAfterThePass(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := onDay(today(), "a")
	block := make(chan struct{})
	var once sync.Once
	src.onPage = func(w clients.Window, _ int) {
		if !w.ByDate() {
			once.Do(func() { <-block })
		}
	}
	pool := pgtest.DB(t)
	var logs logtest.Buffer
	p := newPoller(t, poller.Params{Pool: pool, Sources: []poller.Source{{Source: src}}, Logger: zerolog.New(&logs)})
	startDaemon(t, p, poller.Schedule{Source: "acme", Incremental: "@every 1h", Reconcile: "@every 1s"})
	waitForLog(t, &logs, 10*time.Second, "the reconcile follows it")
	close(block)
	waitFor(t, 10*time.Second, func() bool {
		var n int
		_ = pool.QueryRow(ctx, `SELECT count(*) FROM sync_runs WHERE kind = 'reconcile' AND status = 'ok'`).Scan(&n)
		return n > 0
	}, "the reconcile to run after the pass")
}

// A backfill stops when its leases are gone (the lease connection dropped):
// a new owner elsewhere must not share the source's budget with it.
func TestBackfillStopsWhenItsLeaseIsLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, from := daily(9, "x"), backfillFrom
	pool := pgtest.DB(t)
	p := newPoller(t, poller.Params{Pool: pool, Sources: []poller.Source{{Source: src, WindowDays: 3}}, Logger: zerolog.Nop()})
	var windows int
	src.onPage = func(w clients.Window, page int) {
		if page == 1 {
			windows++
			if windows == 1 {
				// Cut the session holding the advisory locks, as a
				// Postgres restart or a network cut would (and wait until
				// they are gone: termination is asynchronous).
				cutLeaseSessions(t, pool)
			}
		}
	}
	_, err := p.Backfill(ctx, poller.BackfillParams{Source: "acme", Resource: clients.TimeEntries, From: from, To: from.AddDays(8)})
	if !errors.Is(err, poller.ErrLeaseLost) {
		t.Fatalf("backfill after the lease connection dropped: %v, want ErrLeaseLost", err)
	}
	if windows != 1 {
		t.Fatalf("%d windows listed after the lease was lost", windows-1)
	}
}

// TestDaemonSurvivesPostgresRestart runs the daemon against a private
// cluster, restarts the server under it, and checks that passes fail while
// it is down, and that the daemon recovers by itself afterwards (pool and
// lease connection reconnect) and the mirror converges.
func TestDaemonSurvivesPostgresRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own PostgreSQL cluster")
	}
	if os.Getenv("DATABASE_URL") != "" {
		t.Skip("needs a private cluster it can restart; DATABASE_URL points at a shared server")
	}
	t.Parallel()
	ctx := context.Background()
	cl, err := pgcluster.Start(ctx, pgcluster.Options{InMemory: true})
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	t.Cleanup(func() { _ = cl.Stop() })
	url := cl.URL("postgres")
	if _, err := migrations.Up(ctx, url); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	src := onDay(day, "a")
	var logs logtest.Buffer
	p := newPoller(t, poller.Params{Pool: pool, Sources: []poller.Source{{Source: src}}, Logger: zerolog.New(&logs)})
	// A sub-second schedule: the restart must be seen by at least one tick.
	startDaemon(t, p, poller.Schedule{Source: "acme", Incremental: "@every 1s"})
	waitFor(t, 10*time.Second, func() bool { return len(mirror(t, pool, "acme")) == 1 }, "first pass")

	if err := cl.Restart(ctx, 2500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	src.tick(time.Minute)
	src.put(2, day, "after restart")
	// Back-off after a failure is 15 s at first; allow for it.
	waitFor(t, 40*time.Second, func() bool {
		m := mirror(t, pool, "acme")
		return len(m) == 2
	}, "convergence after the restart")
	assertConverged(t, pool, src)
	if !strings.Contains(logs.String(), "pass failed") {
		t.Log("no pass failed while the server was down (it restarted between ticks)")
	}
}

// TestRunsWrittenOnceAtTheirEnd holds how incremental runs are recorded: an
// idle pass's run appears only when it is done, as ok, with its counts; a
// pass that lasts shows as running meanwhile, and its end completes that
// same row.
func TestRunsWrittenOnceAtTheirEnd(t *testing.T) {
	t.Parallel()
	src, p, pool := syncedToday(t, "a", "b")
	runs := func() map[string]string {
		t.Helper()
		rows, err := pool.Query(context.Background(), `SELECT run_id, status FROM sync_runs`)
		if err != nil {
			t.Fatal(err)
		}
		m, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (kv [2]string, err error) {
			err = r.Scan(&kv[0], &kv[1])
			return kv, err
		})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, kv := range m {
			out[kv[0]] = kv[1]
		}
		return out
	}
	res := incremental(t, p) // idle: the overlap re-delivers both entries
	if got := runs()[res[0].RunID]; got != "ok" || res[0].Counts.Unchanged != 2 {
		t.Fatalf("idle run %s: status %q, counts %+v", res[0].RunID, got, res[0].Counts)
	}

	release := make(chan struct{})
	var once sync.Once
	src.onPage = func(clients.Window, int) { once.Do(func() { <-release }) }
	done := make(chan []poller.Result)
	go func() { done <- incremental(t, p) }()
	var running string
	waitFor(t, 10*time.Second, func() bool {
		for id, st := range runs() {
			if st == "running" {
				running = id
			}
		}
		return running != ""
	}, "the lasting pass to show as running")
	close(release)
	res = <-done
	if res[0].RunID != running {
		t.Fatalf("the running row is %s, the pass was %s", running, res[0].RunID)
	}
	if got := runs(); got[running] != "ok" || len(got) != 3 {
		t.Fatalf("after the lasting pass: %v", got)
	}
}

// The daemon runs at most its slots' worth of passes at once; the other
// sources' ticks wait for a slot instead of all running together (a cold
// start over thousands of sources), and every one of them runs.
func TestDaemonBoundsConcurrentPasses(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	inFlight, most := 0, 0
	var srcs []*fakeSource
	var scheds []poller.Schedule
	for i := range 6 {
		src := newFakeSource(fmt.Sprintf("src%d", i), t0)
		src.put(1, day, "x")
		src.onPage = func(clients.Window, int) {
			mu.Lock()
			inFlight++
			most = max(most, inFlight)
			mu.Unlock()
			time.Sleep(50 * time.Millisecond)
			mu.Lock()
			inFlight--
			mu.Unlock()
		}
		srcs = append(srcs, src)
		scheds = append(scheds, poller.Schedule{Source: src.name, Incremental: "@every 1h"})
	}
	p, pool := setup(t, srcs...)
	d, err := poller.NewDaemon(p, config.CronParser, scheds)
	if err != nil {
		t.Fatal(err)
	}
	d.SetMaxConcurrentPasses(2)
	d.Start(context.Background(), true)
	t.Cleanup(func() { _ = d.Stop(context.Background()) })
	waitFor(t, 10*time.Second, func() bool {
		var n int
		_ = pool.QueryRow(context.Background(), `SELECT count(*) FROM time_entries`).Scan(&n)
		return n == len(srcs)
	}, "every source's first pass")
	mu.Lock()
	defer mu.Unlock()
	if most > 2 {
		t.Fatalf("%d passes ran at once, the daemon has 2 slots", most)
	}
}

// A pass gives its slot back while its source keeps it waiting (an hour
// for its quota, say): with one slot, the other source's ticks go on.
func TestLongWaitGivesItsSlotBack(t *testing.T) {
	t.Parallel()
	slow, other := newFakeSource("slow", t0), newFakeSource("other", t0)
	slow.put(1, day, "x")
	other.put(1, day, "x")
	waiting := make(chan struct{})
	var once sync.Once
	slow.wait = func(ctx context.Context, _ int) {
		slow.mu.Lock()
		second := slow.lists > 1
		slow.mu.Unlock()
		if second { // its first pass ran; the next one waits "for its quota"
			once.Do(func() { close(waiting) })
			_ = httpx.Sleep(ctx, time.Minute)
		}
	}
	p, _ := setup(t, slow, other)
	d, err := poller.NewDaemon(p, config.CronParser, []poller.Schedule{
		{Source: "slow", Incremental: "@every 1s"}, {Source: "other", Incremental: "@every 1s"}})
	if err != nil {
		t.Fatal(err)
	}
	d.SetMaxConcurrentPasses(1)
	d.Start(context.Background(), true)
	t.Cleanup(func() { _ = d.Stop(context.Background()) })
	select {
	case <-waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow source's second pass never started")
	}
	other.mu.Lock()
	before := other.lists
	other.mu.Unlock()
	waitFor(t, 10*time.Second, func() bool {
		other.mu.Lock()
		defer other.mu.Unlock()
		return other.lists >= before+2
	}, "the other source's ticks while the slow one waits")
}
