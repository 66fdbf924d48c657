package cursor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"pgregory.net/rapid"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/cursor"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/upsert"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// setup returns a fresh migrated database and a Store on it.
func setup(t *testing.T) (context.Context, *pgxpool.Pool, *cursor.Store) {
	t.Helper()
	t.Parallel()
	db := pgtest.DB(t)
	return t.Context(), db, cursor.New(db)
}

func mustLoad(t *testing.T, s *cursor.Store, source, resource string) cursor.Cursor {
	t.Helper()
	c, err := s.Load(t.Context(), source, resource)
	if err != nil {
		t.Fatalf("Load(%s, %s): %v", source, resource, err)
	}
	return c
}

func advance(t *testing.T, db cursor.DB, source, resource string, to time.Time) {
	t.Helper()
	if err := cursor.Advance(t.Context(), db, source, resource, to); err != nil {
		t.Fatalf("Advance(%s, %s, %v): %v", source, resource, to, err)
	}
}

func inTx(t *testing.T, db *pgxpool.Pool) pgx.Tx {
	t.Helper()
	tx, err := db.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

func count(t *testing.T, db cursor.DB, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(t.Context(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func TestLoadMissing(t *testing.T) {
	ctx, _, s := setup(t)
	_, err := s.Load(ctx, "acme", "time_entries")
	if !errors.Is(err, cursor.ErrNotFound) {
		t.Fatalf("Load of a missing cursor: got %v, want ErrNotFound", err)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("Load leaks pgx.ErrNoRows: %v", err)
	}
}

func TestAdvance(t *testing.T) {
	ctx, db, s := setup(t)

	// Creates the row.
	advance(t, db, "acme", "time_entries", t0)
	c := mustLoad(t, s, "acme", "time_entries")
	if !c.HighWater.Equal(t0) || c.UpdatedBy != "poller" || c.Source != "acme" || c.Resource != "time_entries" {
		t.Fatalf("after create: %+v", c)
	}
	if c.HighWater.Location() != time.UTC || c.UpdatedAt.Location() != time.UTC {
		t.Fatalf("times not in UTC: %+v", c)
	}

	// Forward.
	t1 := t0.Add(time.Hour)
	advance(t, db, "acme", "time_entries", t1)
	c = mustLoad(t, s, "acme", "time_entries")
	if !c.HighWater.Equal(t1) {
		t.Fatalf("after forward: high water %v, want %v", c.HighWater, t1)
	}

	// Same time: no-op, not even updated_at changes.
	advance(t, db, "acme", "time_entries", t1.In(time.FixedZone("X", 3600)))
	if same := mustLoad(t, s, "acme", "time_entries"); same != c {
		t.Fatalf("same-time advance wrote: %+v, was %+v", same, c)
	}

	// Backward: typed error, nothing written.
	err := cursor.Advance(ctx, db, "acme", "time_entries", t0)
	var be *cursor.BackwardError
	if !errors.As(err, &be) || !errors.Is(err, cursor.ErrBackward) {
		t.Fatalf("backward advance: got %v, want *BackwardError matching ErrBackward", err)
	}
	if be.Source != "acme" || be.Resource != "time_entries" || !be.From.Equal(t1) || !be.To.Equal(t0) {
		t.Fatalf("BackwardError fields: %+v", be)
	}
	if !strings.Contains(err.Error(), "tidemark cursor set") {
		t.Fatalf("BackwardError does not say what to do: %q", err)
	}
	if after := mustLoad(t, s, "acme", "time_entries"); after != c {
		t.Fatalf("backward advance wrote: %+v, was %+v", after, c)
	}

	// Other cursors are independent.
	advance(t, db, "acme", "projects", t0.Add(-time.Hour))
	if got := mustLoad(t, s, "acme", "time_entries").HighWater; !got.Equal(t1) {
		t.Fatalf("advancing another resource changed time_entries: %v", got)
	}
}

func TestAdvanceZero(t *testing.T) {
	ctx, db, s := setup(t)
	// Zero on a missing cursor creates a "never synced" row.
	advance(t, db, "acme", "users", time.Time{})
	if c := mustLoad(t, s, "acme", "users"); !c.HighWater.IsZero() {
		t.Fatalf("zero advance: high water %v, want zero", c.HighWater)
	}
	// Zero again: no-op. Then any time moves it forward from never synced.
	advance(t, db, "acme", "users", time.Time{})
	advance(t, db, "acme", "users", t0)
	// Zero on a synced cursor is backward.
	if err := cursor.Advance(ctx, db, "acme", "users", time.Time{}); !errors.Is(err, cursor.ErrBackward) {
		t.Fatalf("zero advance of a synced cursor: got %v, want ErrBackward", err)
	}
	if c := mustLoad(t, s, "acme", "users"); !c.HighWater.Equal(t0) {
		t.Fatalf("high water %v, want %v", c.HighWater, t0)
	}
}

// TestAdvanceSubMicrosecond: Postgres keeps microseconds; a target that
// differs from the stored one only below that is the same time, not backward.
func TestAdvanceSubMicrosecond(t *testing.T) {
	ctx, db, s := setup(t)
	at := t0.Add(999 * time.Nanosecond)
	advance(t, db, "acme", "tasks", at)
	if err := cursor.Advance(ctx, db, "acme", "tasks", t0.Add(500*time.Nanosecond)); err != nil {
		t.Fatalf("advance within the same microsecond: %v", err)
	}
	if c := mustLoad(t, s, "acme", "tasks"); !c.HighWater.Equal(t0) {
		t.Fatalf("high water %v, want %v", c.HighWater, t0)
	}
}

const insertEntry = `
INSERT INTO time_entries (source, id, spent_date, hours, user_id, project_id, billable, is_locked,
                          is_closed, is_billed, is_running, updated_at, fetched_at, content_hash, raw)
VALUES ('acme', $1, '2026-03-01', 1.5, 'u1', 'p1', true, false, false, false, false, $2, now(), '\x00', '{}')`

// TestAdvanceInTransaction: the poller commits the last page and the cursor
// together; a rollback undoes both, a commit keeps both.
func TestAdvanceInTransaction(t *testing.T) {
	ctx, db, s := setup(t)
	advance(t, db, "acme", "time_entries", t0)
	before := mustLoad(t, s, "acme", "time_entries")
	t1 := t0.Add(time.Hour)

	tx := inTx(t, db)
	if _, err := tx.Exec(ctx, insertEntry, "e1", t1); err != nil {
		t.Fatal(err)
	}
	advance(t, tx, "acme", "time_entries", t1)
	// Inside the transaction the move is visible...
	if c, err := cursor.New(tx).Load(ctx, "acme", "time_entries"); err != nil || !c.HighWater.Equal(t1) {
		t.Fatalf("inside tx: %+v, %v", c, err)
	}
	// ...outside, not yet.
	if c := mustLoad(t, s, "acme", "time_entries"); c != before {
		t.Fatalf("uncommitted advance visible outside: %+v", c)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if c := mustLoad(t, s, "acme", "time_entries"); c != before {
		t.Fatalf("after rollback: %+v, want %+v", c, before)
	}
	if n := count(t, db, `SELECT count(*) FROM time_entries`); n != 0 {
		t.Fatalf("after rollback: %d time entries, want 0", n)
	}

	// A cursor created in a rolled-back transaction does not exist.
	tx = inTx(t, db)
	advance(t, tx, "acme", "projects", t1)
	_ = tx.Rollback(ctx)
	if _, err := s.Load(ctx, "acme", "projects"); !errors.Is(err, cursor.ErrNotFound) {
		t.Fatalf("cursor created in a rolled-back tx: %v", err)
	}

	// Commit keeps both.
	tx = inTx(t, db)
	if _, err := tx.Exec(ctx, insertEntry, "e1", t1); err != nil {
		t.Fatal(err)
	}
	advance(t, tx, "acme", "time_entries", t1)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if c := mustLoad(t, s, "acme", "time_entries"); !c.HighWater.Equal(t1) {
		t.Fatalf("after commit: high water %v, want %v", c.HighWater, t1)
	}
	if n := count(t, db, `SELECT count(*) FROM time_entries WHERE id = 'e1'`); n != 1 {
		t.Fatalf("after commit: %d time entries, want 1", n)
	}
}

// TestAdvanceConcurrent: a second transaction's advance waits for the first
// and is judged against what the first committed.
func TestAdvanceConcurrent(t *testing.T) {
	ctx, db, s := setup(t)
	advance(t, db, "acme", "time_entries", t0)
	t1, t2 := t0.Add(time.Hour), t0.Add(2*time.Hour)

	tx1 := inTx(t, db)
	advance(t, tx1, "acme", "time_entries", t2)

	done := make(chan error, 1)
	go func() {
		tx2, err := db.Begin(ctx)
		if err != nil {
			done <- err
			return
		}
		defer tx2.Rollback(context.Background())
		err = cursor.Advance(ctx, tx2, "acme", "time_entries", t1)
		if err == nil {
			err = tx2.Commit(ctx)
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("second advance did not wait for the first transaction: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	err := <-done
	var be *cursor.BackwardError
	if !errors.As(err, &be) || !be.From.Equal(t2) {
		t.Fatalf("second advance after first committed: got %v, want BackwardError from %v", err, t2)
	}
	if c := mustLoad(t, s, "acme", "time_entries"); !c.HighWater.Equal(t2) {
		t.Fatalf("high water %v, want %v", c.HighWater, t2)
	}
}

type opRun struct {
	kind, status, actor string
	before, after       *time.Time
	finished            bool
}

func operatorRuns(t *testing.T, db cursor.DB, source, resource string) []opRun {
	t.Helper()
	rows, err := db.Query(t.Context(), `
		SELECT kind, status, coalesce(actor, ''), high_water_before, high_water_after, finished_at IS NOT NULL
		FROM sync_runs WHERE source = $1 AND resource = $2 ORDER BY id`, source, resource)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (opRun, error) {
		var r opRun
		err := row.Scan(&r.kind, &r.status, &r.actor, &r.before, &r.after, &r.finished)
		return r, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

func timeEq(a *time.Time, b time.Time) bool {
	if a == nil {
		return b.IsZero()
	}
	return a.Equal(b)
}

func TestSet(t *testing.T) {
	ctx, db, s := setup(t)
	t1 := t0.Add(time.Hour)
	advance(t, db, "acme", "time_entries", t1)

	prev, err := s.Set(ctx, cursor.SetParams{Source: "acme", Resource: "time_entries", To: t0, Actor: "alice@host"})
	if err != nil {
		t.Fatalf("Set backward: %v", err)
	}
	if !prev.HighWater.Equal(t1) || prev.UpdatedBy != "poller" {
		t.Fatalf("Set returned previous %+v, want high water %v by poller", prev, t1)
	}
	c := mustLoad(t, s, "acme", "time_entries")
	if !c.HighWater.Equal(t0) || c.UpdatedBy != "alice@host" {
		t.Fatalf("after Set: %+v", c)
	}
	runs := operatorRuns(t, db, "acme", "time_entries")
	if len(runs) != 1 {
		t.Fatalf("sync_runs after Set: %+v, want one row", runs)
	}
	r := runs[0]
	if r.kind != "cursor_set" || r.status != "ok" || r.actor != "alice@host" || !r.finished ||
		!timeEq(r.before, t1) || !timeEq(r.after, t0) {
		t.Fatalf("cursor_set run: %+v", r)
	}
	// The poller advances from the new position.
	advance(t, db, "acme", "time_entries", t0.Add(time.Minute))

	// Set on a missing cursor creates it; the previous cursor is empty.
	prev, err = s.Set(ctx, cursor.SetParams{Source: "acme", Resource: "users", To: t0, Actor: "bob@host"})
	if err != nil || !prev.HighWater.IsZero() || prev.UpdatedBy != "" {
		t.Fatalf("Set of a missing cursor: %+v, %v", prev, err)
	}
	if runs := operatorRuns(t, db, "acme", "users"); len(runs) != 1 || runs[0].before != nil || !timeEq(runs[0].after, t0) {
		t.Fatalf("cursor_set run of a new cursor: %+v", runs)
	}

	// Refused without actor or time; nothing written.
	if _, err := s.Set(ctx, cursor.SetParams{Source: "acme", Resource: "time_entries", To: t0}); err == nil {
		t.Fatal("Set without actor succeeded")
	}
	if _, err := s.Set(ctx, cursor.SetParams{Source: "acme", Resource: "time_entries", Actor: "a"}); err == nil {
		t.Fatal("Set without time succeeded")
	}
	if n := len(operatorRuns(t, db, "acme", "time_entries")); n != 1 {
		t.Fatalf("refused Set recorded runs: %d", n)
	}
}

// TestSetInCallerTransaction: a Store on a transaction runs Set in a
// savepoint; rolling back the outer transaction undoes the move and record.
func TestSetInCallerTransaction(t *testing.T) {
	ctx, db, s := setup(t)
	advance(t, db, "acme", "time_entries", t0)
	tx := inTx(t, db)
	if _, err := cursor.New(tx).Set(ctx, cursor.SetParams{Source: "acme", Resource: "time_entries", To: t0.Add(-time.Hour), Actor: "a@h"}); err != nil {
		t.Fatal(err)
	}
	_ = tx.Rollback(ctx)
	if c := mustLoad(t, s, "acme", "time_entries"); !c.HighWater.Equal(t0) {
		t.Fatalf("rolled-back Set moved the cursor to %v", c.HighWater)
	}
	if n := len(operatorRuns(t, db, "acme", "time_entries")); n != 0 {
		t.Fatalf("rolled-back Set left %d runs", n)
	}
}

func TestReset(t *testing.T) {
	ctx, db, s := setup(t)
	advance(t, db, "acme", "time_entries", t0)

	prev, err := s.Reset(ctx, cursor.ResetParams{Source: "acme", Resource: "time_entries", Actor: "alice@host"})
	if err != nil {
		t.Fatal(err)
	}
	if !prev.HighWater.Equal(t0) {
		t.Fatalf("Reset returned previous %+v", prev)
	}
	c := mustLoad(t, s, "acme", "time_entries")
	if !c.HighWater.IsZero() || c.UpdatedBy != "alice@host" {
		t.Fatalf("after Reset: %+v", c)
	}
	runs := operatorRuns(t, db, "acme", "time_entries")
	if len(runs) != 1 || runs[0].kind != "cursor_reset" || runs[0].status != "ok" || runs[0].actor != "alice@host" ||
		!timeEq(runs[0].before, t0) || runs[0].after != nil {
		t.Fatalf("cursor_reset run: %+v", runs)
	}
	// Any advance is forward from never synced.
	advance(t, db, "acme", "time_entries", t0.Add(-24*time.Hour))

	// Reset of a missing cursor: ErrNotFound, nothing recorded.
	if _, err := s.Reset(ctx, cursor.ResetParams{Source: "acme", Resource: "nope", Actor: "a@h"}); !errors.Is(err, cursor.ErrNotFound) {
		t.Fatalf("Reset of a missing cursor: %v", err)
	}
	if n := len(operatorRuns(t, db, "acme", "nope")); n != 0 {
		t.Fatalf("Reset of a missing cursor recorded %d runs", n)
	}
}

var (
	jan1  = clients.Date{Year: 2026, Month: 1, Day: 1}
	jan31 = clients.Date{Year: 2026, Month: 1, Day: 31}
)

func startBackfill(t *testing.T, s *cursor.Store, p cursor.BackfillParams) cursor.Backfill {
	t.Helper()
	b, err := s.StartBackfill(t.Context(), p)
	if err != nil {
		t.Fatalf("StartBackfill(%+v): %v", p, err)
	}
	return b
}

func progress(t *testing.T, db cursor.DB, id int64, next clients.Date, n int64) {
	t.Helper()
	if err := cursor.BackfillProgress(t.Context(), db, id, next, n); err != nil {
		t.Fatalf("BackfillProgress(%d, %s): %v", id, next, err)
	}
}

func backfillByID(t *testing.T, s *cursor.Store, id int64) cursor.Backfill {
	t.Helper()
	list, err := s.Backfills(t.Context(), "")
	return findOne(t, list, err, fmt.Sprintf("backfill %d", id), func(b cursor.Backfill) bool { return b.ID == id })
}

// findOne returns the element of a listing that match accepts, and fails
// the test when the listing failed or holds none.
func findOne[T any](t *testing.T, list []T, err error, what string, match func(T) bool) T {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range list {
		if match(v) {
			return v
		}
	}
	t.Fatalf("%s not found", what)
	var zero T
	return zero
}

func TestStartBackfillWindowsTotal(t *testing.T) {
	ctx, _, s := setup(t)
	for _, tc := range []struct {
		from, to clients.Date
		window   int
		total    int
	}{
		{jan1, jan31, 7, 5}, // 31 days
		{jan1, jan31, 31, 1},
		{jan1, jan31, 30, 2},
		{jan1, jan1, 1, 1},
		{jan1, jan31, 1, 31},
		{jan1, jan31, 365, 1},
		{clients.Date{Year: 2024, Month: 2, Day: 28}, clients.Date{Year: 2024, Month: 3, Day: 1}, 1, 3}, // leap day
	} {
		// One source per case: the same range would resume the first.
		src := fmt.Sprintf("s%d-%s-%s", tc.window, tc.from, tc.to)
		b, err := s.StartBackfill(ctx, cursor.BackfillParams{Source: src, Resource: "time_entries", From: tc.from, To: tc.to, WindowDays: tc.window})
		if err != nil {
			t.Fatal(err)
		}
		if b.WindowsTotal != tc.total {
			t.Errorf("%s..%s by %d days: %d windows, want %d", tc.from, tc.to, tc.window, b.WindowsTotal, tc.total)
		}
	}

	for _, p := range []cursor.BackfillParams{
		{Source: "acme", Resource: "time_entries", From: jan31, To: jan1, WindowDays: 7},
		{Source: "acme", Resource: "time_entries", From: jan1, To: jan31, WindowDays: 0},
		{Source: "acme", Resource: "time_entries", To: jan31, WindowDays: 7},
	} {
		if _, err := s.StartBackfill(ctx, p); err == nil {
			t.Errorf("StartBackfill(%+v) accepted", p)
		}
	}
}

// A resource listed whole (not by date) is backfilled as one window: its
// progress reads 1/1 when done, queued or started, whatever the window size.
func TestBackfillOfAnUndatedResourceIsOneWindow(t *testing.T) {
	ctx, _, s := setup(t)
	p := cursor.BackfillParams{Source: "acme", Resource: "projects", From: jan1, To: jan31, WindowDays: 7}
	started, err := s.StartBackfill(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	p.Source = "other"
	queued, err := s.QueueBackfill(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []cursor.Backfill{started, queued} {
		if b.WindowsTotal != 1 || b.WindowDays != 31 {
			t.Errorf("%s/%s %s: %d windows of %d days, want 1 of 31", b.Source, b.Resource, b.Status, b.WindowsTotal, b.WindowDays)
		}
	}
}

func TestBackfillResume(t *testing.T) {
	ctx, db, s := setup(t)
	p := cursor.BackfillParams{Source: "acme", Resource: "time_entries", From: jan1, To: jan31, WindowDays: 7}

	b := startBackfill(t, s, p)
	if b.ID == 0 || b.Next != jan1 || b.From != jan1 || b.To != jan31 || b.WindowDays != 7 ||
		b.Status != cursor.StatusRunning || b.WindowsDone != 0 || b.Records != 0 || b.FinishedAt != nil || b.Done() {
		t.Fatalf("new backfill: %+v", b)
	}

	// Two windows applied, then the process is killed (no FinishBackfill).
	progress(t, db, b.ID, jan1.AddDays(7), 10)
	tx := inTx(t, db)
	progress(t, tx, b.ID, jan1.AddDays(14), 5)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// A third window's transaction is rolled back by the kill.
	tx = inTx(t, db)
	progress(t, tx, b.ID, jan1.AddDays(21), 99)
	_ = tx.Rollback(ctx)

	// Asked again, even with another window size: the same row, at Next.
	r := startBackfill(t, s, cursor.BackfillParams{Source: "acme", Resource: "time_entries", From: jan1, To: jan31, WindowDays: 3})
	if r.ID != b.ID || r.Next != jan1.AddDays(14) || r.WindowsDone != 2 || r.Records != 15 ||
		r.WindowDays != 7 || r.WindowsTotal != 5 || r.Status != cursor.StatusRunning {
		t.Fatalf("resumed backfill: %+v, want id %d at %s", r, b.ID, jan1.AddDays(14))
	}

	// A failed backfill resumes too, with its error cleared.
	if err := s.FinishBackfill(ctx, b.ID, cursor.StatusFailed, "page 2: bad JSON"); err != nil {
		t.Fatal(err)
	}
	if f := backfillByID(t, s, b.ID); f.Status != cursor.StatusFailed || f.Error != "page 2: bad JSON" || f.FinishedAt == nil {
		t.Fatalf("failed backfill: %+v", f)
	}
	r = startBackfill(t, s, p)
	if r.ID != b.ID || r.Status != cursor.StatusRunning || r.Error != "" || r.FinishedAt != nil || r.Next != jan1.AddDays(14) {
		t.Fatalf("resumed failed backfill: %+v", r)
	}

	// A different range is a different backfill.
	if o := startBackfill(t, s, cursor.BackfillParams{Source: "acme", Resource: "time_entries", From: jan1, To: jan31.AddDays(1), WindowDays: 7}); o.ID == b.ID {
		t.Fatal("another range resumed the same backfill")
	}
	if o := startBackfill(t, s, cursor.BackfillParams{Source: "acme", Resource: "projects", From: jan1, To: jan31, WindowDays: 7}); o.ID == b.ID {
		t.Fatal("another resource resumed the same backfill")
	}

	// Done: the same range then starts afresh.
	progress(t, db, b.ID, jan31.AddDays(1), 1)
	if d := backfillByID(t, s, b.ID); !d.Done() {
		t.Fatalf("backfill past its last day not Done: %+v", d)
	}
	if err := s.FinishBackfill(ctx, b.ID, cursor.BackfillDone, ""); err != nil {
		t.Fatal(err)
	}
	n := startBackfill(t, s, p)
	if n.ID == b.ID || n.Next != jan1 || n.WindowsDone != 0 || n.Records != 0 {
		t.Fatalf("after done, same range: %+v, want a new backfill from %s", n, jan1)
	}
	if d := backfillByID(t, s, b.ID); d.Status != cursor.BackfillDone || d.FinishedAt == nil || d.Records != 16 {
		t.Fatalf("done backfill: %+v", d)
	}
}

func TestStartBackfillConcurrent(t *testing.T) {
	ctx, db, s := setup(t)
	p := cursor.BackfillParams{Source: "acme", Resource: "time_entries", From: jan1, To: jan31, WindowDays: 7}
	const n = 16
	ids := make([]int64, n)
	errs := make([]error, n)
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for i := range n {
		wg.Go(func() {
			<-start
			b, err := s.StartBackfill(ctx, p)
			ids[i], errs[i] = b.ID, err
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("concurrent StartBackfill returned ids %v", ids)
		}
	}
	if c := count(t, db, `SELECT count(*) FROM backfills`); c != 1 {
		t.Fatalf("%d backfill rows, want 1", c)
	}
}

func TestBackfillProgressNeverBackward(t *testing.T) {
	ctx, db, s := setup(t)
	b := startBackfill(t, s, cursor.BackfillParams{Source: "acme", Resource: "time_entries", From: jan1, To: jan31, WindowDays: 7})
	progress(t, db, b.ID, jan1.AddDays(14), 10)
	progress(t, db, b.ID, jan1.AddDays(7), 3)  // backward
	progress(t, db, b.ID, jan1.AddDays(14), 2) // same
	got := backfillByID(t, s, b.ID)
	if got.Next != jan1.AddDays(14) || got.WindowsDone != 1 || got.Records != 15 {
		t.Fatalf("after backward progress: %+v, want next %s, 1 window, 15 records", got, jan1.AddDays(14))
	}
	if !got.UpdatedAt.After(b.UpdatedAt) && !got.UpdatedAt.Equal(b.UpdatedAt) {
		t.Fatalf("updated_at went back: %v < %v", got.UpdatedAt, b.UpdatedAt)
	}

	if err := cursor.BackfillProgress(ctx, db, b.ID+1000, jan31, 1); !errors.Is(err, cursor.ErrNotFound) {
		t.Fatalf("progress of a missing backfill: %v", err)
	}
	if err := s.FinishBackfill(ctx, b.ID+1000, cursor.BackfillDone, ""); !errors.Is(err, cursor.ErrNotFound) {
		t.Fatalf("finish of a missing backfill: %v", err)
	}
	if err := s.FinishBackfill(ctx, b.ID, cursor.StatusRunning, ""); err == nil {
		t.Fatal("FinishBackfill accepted status running")
	}
}

func TestBackfills(t *testing.T) {
	ctx, _, s := setup(t)
	a1 := startBackfill(t, s, cursor.BackfillParams{Source: "acme", Resource: "time_entries", From: jan1, To: jan31, WindowDays: 7})
	b1 := startBackfill(t, s, cursor.BackfillParams{Source: "beta", Resource: "time_entries", From: jan1, To: jan31, WindowDays: 7})
	a2 := startBackfill(t, s, cursor.BackfillParams{Source: "acme", Resource: "projects", From: jan1, To: jan31, WindowDays: 7})

	all, err := s.Backfills(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all[0].ID != a2.ID || all[1].ID != b1.ID || all[2].ID != a1.ID {
		t.Fatalf("Backfills(\"\"): %+v, want newest first", all)
	}
	acme, err := s.Backfills(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if len(acme) != 2 || acme[0].ID != a2.ID || acme[1].ID != a1.ID {
		t.Fatalf("Backfills(acme): %+v", acme)
	}
	if acme[1] != a1 {
		t.Fatalf("listed backfill %+v differs from started %+v", acme[1], a1)
	}
}

func TestList(t *testing.T) {
	ctx, db, s := setup(t)

	// acme/projects: cursor, no runs.
	advance(t, db, "acme", "projects", t0)
	// acme/time_entries: cursor, an ok run, a failed run, then a running
	// one; and an operator set, which is not a pass.
	advance(t, db, "acme", "time_entries", t0.Add(time.Hour))
	startRun(t, s, "te1", "acme", "time_entries", cursor.KindIncremental)
	finishRun(t, db, "te1", cursor.StatusOK)
	startRun(t, s, "te2", "acme", "time_entries", cursor.KindIncremental)
	finishRun(t, db, "te2", cursor.StatusFailed)
	startRun(t, s, "te3", "acme", "time_entries", cursor.KindReconcile)
	if _, err := s.Set(ctx, cursor.SetParams{Source: "acme", Resource: "time_entries", To: t0.Add(2 * time.Hour), Actor: "alice@host"}); err != nil {
		t.Fatal(err)
	}
	// acme/users: runs but no cursor row yet (the first pass failed).
	startRun(t, s, "u1", "acme", "users", cursor.KindIncremental)
	finishRun(t, db, "u1", cursor.StatusFailed)
	// beta/clients: another source.
	advance(t, db, "beta", "clients", t0)

	list, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	byKey := map[string]cursor.Status{}
	for _, st := range list {
		k := st.Source + "/" + st.Resource
		keys = append(keys, k)
		byKey[k] = st
	}
	want := []string{"acme/projects", "acme/time_entries", "acme/users", "beta/clients"}
	if len(keys) != len(want) {
		t.Fatalf("List keys %v, want %v", keys, want)
	}
	for i := range want {
		if keys[i] != want[i] {
			t.Fatalf("List keys %v, want %v", keys, want)
		}
	}

	if p := byKey["acme/projects"]; !p.HighWater.Equal(t0) || p.UpdatedBy != "poller" || p.LastRun != nil || p.LastOK != nil {
		t.Errorf("acme/projects: %+v", p)
	}

	te := byKey["acme/time_entries"]
	if !te.HighWater.Equal(t0.Add(2*time.Hour)) || te.UpdatedBy != "alice@host" {
		t.Errorf("acme/time_entries cursor: %+v", te)
	}
	if te.LastRun == nil || te.LastRun.RunID != "te3" || te.LastRun.Status != cursor.StatusRunning ||
		te.LastRun.Kind != cursor.KindReconcile || te.LastRun.FinishedAt != nil {
		t.Errorf("acme/time_entries last run: %+v, want te3 running", te.LastRun)
	}
	okRun := runByID(t, s, "te1")
	if te.LastOK == nil || okRun.FinishedAt == nil || !te.LastOK.Equal(*okRun.FinishedAt) {
		t.Errorf("acme/time_entries last ok: %v, want te1's finished_at %v", te.LastOK, okRun.FinishedAt)
	}

	u := byKey["acme/users"]
	if !u.HighWater.IsZero() || u.UpdatedBy != "" || u.LastRun == nil || u.LastRun.RunID != "u1" ||
		u.LastRun.Status != cursor.StatusFailed || u.LastOK != nil {
		t.Errorf("acme/users (runs, no cursor): %+v", u)
	}

	// Filter by source.
	list, err = s.List(ctx, "beta")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Source != "beta" || list[0].Resource != "clients" {
		t.Fatalf("List(beta): %+v", list)
	}
	list, err = s.List(ctx, "gamma")
	if err != nil || len(list) != 0 {
		t.Fatalf("List(gamma): %+v, %v", list, err)
	}
}

func runByID(t *testing.T, s *cursor.Store, id string) cursor.Run {
	t.Helper()
	runs, err := s.Runs(t.Context(), cursor.RunsParams{Limit: 1000})
	return findOne(t, runs, err, "run "+id, func(r cursor.Run) bool { return r.RunID == id })
}

// TestAdvanceProperty: whatever the sequence of Advance calls, each in a
// transaction that commits or rolls back, the stored high water is the
// maximum of the committed accepted targets, it never decreases, and a call
// fails with ErrBackward exactly when its target is behind it.
func TestAdvanceProperty(t *testing.T) {
	_, db, s := setup(t)
	ctx := context.Background()
	iteration := 0
	rapid.Check(t, func(rt *rapid.T) {
		iteration++
		resource := fmt.Sprintf("r%d", iteration) // a fresh cursor per case
		var hw time.Time                          // the model: zero = never synced
		steps := rapid.IntRange(1, 25).Draw(rt, "steps")
		for i := range steps {
			var to time.Time
			if rapid.IntRange(0, 19).Draw(rt, fmt.Sprintf("never%d", i)) > 0 { // 1 in 20: zero
				to = t0.Add(time.Duration(rapid.IntRange(-20, 20).Draw(rt, fmt.Sprintf("sec%d", i))) * time.Second).
					Add(time.Duration(rapid.IntRange(0, 1999).Draw(rt, fmt.Sprintf("ns%d", i))))
			}
			commit := rapid.IntRange(0, 3).Draw(rt, fmt.Sprintf("commit%d", i)) > 0
			want := to.Truncate(time.Microsecond)

			tx, err := db.Begin(ctx)
			if err != nil {
				rt.Fatal(err)
			}
			err = cursor.Advance(ctx, tx, "acme", resource, to)
			if commit {
				if cerr := tx.Commit(ctx); cerr != nil {
					rt.Fatal(cerr)
				}
			} else {
				_ = tx.Rollback(ctx)
			}

			backward := want.Before(hw)
			switch {
			case backward && !errors.Is(err, cursor.ErrBackward):
				rt.Fatalf("step %d: advance from %v to %v: got %v, want ErrBackward", i, hw, to, err)
			case !backward && err != nil:
				rt.Fatalf("step %d: advance from %v to %v: %v", i, hw, to, err)
			}
			if err == nil && commit && want.After(hw) {
				hw = want
			}

			c, err := s.Load(ctx, "acme", resource)
			if errors.Is(err, cursor.ErrNotFound) && hw.IsZero() {
				continue // nothing committed yet
			}
			if err != nil {
				rt.Fatalf("step %d: load: %v", i, err)
			}
			if !c.HighWater.Equal(hw) {
				rt.Fatalf("step %d: high water %v, want %v (max of committed targets)", i, c.HighWater, hw)
			}
		}
	})
}

func TestQueueBackfill(t *testing.T) {
	ctx, _, s := setup(t)
	p := cursor.BackfillParams{Source: "acme", Resource: "time_entries",
		From: clients.Date{Year: 2026, Month: 1, Day: 1}, To: clients.Date{Year: 2026, Month: 1, Day: 10}, WindowDays: 5}
	q, err := s.QueueBackfill(ctx, p)
	if err != nil || q.Status != cursor.BackfillQueued || q.WindowsTotal != 2 {
		t.Fatalf("queued %+v (%v)", q, err)
	}
	list, err := s.QueuedBackfills(ctx, "acme")
	if err != nil || len(list) != 1 || list[0].ID != q.ID {
		t.Fatalf("queued list %+v (%v)", list, err)
	}
	// The owner starts it: the same row, now running; queueing it again
	// leaves it running.
	b, err := s.StartBackfill(ctx, p)
	if err != nil || b.ID != q.ID || b.Status != cursor.StatusRunning {
		t.Fatalf("started %+v (%v)", b, err)
	}
	if again, err := s.QueueBackfill(ctx, p); err != nil || again.ID != q.ID || again.Status != cursor.StatusRunning {
		t.Fatalf("queued while running: %+v (%v)", again, err)
	}
	if list, _ := s.QueuedBackfills(ctx, ""); len(list) != 0 {
		t.Fatalf("still queued: %+v", list)
	}
	got, err := s.Backfill(ctx, q.ID)
	if err != nil || got.Status != cursor.StatusRunning {
		t.Fatalf("by id: %+v (%v)", got, err)
	}
	if _, err := s.Backfill(ctx, 9999); !errors.Is(err, cursor.ErrNotFound) {
		t.Fatalf("missing id: %v", err)
	}
}

func startRun(t *testing.T, s *cursor.Store, id, source, resource, kind string) {
	t.Helper()
	if err := s.StartRun(t.Context(), cursor.StartRunParams{RunID: id, Source: source, Resource: resource, Kind: kind}); err != nil {
		t.Fatalf("StartRun %s: %v", id, err)
	}
}

func finishRun(t *testing.T, db cursor.DB, id, status string) {
	t.Helper()
	if err := cursor.FinishRun(t.Context(), db, cursor.FinishRunParams{RunID: id, Status: status}); err != nil {
		t.Fatalf("FinishRun %s: %v", id, err)
	}
}

func runIDs(runs []cursor.Run) []string {
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.RunID
	}
	return ids
}

// twoRuns returns the store's two runs, the latest first, and fails the
// test when there are not exactly two.
func twoRuns(t *testing.T, s *cursor.Store) (latest, first cursor.Run) {
	t.Helper()
	runs, err := s.Runs(t.Context(), cursor.RunsParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 {
		t.Fatalf("runs: %v", runIDs(runs))
	}
	return runs[0], runs[1]
}

func TestRunRoundTrip(t *testing.T) {
	ctx, db, s := setup(t)
	since, hwBefore, hwAfter := t0.Add(-10*time.Minute), t0, t0.Add(time.Hour)
	from, to := clients.Date{Year: 2026, Month: 1, Day: 1}, clients.Date{Year: 2026, Month: 1, Day: 31}

	err := s.StartRun(ctx, cursor.StartRunParams{
		RunID: "r1", Source: "acme", Resource: "time_entries", Kind: cursor.KindIncremental,
		WindowSince: &since, HighWaterBefore: &hwBefore,
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.StartRun(ctx, cursor.StartRunParams{
		RunID: "r2", Source: "acme", Resource: "time_entries", Kind: cursor.KindBackfill,
		WindowFrom: from, WindowTo: to,
	})
	if err != nil {
		t.Fatal(err)
	}

	r2, r1 := twoRuns(t, s)
	if r1.Status != cursor.StatusRunning || r1.FinishedAt != nil || r1.Kind != "incremental" ||
		r1.WindowSince == nil || !r1.WindowSince.Equal(since) || !r1.WindowFrom.IsZero() ||
		r1.HighWaterBefore == nil || !r1.HighWaterBefore.Equal(hwBefore) || r1.HighWaterAfter != nil ||
		r1.StartedAt.IsZero() || r1.StartedAt.Location() != time.UTC {
		t.Fatalf("running incremental run: %+v", r1)
	}
	if r2.WindowFrom != from || r2.WindowTo != to || r2.WindowSince != nil || r2.HighWaterBefore != nil {
		t.Fatalf("running backfill run: %+v", r2)
	}

	counts := cursor.Counts{Fetched: 100, Counts: upsert.Counts{Inserted: 40, Updated: 30, Unchanged: 20, Stale: 5, Ties: 3, Tombstoned: 2}}
	tx := inTx(t, db)
	err = cursor.FinishRun(ctx, tx, cursor.FinishRunParams{RunID: "r1", Status: cursor.StatusOK, Pages: 7, Counts: counts, HighWaterAfter: &hwAfter})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	err = cursor.FinishRun(ctx, db, cursor.FinishRunParams{RunID: "r2", Status: cursor.StatusFailed, Error: "page 3 of acme/time_entries: bad JSON", Pages: 2, Counts: cursor.Counts{Fetched: 200}})
	if err != nil {
		t.Fatal(err)
	}

	r2, r1 = twoRuns(t, s)
	if r1.Status != cursor.StatusOK || r1.FinishedAt == nil || r1.FinishedAt.Before(r1.StartedAt) ||
		r1.Pages != 7 || r1.Counts != counts || r1.Error != "" ||
		r1.HighWaterAfter == nil || !r1.HighWaterAfter.Equal(hwAfter) {
		t.Fatalf("finished ok run: %+v", r1)
	}
	if r2.Status != cursor.StatusFailed || r2.Error != "page 3 of acme/time_entries: bad JSON" ||
		r2.Pages != 2 || r2.Counts != (cursor.Counts{Fetched: 200}) || r2.HighWaterAfter != nil {
		t.Fatalf("finished failed run: %+v", r2)
	}
}

func TestRunErrors(t *testing.T) {
	ctx, db, s := setup(t)
	startRun(t, s, "r1", "acme", "time_entries", cursor.KindIncremental)

	err := s.StartRun(ctx, cursor.StartRunParams{RunID: "r1", Source: "acme", Resource: "projects", Kind: cursor.KindIncremental})
	if !errors.Is(err, cursor.ErrRunExists) {
		t.Fatalf("StartRun with a used id: %v, want ErrRunExists", err)
	}
	if err := s.StartRun(ctx, cursor.StartRunParams{RunID: "r2", Source: "acme", Resource: "projects", Kind: "cursor_set"}); err == nil {
		t.Fatal("StartRun accepted kind cursor_set")
	}
	if err := cursor.FinishRun(ctx, db, cursor.FinishRunParams{RunID: "nope", Status: cursor.StatusOK}); !errors.Is(err, cursor.ErrNotFound) {
		t.Fatalf("FinishRun of an unknown run: %v, want ErrNotFound", err)
	}
	if err := cursor.FinishRun(ctx, db, cursor.FinishRunParams{RunID: "r1", Status: cursor.StatusRunning}); err == nil {
		t.Fatal("FinishRun accepted status running")
	}

	// FinishRun in a rolled-back transaction leaves the run running.
	tx := inTx(t, db)
	finishRun(t, tx, "r1", cursor.StatusOK)
	_ = tx.Rollback(ctx)
	runs, err := s.Runs(ctx, cursor.RunsParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Status != cursor.StatusRunning {
		t.Fatalf("after rolled-back FinishRun: %+v", runs)
	}
}

func TestRunsOrderFiltersLimit(t *testing.T) {
	ctx, _, s := setup(t)
	// Started one after the other: r1 oldest, r6 newest.
	startRun(t, s, "r1", "acme", "time_entries", cursor.KindIncremental)
	startRun(t, s, "r2", "acme", "projects", cursor.KindIncremental)
	startRun(t, s, "r3", "beta", "time_entries", cursor.KindBackfill)
	startRun(t, s, "r4", "acme", "time_entries", cursor.KindReconcile)
	if _, err := s.Set(ctx, cursor.SetParams{Source: "acme", Resource: "time_entries", To: t0, Actor: "a@h"}); err != nil {
		t.Fatal(err)
	}
	startRun(t, s, "r6", "beta", "projects", cursor.KindIncremental)

	for _, tc := range []struct {
		p    cursor.RunsParams
		want string
	}{
		{cursor.RunsParams{}, "[r6 cursor_set r4 r3 r2 r1]"},
		{cursor.RunsParams{Limit: 2}, "[r6 cursor_set]"},
		{cursor.RunsParams{Source: "acme"}, "[cursor_set r4 r2 r1]"},
		{cursor.RunsParams{Resource: "time_entries"}, "[cursor_set r4 r3 r1]"},
		{cursor.RunsParams{Source: "acme", Resource: "time_entries", Limit: 2}, "[cursor_set r4]"},
		{cursor.RunsParams{Source: "gamma"}, "[]"},
	} {
		runs, err := s.Runs(ctx, tc.p)
		if err != nil {
			t.Fatal(err)
		}
		ids := runIDs(runs)
		for i, r := range runs {
			if r.Kind == cursor.KindCursorSet {
				ids[i] = "cursor_set"
				if r.Actor != "a@h" || r.Status != cursor.StatusOK {
					t.Fatalf("operator run in Runs: %+v", r)
				}
			}
		}
		if got := fmt.Sprint(ids); got != tc.want {
			t.Errorf("Runs(%+v) = %s, want %s", tc.p, got, tc.want)
		}
	}
}

func TestRunsDefaultLimit(t *testing.T) {
	ctx, _, s := setup(t)
	for i := range cursor.DefaultRunsLimit + 3 {
		startRun(t, s, fmt.Sprintf("r%03d", i), "acme", "time_entries", cursor.KindIncremental)
	}
	runs, err := s.Runs(ctx, cursor.RunsParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != cursor.DefaultRunsLimit || runs[0].RunID != fmt.Sprintf("r%03d", cursor.DefaultRunsLimit+2) {
		t.Fatalf("default limit: %d runs, first %s", len(runs), runs[0].RunID)
	}
}

func TestAbandonRuns(t *testing.T) {
	ctx, db, s := setup(t)
	startRun(t, s, "old1", "acme", "time_entries", cursor.KindIncremental)
	startRun(t, s, "old2", "acme", "projects", cursor.KindBackfill)
	startRun(t, s, "done", "acme", "users", cursor.KindIncremental)
	finishRun(t, db, "done", cursor.StatusOK)
	startRun(t, s, "other", "beta", "time_entries", cursor.KindIncremental)
	var before time.Time
	if err := db.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	startRun(t, s, "new", "acme", "time_entries", cursor.KindIncremental)

	n, err := s.AbandonRuns(ctx, []string{"acme"}, before)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("AbandonRuns = %d, want 2", n)
	}
	runs, err := s.Runs(ctx, cursor.RunsParams{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]cursor.Run{}
	for _, r := range runs {
		got[r.RunID] = r
	}
	for _, id := range []string{"old1", "old2"} {
		r := got[id]
		if r.Status != cursor.StatusFailed || r.Error != "abandoned (process ended)" || r.FinishedAt == nil {
			t.Errorf("%s after AbandonRuns: %+v", id, r)
		}
	}
	for id, status := range map[string]string{"done": cursor.StatusOK, "other": cursor.StatusRunning, "new": cursor.StatusRunning} {
		if r := got[id]; r.Status != status || r.Error != "" {
			t.Errorf("%s after AbandonRuns: %+v, want untouched %s", id, r, status)
		}
	}
	// Idempotent.
	if n, err := s.AbandonRuns(ctx, []string{"acme"}, before); err != nil || n != 0 {
		t.Fatalf("second AbandonRuns = %d, %v", n, err)
	}
}

func TestWaits(t *testing.T) {
	ctx, pool, s := setup(t)
	until := time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)
	if err := cursor.SetWait(ctx, pool, cursor.Wait{Source: "tg", Until: until, Reason: "quota"}); err != nil {
		t.Fatal(err)
	}
	if err := cursor.SetWait(ctx, pool, cursor.Wait{Source: "tg", Until: until.Add(time.Hour), Reason: "quota"}); err != nil {
		t.Fatal(err)
	}
	ws, err := s.Waits(ctx, "")
	if err != nil || len(ws) != 1 || !ws[0].Until.Equal(until.Add(time.Hour)) || ws[0].Reason != "quota" {
		t.Fatalf("waits %+v (%v)", ws, err)
	}
	if err := cursor.ClearWait(ctx, pool, "tg"); err != nil {
		t.Fatal(err)
	}
	if ws, err := s.Waits(ctx, "tg"); err != nil || len(ws) != 0 {
		t.Fatalf("after clear: %+v (%v)", ws, err)
	}
}

// RecordRuns writes whole incremental runs in one statement: a running
// row, then its end over it; a running record arriving after the end
// changes nothing; the times are the database's clock less their age.
func TestRecordRuns(t *testing.T) {
	ctx, db, s := setup(t)
	started := time.Now().Add(-3 * time.Second)
	since, hw := t0.Add(-10*time.Minute), t0
	running := cursor.RunRecord{RunID: "r1", Source: "acme", Resource: "time_entries", Status: cursor.StatusRunning,
		Started: started, WindowSince: &since, HighWaterBefore: &hw}
	if err := cursor.RecordRuns(ctx, db, []cursor.RunRecord{running}); err != nil {
		t.Fatal(err)
	}
	done := running
	done.Status, done.Finished, done.Pages = cursor.StatusOK, started.Add(2*time.Second), 3
	done.Counts = cursor.Counts{Fetched: 7, Counts: upsert.Counts{Unchanged: 7}}
	idle := cursor.RunRecord{RunID: "r2", Source: "acme", Resource: "users", Status: cursor.StatusOK,
		Started: started.Add(time.Second), Finished: started.Add(time.Second + time.Millisecond)}
	if err := cursor.RecordRuns(ctx, db, []cursor.RunRecord{done, idle}); err != nil {
		t.Fatal(err)
	}
	if err := cursor.RecordRuns(ctx, db, []cursor.RunRecord{running}); err != nil { // late
		t.Fatal(err)
	}
	r2, r1 := twoRuns(t, s)
	if r1.RunID != "r1" || r1.Kind != cursor.KindIncremental || r1.Status != cursor.StatusOK || r1.Pages != 3 ||
		r1.Counts != done.Counts || !r1.WindowSince.Equal(since) || !r1.HighWaterBefore.Equal(hw) || r1.FinishedAt == nil {
		t.Fatalf("r1 = %+v", r1)
	}
	// started_at and finished_at come from two statements, each the
	// database's clock less an age measured before it was sent: each is
	// off by its own round trip, which a loaded CI machine stretches to a
	// tenth of a second and more.
	if took := r1.FinishedAt.Sub(r1.StartedAt); took < 1500*time.Millisecond || took > 2500*time.Millisecond {
		t.Errorf("r1 took %s in the database, want 2s", took)
	}
	if age := time.Since(r1.StartedAt); age < 3*time.Second || age > 10*time.Second {
		t.Errorf("r1 started %s ago, want about 3s", age)
	}
	if r2.RunID != "r2" || r2.Status != cursor.StatusOK || r2.WindowSince != nil || r2.HighWaterBefore != nil {
		t.Fatalf("r2 = %+v", r2)
	}
	for _, bad := range []cursor.RunRecord{
		{RunID: "x", Source: "acme", Resource: "users", Status: "done", Started: started, Finished: started},
		{RunID: "", Source: "acme", Resource: "users", Status: cursor.StatusOK, Started: started, Finished: started},
		{RunID: "x", Source: "acme", Resource: "users", Status: cursor.StatusOK, Started: started},
		{RunID: "x", Source: "acme", Resource: "users", Status: cursor.StatusRunning, Started: started, Finished: started},
	} {
		if err := cursor.RecordRuns(ctx, db, []cursor.RunRecord{bad}); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
}

// HighWaters reads every cursor of one source with a high water, and only
// that source's.
func TestHighWaters(t *testing.T) {
	ctx, db, s := setup(t)
	for _, c := range []struct {
		source, resource string
		hw               time.Time
	}{{"acme", "users", t0}, {"acme", "time_entries", t0.Add(time.Hour)}, {"other", "users", t0.Add(2 * time.Hour)}} {
		if err := cursor.Advance(ctx, db, c.source, c.resource, c.hw); err != nil {
			t.Fatal(err)
		}
	}
	hws, err := s.HighWaters(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if len(hws) != 2 || !hws["users"].Equal(t0) || !hws["time_entries"].Equal(t0.Add(time.Hour)) || hws["users"].Location() != time.UTC {
		t.Fatalf("high waters of acme: %v", hws)
	}
	if hws, err := s.HighWaters(ctx, "none"); err != nil || len(hws) != 0 {
		t.Fatalf("high waters of a source without cursors: %v, %v", hws, err)
	}
}
