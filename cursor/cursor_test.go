package cursor_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidemarkhq/tidemark/cursor"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
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
