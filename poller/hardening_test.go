package poller_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/cursor"
	"github.com/tidemarkhq/tidemark/internal/logtest"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/lease"
	"github.com/tidemarkhq/tidemark/poller"
	"github.com/tidemarkhq/tidemark/schema"
)

// cutLeaseSessions kills the sessions holding advisory locks in the test's
// database, as a Postgres restart or a network cut would.
func cutLeaseSessions(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`); err != nil {
		t.Fatal(err)
	}
	// Termination is asynchronous: wait until the locks are gone.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("advisory locks still held 10 s after their sessions were terminated")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Finding 3: a page's transaction must not stay open across the wait for
// the next page. With idle_in_transaction_session_timeout under the spacing
// between requests, a pass that holds a page's transaction open through the
// wait dies at its first commit, every time.
func TestNoTransactionOpenAcrossTheWaitBetweenPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := newFakeSource("acme", t0)
	for i := 0; i < 7; i++ {
		src.put(i+1, day, "x") // 3 pages of 3
	}
	url := pgtest.URL(t)
	admin, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET idle_in_transaction_session_timeout = %L', current_database(), '1s'); END $$`); err != nil {
		t.Fatal(err)
	}
	admin.Close()
	pool, err := pgxpool.New(ctx, url) // new sessions take the setting
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	p := newPoller(t, poller.Params{Pool: pool, Sources: []poller.Source{{Source: src}}, Logger: zerolog.New(zerolog.NewTestWriter(t))})
	// The limiter's spacing (or a Retry-After, or a quota wait) between
	// pages: 3 s, three times the idle-in-transaction timeout.
	src.onPage = func(_ clients.Window, page int) {
		if page > 1 {
			time.Sleep(3 * time.Second)
		}
	}
	res, err := p.Incremental(ctx, "acme")
	if err != nil {
		t.Fatalf("multi-page pass with 3 s between pages and a 1 s idle-in-transaction timeout: %v", err)
	}
	if res[0].Counts.Inserted != 7 || res[0].HighWaterAfter.IsZero() {
		t.Fatalf("pass result %+v", res[0])
	}
	assertConverged(t, pool, src)
}

// Finding 4: after the lease session dies, a reconnect (any later
// TryAcquire of this process) must not make a backfill believe it still
// holds its lease while another replica runs the same backfill.
func TestBackfillStopsWhenItsLeaseIsLostEvenAfterAReconnect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, from := daily(9, "x"), backfillFrom
	pool := pgtest.DB(t)
	url := pool.Config().ConnString()
	mine, other := lease.New(url), lease.New(url)
	defer other.Close()
	p := newPoller(t, poller.Params{Pool: pool, Sources: []poller.Source{{Source: src, WindowDays: 3}},
		Logger: zerolog.Nop(), Leaser: mine})
	var windows int
	src.onPage = func(w clients.Window, page int) {
		if page != 1 {
			return
		}
		windows++
		if windows == 1 {
			cutLeaseSessions(t, pool)
			// Another replica takes the backfill over...
			if _, err := other.TryAcquire(ctx, "backfill:acme"); err != nil {
				t.Errorf("other replica: %v", err)
			}
			// ...and this process reconnects for an unrelated lease.
			if _, err := mine.TryAcquire(ctx, "owner:someone-else"); err != nil {
				t.Errorf("reconnect: %v", err)
			}
		}
	}
	_, err := p.Backfill(ctx, poller.BackfillParams{Source: "acme", Resource: clients.TimeEntries, From: from, To: from.AddDays(8)})
	if !errors.Is(err, poller.ErrLeaseLost) {
		t.Fatalf("backfill after its lease went to another replica: %v, want ErrLeaseLost", err)
	}
	if windows != 1 {
		t.Fatalf("%d windows listed after the lease was lost", windows-1)
	}
	bfs, err := p.Store().Backfills(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if len(bfs) != 1 || bfs[0].WindowsDone != 0 {
		t.Fatalf("the window listed under a lost lease was recorded as done: %+v", bfs)
	}
}

// Finding 4, incremental: a pass whose lease was lost mid-pass (and is now
// held elsewhere) does not move the cursor, even though this process has
// reconnected in between.
func TestIncrementalDoesNotAdvanceUnderALostLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := newFakeSource("acme", t0)
	for i := 0; i < 5; i++ {
		src.put(i+1, day, "x")
	}
	pool := pgtest.DB(t)
	url := pool.Config().ConnString()
	mine, other := lease.New(url), lease.New(url)
	defer other.Close()
	p := newPoller(t, poller.Params{Pool: pool, Sources: []poller.Source{{Source: src}}, Logger: zerolog.Nop(), Leaser: mine})
	src.onPage = func(_ clients.Window, page int) {
		if page == 2 {
			cutLeaseSessions(t, pool)
			if _, err := other.TryAcquire(ctx, poller.PassLease("acme")); err != nil {
				t.Errorf("other replica: %v", err)
			}
			if _, err := mine.TryAcquire(ctx, "owner:someone-else"); err != nil {
				t.Errorf("reconnect: %v", err)
			}
		}
	}
	_, err := p.Incremental(ctx, "acme")
	if !errors.Is(err, poller.ErrLeaseLost) {
		t.Fatalf("pass whose lease went elsewhere: %v, want ErrLeaseLost", err)
	}
	if hw := highWater(t, p, "acme"); !hw.IsZero() {
		t.Fatalf("cursor moved to %s under a lost lease", hw)
	}
}

// Finding 10: a daemon that stops mid-backfill hands the backfill back to
// the queue without ever marking it cancelled or failed, which its follower
// (tidemark backfill) would take as the end.
func TestInterruptedQueuedBackfillNeverLooksFinished(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, from := daily(9, "x"), backfillFrom
	pool := pgtest.DB(t)
	// Every status a backfill passes through, however briefly.
	if _, err := pool.Exec(ctx, `
		CREATE TABLE backfill_status_log (id bigint, status text);
		CREATE FUNCTION log_backfill_status() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO backfill_status_log VALUES (NEW.id, NEW.status); RETURN NEW; END $$;
		CREATE TRIGGER backfill_status_log AFTER INSERT OR UPDATE OF status ON backfills
			FOR EACH ROW EXECUTE FUNCTION log_backfill_status();`); err != nil {
		t.Fatal(err)
	}
	var logs logtest.Buffer
	p := newPoller(t, poller.Params{Pool: pool, Sources: []poller.Source{{Source: src, WindowDays: 3}}, Logger: zerolog.New(&logs)})
	inWindow := make(chan struct{})
	var once sync.Once
	src.onPage = func(w clients.Window, page int) {
		if w.ByDate() && w.From == from.AddDays(3) {
			once.Do(func() { close(inWindow) })
			time.Sleep(300 * time.Millisecond)
		}
	}
	d := startDaemon(t, p, poller.Schedule{Source: "acme", Incremental: "@every 1h"})
	waitForLog(t, &logs, 10*time.Second, "this daemon now owns the source")
	q, err := p.Store().QueueBackfill(ctx, cursor.BackfillParams{Source: "acme", Resource: "time_entries",
		From: from, To: from.AddDays(8), WindowDays: 3})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-inWindow:
	case <-time.After(15 * time.Second):
		t.Fatal("the daemon never reached the backfill's second window")
	}
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := p.Store().Backfill(ctx, q.ID)
	if err != nil {
		t.Fatal(err)
	}
	if b.Status != cursor.BackfillRequeued || b.WindowsDone == 3 {
		t.Fatalf("after the daemon stopped mid-backfill: status %s, %d windows done; want requeued before the end", b.Status, b.WindowsDone)
	}
	rows, err := pool.Query(ctx, `SELECT status FROM backfill_status_log WHERE id = $1`, q.ID)
	if err != nil {
		t.Fatal(err)
	}
	seen, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range seen {
		if cursor.Final(s) {
			t.Fatalf("the backfill passed through %q on its way back to the queue (statuses %v)", s, seen)
		}
	}
	// A new daemon (a replica, or this one restarted) resumes it to the end.
	p.Close()
	src.onPage = nil
	p2 := newPoller(t, poller.Params{Pool: pool, Sources: []poller.Source{{Source: src, WindowDays: 3}}, Logger: zerolog.New(&logs)})
	startDaemon(t, p2, poller.Schedule{Source: "acme", Incremental: "@every 1h"})
	waitFor(t, 15*time.Second, func() bool {
		b, err := p.Store().Backfill(ctx, q.ID)
		return err == nil && b.Status == cursor.BackfillDone && b.WindowsDone == 3
	}, "the requeued backfill to be resumed and finished")
}

// usersFail is a source whose users listing always fails (a member token
// with 403 on /users), beside healthy time entries.
type usersFail struct{ *fakeSource }

func (u usersFail) Resources() []clients.Resource {
	return []clients.Resource{clients.Users, clients.TimeEntries}
}

func (u usersFail) List(ctx context.Context, r clients.Resource, w clients.Window, fn func(context.Context, clients.Page) error) error {
	if r == clients.Users {
		return errors.New("GET /users: HTTP 403")
	}
	return u.fakeSource.List(ctx, r, w, fn)
}

func countRuns(t *testing.T, pool *pgxpool.Pool, resource, kind, status string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM sync_runs WHERE resource = $1 AND kind = $2 AND status = $3`,
		resource, kind, status).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Finding 8: one persistently failing resource neither backs off the
// healthy ones nor makes the scheduled reconcile of the healthy ones skip.
func TestDaemonIsolatesAFailingResourceAndStillReconciles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := onDay(today(), "a")
	pool := pgtest.DB(t)
	p := newPoller(t, poller.Params{Pool: pool, Sources: []poller.Source{{Source: usersFail{src}}}, Logger: zerolog.Nop()})
	startDaemon(t, p, poller.Schedule{Source: "acme", Incremental: "@every 1s", Reconcile: "@every 2s"})
	waitFor(t, 20*time.Second, func() bool {
		return countRuns(t, pool, "time_entries", "incremental", "ok") >= 4 && countRuns(t, pool, "time_entries", "reconcile", "ok") >= 1
	}, "healthy time entries to keep syncing and reconciling beside failing users")
	if n := countRuns(t, pool, "users", "incremental", "failed"); n > 2 {
		t.Fatalf("users failed %d times in a few seconds: its own back-off is not applied", n)
	}
	states, err := p.Store().PassStates(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	var backingOff bool
	for _, s := range states {
		if s.Resource == "users" && s.Kind == "incremental" && s.Failures > 0 && s.BackoffUntil != nil && s.LastError != "" {
			backingOff = true
		}
		if s.Resource == "time_entries" && s.Failures > 0 {
			t.Fatalf("time entries carry failures: %+v", s)
		}
	}
	if !backingOff {
		t.Fatalf("users' back-off is not recorded for tidemark cursors: %+v", states)
	}
}

// Finding 8: a due reconcile is kept until it has run, across a restart: a
// daemon that finds one due runs it at its next tick.
func TestDueReconcileRunsAfterARestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := onDay(today(), "a")
	pool := pgtest.DB(t)
	p := newPoller(t, poller.Params{Pool: pool, Sources: []poller.Source{{Source: src}}, Logger: zerolog.Nop()})
	// The previous daemon saw the reconcile tick but never ran it.
	if err := p.Store().MarkReconcileDue(ctx, "acme", []string{"time_entries"}, time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, p, poller.Schedule{Source: "acme", Incremental: "@every 1s", Reconcile: "0 0 1 1 *"})
	waitFor(t, 10*time.Second, func() bool { return countRuns(t, pool, "time_entries", "reconcile", "ok") == 1 }, "the due reconcile to run")
	waitFor(t, 10*time.Second, func() bool {
		states, err := p.Store().PassStates(ctx, "acme")
		return err == nil && len(states) == 1 && states[0].DueSince == nil
	}, "the reconcile to be no longer due")
	time.Sleep(2 * time.Second)
	if n := countRuns(t, pool, "time_entries", "reconcile", "ok"); n != 1 {
		t.Fatalf("the reconcile ran %d times; once is what was due", n)
	}
}

// scopedSource lists time entries by date for some users only (Clockify's
// per-user lists with user_ids), and says so.
type scopedSource struct {
	*fakeSource
	users []string
}

func (s scopedSource) ListScope(r clients.Resource, w clients.Window) clients.Scope {
	if r == clients.TimeEntries && w.ByDate() {
		return clients.Scope{UserIDs: s.users}
	}
	return clients.Scope{}
}

func (s scopedSource) List(ctx context.Context, r clients.Resource, w clients.Window, fn func(context.Context, clients.Page) error) error {
	if !w.ByDate() {
		return s.fakeSource.List(ctx, r, w, fn)
	}
	return s.fakeSource.List(ctx, r, w, func(ctx context.Context, pg clients.Page) error {
		kept := pg.Records[:0]
		for _, rec := range pg.Records {
			for _, u := range s.users {
				if schema.TimeEntries.Text(rec, "user_id") == u {
					kept = append(kept, rec)
				}
			}
		}
		pg.Records = kept
		return fn(ctx, pg)
	})
}

// Finding 1: a reconcile that listed only some users' entries tombstones
// only inside that scope; every other user's live entries stay live.
func TestScopedReconcileLeavesOtherUsersAlone(t *testing.T) {
	t.Parallel()
	fs := beforeToday(9)
	for i := 1; i <= 9; i++ {
		fs.recs[strconv.Itoa(i)].user = []string{"alice", "bob", "carol"}[i%3]
	}
	pool := pgtest.DB(t)
	p := newPoller(t, poller.Params{Pool: pool, Sources: []poller.Source{{Source: scopedSource{fs, []string{"alice"}}, MaxTombstones: 100}},
		Logger: zerolog.New(zerolog.NewTestWriter(t))})
	// Incremental passes read everyone's entries (the workspace-wide feed).
	incremental(t, p)
	fs.remove(3) // alice's
	fs.tick(10 * time.Minute)
	res := reconcile(t, p, clients.TimeEntries)
	m := mirror(t, pool, "acme")
	for id, r := range m {
		if r.deleted != (id == "3") {
			t.Fatalf("after a reconcile scoped to alice: id %s deleted=%v (only alice's deleted entry 3 may be)", id, r.deleted)
		}
	}
	if res[0].Counts.Tombstoned != 1 {
		t.Fatalf("tombstoned %d, want 1", res[0].Counts.Tombstoned)
	}
}

// cappedOnce fails its first listing with clients.ErrCapped (a walk that
// would not hold still), then lists normally.
type cappedOnce struct {
	*fakeSource
	mu     sync.Mutex
	capped bool
}

func (c *cappedOnce) List(ctx context.Context, r clients.Resource, w clients.Window, fn func(context.Context, clients.Page) error) error {
	c.mu.Lock()
	first := !c.capped
	c.capped = true
	c.mu.Unlock()
	if first {
		return fmt.Errorf("time_entries: %w: still shifting after 3 walks", clients.ErrCapped)
	}
	return c.fakeSource.List(ctx, r, w, fn)
}

// A listing that shifted under its walks (ErrCapped) fails that pass, but
// does not back the resource off: the next tick lists again.
func TestCappedListingIsRetriedAtTheNextTick(t *testing.T) {
	t.Parallel()
	src := onDay(day, "a")
	pool := pgtest.DB(t)
	p := newPoller(t, poller.Params{Pool: pool, Sources: []poller.Source{{Source: &cappedOnce{fakeSource: src}}}, Logger: zerolog.Nop()})
	startDaemon(t, p, poller.Schedule{Source: "acme", Incremental: "@every 1s"})
	// The default back-off after a failure is 15 s; the retry must come at
	// the next tick instead.
	waitFor(t, 5*time.Second, func() bool { return countRuns(t, pool, "time_entries", "incremental", "ok") >= 1 },
		"the capped listing to be listed again at the next tick")
}

// noClockT0 and noClockDay are when the no-clock tests' records change.
var (
	noClockT0  = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	noClockDay = clients.DateOf(noClockT0)
)

// noClock is a source behind something that drops the Date header (a
// proxy): its pages carry no source clock.
type noClock struct{ *fakeSource }

func (n noClock) List(ctx context.Context, r clients.Resource, w clients.Window, fn func(context.Context, clients.Page) error) error {
	return n.fakeSource.List(ctx, r, w, func(ctx context.Context, pg clients.Page) error {
		pg.SourceTime = time.Time{}
		return fn(ctx, pg)
	})
}

// Without the source's clock, the cursor of a walk longer than the overlap
// must not move to the newest version of a later page: a record on a page
// already served may have been edited before that version and after its
// page went, and the next window would start past its edit. The first
// page's newest version bounds the move instead.
func TestNoSourceClockDoesNotSkipAnEditBehindTheWalk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0, day := noClockT0, noClockDay
	src := newFakeSource("acme", t0.Add(30*time.Minute))
	for i := 1; i <= 6; i++ {
		src.putAt(i, t0, day, "v1")
	}
	src.putAt(5, t0.Add(30*time.Minute), day, "v1") // on page 2
	pool := pgtest.DB(t)
	const overlap = 200 * time.Millisecond
	p := newPoller(t, poller.Params{Pool: pool, Sources: []poller.Source{{Source: noClock{src}, Overlap: overlap}}, Logger: zerolog.Nop()})
	src.onPage = func(_ clients.Window, page int) {
		if page == 2 {
			src.onPage = nil
			src.putAt(1, t0.Add(5*time.Minute), day, "v2") // page 1 is served
			time.Sleep(2 * overlap)                        // a walk longer than the overlap
		}
	}
	for range 2 {
		if _, err := p.Incremental(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
	}
	assertConverged(t, pool, src)
}

// usersGated serves no users (a right the token lacks, a feature the plan
// lacks), and counts the asks.
type usersGated struct {
	*fakeSource
	asks *atomic.Int64
}

func (u usersGated) Resources() []clients.Resource {
	return []clients.Resource{clients.Users, clients.TimeEntries}
}

func (u usersGated) List(ctx context.Context, r clients.Resource, w clients.Window, fn func(context.Context, clients.Page) error) error {
	if r == clients.Users {
		u.asks.Add(1)
		return fmt.Errorf("users: not in the plan: %w", clients.ErrUnsupported)
	}
	return u.fakeSource.List(ctx, r, w, fn)
}

// A resource the source does not serve is skipped, and asked about again
// only after a while: every ask costs a request of the source's budget.
func TestDaemonAsksForAnUnavailableResourceRarely(t *testing.T) {
	t.Parallel()
	var asks atomic.Int64
	pool := pgtest.DB(t)
	p := newPoller(t, poller.Params{Pool: pool, Sources: []poller.Source{{Source: usersGated{onDay(today(), "a"), &asks}}}, Logger: zerolog.Nop()})
	startDaemon(t, p, poller.Schedule{Source: "acme", Incremental: "@every 1s"})
	waitFor(t, 20*time.Second, func() bool { return countRuns(t, pool, "time_entries", "incremental", "ok") >= 4 },
		"time entries to keep syncing beside the unavailable users")
	if n := asks.Load(); n != 1 {
		t.Fatalf("users asked for %d times in four ticks, want once", n)
	}
}

// emptyFirst: no Date header, and a first page with no records (a nested
// listing whose first parent has no children).
type emptyFirst struct{ *fakeSource }

func (n emptyFirst) List(ctx context.Context, r clients.Resource, w clients.Window, fn func(context.Context, clients.Page) error) error {
	if err := fn(ctx, clients.Page{Resource: r, Number: 1}); err != nil {
		return err
	}
	return n.fakeSource.List(ctx, r, w, func(ctx context.Context, pg clients.Page) error {
		pg.SourceTime = time.Time{}
		pg.Number++
		return fn(ctx, pg)
	})
}

// Without a Date header, a listing shorter than the overlap moves the
// cursor to the newest version seen, even behind an empty first page.
func TestNoSourceClockEmptyFirstPageStillMovesTheCursor(t *testing.T) {
	t.Parallel()
	t0, day := noClockT0, noClockDay
	src := newFakeSource("acme", t0)
	for i := 1; i <= 4; i++ {
		src.putAt(i, t0.Add(time.Duration(i)*time.Minute), day, "v1")
	}
	pool := pgtest.DB(t)
	p := newPoller(t, poller.Params{Pool: pool, Sources: []poller.Source{{Source: emptyFirst{src}, Overlap: 2 * time.Minute}}, Logger: zerolog.Nop()})
	for range 3 {
		res := incremental(t, p)
		if res[0].HighWaterAfter.IsZero() {
			t.Fatalf("after a complete listing of 4 records (newest %s) the cursor is still zero: every pass lists from the beginning", t0.Add(4*time.Minute))
		}
	}
}

// Without a Date header, a short listing whose first page holds only old
// records does not hold the cursor back.
func TestNoSourceClockOldFirstPageDoesNotStallTheCursor(t *testing.T) {
	t.Parallel()
	t0, day := noClockT0, noClockDay
	src := newFakeSource("acme", t0)
	for i := 1; i <= 6; i++ {
		src.putAt(i, t0, day, "v1")
	}
	pool := pgtest.DB(t)
	p := newPoller(t, poller.Params{Pool: pool, Sources: []poller.Source{{Source: noClock{src}, Overlap: 2 * time.Minute}}, Logger: zerolog.Nop()})
	incremental(t, p)
	// ids 4..6 (page 2) keep changing for a day; ids 1..3 (page 1) do not.
	for h := 1; h <= 24; h++ {
		for i := 4; i <= 6; i++ {
			src.putAt(i, t0.Add(time.Duration(h)*time.Hour), day, "v2")
		}
		incremental(t, p)
	}
	if hw := highWater(t, p, "acme"); hw.Before(t0.Add(time.Hour)) {
		t.Fatalf("after 24 hourly passes over changes up to %s the cursor is %s: the window keeps growing", t0.Add(24*time.Hour), hw)
	}
}
