// Package cursor owns tidemark's own state in Postgres: the incremental
// cursor per (source, resource) in table cursors, the history of passes and
// operator changes in sync_runs, and backfill progress in backfills. It also
// holds the read queries behind `tidemark cursors` and `tidemark runs`.
//
// It promises that the cursor only moves forward, except through an explicit
// operator command (Set, Reset) that is recorded in sync_runs with its actor.
// Writes that must commit with the data they describe (Advance, FinishRun,
// RecordRuns, BackfillProgress) take the caller's transaction; the
// history's retention (PruneRuns) deletes in short transactions of its own.
// It knows nothing of HTTP, and callers decide on its own errors (ErrNotFound, ErrBackward with
// *BackwardError, ErrRunExists), never on pgx's: pgx.ErrNoRows never escapes.
// Other database failures are wrapped (%w) with the operation that failed,
// so that context.Canceled stays visible to errors.Is.
package cursor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what Store needs: *pgxpool.Pool, *pgx.Conn and pgx.Tx all satisfy it.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// beginner is the part of *pgxpool.Pool, *pgx.Conn and pgx.Tx (a savepoint)
// that Set and Reset use to make the move and its record one transaction.
type beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Store reads and writes cursors, runs and backfills through one DB.
type Store struct {
	db DB
}

// New returns a Store on db.
func New(db DB) *Store { return &Store{db: db} }

var (
	// ErrNotFound is returned when the cursor, run or backfill does not exist.
	ErrNotFound = errors.New("cursor: not found")
	// ErrBackward is matched (errors.Is) by *BackwardError.
	ErrBackward = errors.New("cursor: would move backward")
	// ErrRunExists is returned by StartRun when the run id is already recorded.
	ErrRunExists = errors.New("cursor: run id already recorded")
)

// BackwardError is returned by Advance when the target is earlier than the
// stored high water. Nothing was written.
type BackwardError struct {
	Source, Resource string
	From, To         time.Time
}

func (e *BackwardError) Error() string {
	to := "never synced"
	if !e.To.IsZero() {
		to = e.To.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("cursor %s/%s: refusing to move high water backward from %s to %s; use `tidemark cursor set` to move it back on purpose",
		e.Source, e.Resource, e.From.UTC().Format(time.RFC3339Nano), to)
}

// Is makes errors.Is(err, ErrBackward) true.
func (e *BackwardError) Is(target error) bool { return target == ErrBackward }

// Cursor is the incremental position of one (source, resource).
type Cursor struct {
	Source, Resource string
	// HighWater is the newest source version durably applied; zero means
	// never synced.
	HighWater time.Time
	UpdatedAt time.Time
	// UpdatedBy is "poller" for Advance, or the operator's actor for Set and
	// Reset.
	UpdatedBy string
}

// updatedByPoller is cursors.updated_by for moves made by Advance.
const updatedByPoller = "poller"

const sqlLoad = `
SELECT high_water, updated_at, updated_by
FROM cursors
WHERE source = $1 AND resource = $2`

// Load returns the cursor of (source, resource), or ErrNotFound when there
// is no row.
func (s *Store) Load(ctx context.Context, source, resource string) (Cursor, error) {
	c, err := load(ctx, s.db, sqlLoad, source, resource)
	if err != nil {
		return Cursor{}, fmt.Errorf("load cursor %s/%s: %w", source, resource, err)
	}
	return c, nil
}

const sqlHighWaters = `SELECT resource, high_water FROM cursors WHERE source = $1 AND high_water IS NOT NULL`

// HighWaters returns the high water of each of source's resources that has
// one, in one round trip: a source's passes read their cursors at once.
func (s *Store) HighWaters(ctx context.Context, source string) (map[string]time.Time, error) {
	rows, err := s.db.Query(ctx, sqlHighWaters, source)
	if err != nil {
		return nil, fmt.Errorf("load cursors of %s: %w", source, err)
	}
	hws := map[string]time.Time{}
	_, _, scan := HighWatersQuery(source, hws)
	if err := scan(rows); err != nil {
		return nil, err
	}
	return hws, nil
}

// HighWatersQuery is HighWaters for another connection to run (a pass
// runs it in its lease statement's round trip): the query, its arguments,
// and what reads its rows into into.
func HighWatersQuery(source string, into map[string]time.Time) (string, []any, func(pgx.Rows) error) {
	return sqlHighWaters, []any{source}, func(rows pgx.Rows) error {
		var resource string
		var hw time.Time
		if _, err := pgx.ForEachRow(rows, []any{&resource, &hw}, func() error {
			into[resource] = hw.UTC()
			return nil
		}); err != nil {
			return fmt.Errorf("load cursors of %s: %w", source, err)
		}
		return nil
	}
}

func load(ctx context.Context, db DB, sql, source, resource string) (Cursor, error) {
	c := Cursor{Source: source, Resource: resource}
	var hw *time.Time
	err := db.QueryRow(ctx, sql, source, resource).Scan(&hw, &c.UpdatedAt, &c.UpdatedBy)
	if errors.Is(err, pgx.ErrNoRows) {
		return Cursor{}, ErrNotFound
	}
	if err != nil {
		return Cursor{}, err
	}
	c.HighWater = fromNullTime(hw)
	c.UpdatedAt = c.UpdatedAt.UTC()
	return c, nil
}

// sqlAdvance moves high_water forward only. ON CONFLICT DO UPDATE locks the
// existing row even when the WHERE clause rejects the update, so the check
// that follows in the same transaction reads a value nobody else can change.
const sqlAdvance = `
INSERT INTO cursors (source, resource, high_water, updated_at, updated_by)
VALUES ($1, $2, $3, now(), $4)
ON CONFLICT (source, resource) DO UPDATE
SET high_water = EXCLUDED.high_water, updated_at = now(), updated_by = EXCLUDED.updated_by
WHERE EXCLUDED.high_water IS NOT NULL
  AND (cursors.high_water IS NULL OR cursors.high_water < EXCLUDED.high_water)`

// sqlAdvanceCheck tells, after a rejected advance, whether the target was
// behind the stored high water (NULL counts as earliest).
const sqlAdvanceCheck = `
SELECT high_water, high_water IS NOT NULL AND ($3::timestamptz IS NULL OR high_water > $3::timestamptz)
FROM cursors
WHERE source = $1 AND resource = $2`

// Advance moves the high water of (source, resource) forward to `to`, inside
// the caller's transaction, so that the poller commits the last page and the
// cursor together. The row is created when missing. Moving to the same time
// is a no-op; moving to an earlier time returns a *BackwardError (matching
// ErrBackward) and writes nothing. A zero `to` means "never synced": it only
// creates a missing row, and is backward for a cursor that has a high water.
// Times are stored at microsecond precision, in UTC.
func Advance(ctx context.Context, tx DB, source, resource string, to time.Time) error {
	to = normTime(to)
	tag, err := tx.Exec(ctx, sqlAdvance, source, resource, nullTime(to), updatedByPoller)
	if err != nil {
		return fmt.Errorf("advance cursor %s/%s: %w", source, resource, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var (
		hw       *time.Time
		backward bool
	)
	if err := tx.QueryRow(ctx, sqlAdvanceCheck, source, resource, nullTime(to)).Scan(&hw, &backward); err != nil {
		return fmt.Errorf("advance cursor %s/%s: check: %w", source, resource, noRows(err))
	}
	if backward {
		return &BackwardError{Source: source, Resource: resource, From: fromNullTime(hw), To: to}
	}
	return nil
}

// SetParams are the inputs of Set.
type SetParams struct {
	Source, Resource string
	// To is the new high water; it may be earlier than the current one.
	To time.Time
	// Actor names the operator, e.g. "alice@host".
	Actor string
	// Fence, when set, runs first in the transaction that writes: the
	// operator's pass lease must still be held when the change commits.
	Fence func(context.Context, pgx.Tx) error
}

// ResetParams are the inputs of Reset.
type ResetParams struct {
	Source, Resource string
	// Actor names the operator, e.g. "alice@host".
	Actor string
	// Fence is as in SetParams.
	Fence func(context.Context, pgx.Tx) error
}

const sqlLoadForUpdate = sqlLoad + `
FOR UPDATE`

const sqlSet = `
INSERT INTO cursors (source, resource, high_water, updated_at, updated_by)
VALUES ($1, $2, $3, now(), $4)
ON CONFLICT (source, resource) DO UPDATE
SET high_water = EXCLUDED.high_water, updated_at = now(), updated_by = EXCLUDED.updated_by`

const sqlRecordOperatorRun = `
INSERT INTO sync_runs (run_id, source, resource, kind, status, started_at, finished_at,
                       actor, high_water_before, high_water_after)
VALUES ($1, $2, $3, $4, 'ok', now(), now(), $5, $6, $7)`

// Kinds of the operator records in sync_runs.
const (
	KindCursorSet   = "cursor_set"
	KindCursorReset = "cursor_reset"
)

// Set moves the cursor to p.To, backward if need be, creating it when
// missing, and records a cursor_set run with the actor and the high water
// before and after, in one transaction. It returns the previous cursor (zero
// HighWater, UpdatedAt and UpdatedBy when there was no row). Use Reset to go
// back to "never synced".
func (s *Store) Set(ctx context.Context, p SetParams) (Cursor, error) {
	if p.To.IsZero() {
		return Cursor{}, fmt.Errorf("set cursor %s/%s: no time given (to clear the cursor use reset)", p.Source, p.Resource)
	}
	to := normTime(p.To)
	var prev Cursor
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		prev, err = fencedLoad(ctx, tx, p.Fence, p.Source, p.Resource)
		if errors.Is(err, ErrNotFound) {
			prev, err = Cursor{Source: p.Source, Resource: p.Resource}, nil
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, sqlSet, p.Source, p.Resource, to, p.Actor); err != nil {
			return err
		}
		return recordOperatorRun(ctx, tx, KindCursorSet, p.Source, p.Resource, p.Actor, prev.HighWater, to)
	}, p.Actor)
	if err != nil {
		return Cursor{}, fmt.Errorf("set cursor %s/%s: %w", p.Source, p.Resource, err)
	}
	return prev, nil
}

const sqlReset = `
UPDATE cursors
SET high_water = NULL, updated_at = now(), updated_by = $3
WHERE source = $1 AND resource = $2`

// Reset clears the cursor to "never synced", so the next incremental pass
// fetches everything, and records a cursor_reset run, in one transaction. It
// returns the previous cursor, or ErrNotFound (writing nothing) when the
// cursor does not exist.
func (s *Store) Reset(ctx context.Context, p ResetParams) (Cursor, error) {
	var prev Cursor
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		prev, err = fencedLoad(ctx, tx, p.Fence, p.Source, p.Resource)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, sqlReset, p.Source, p.Resource, p.Actor); err != nil {
			return err
		}
		return recordOperatorRun(ctx, tx, KindCursorReset, p.Source, p.Resource, p.Actor, prev.HighWater, time.Time{})
	}, p.Actor)
	if err != nil {
		return Cursor{}, fmt.Errorf("reset cursor %s/%s: %w", p.Source, p.Resource, err)
	}
	return prev, nil
}

// fencedLoad loads the cursor for update, then runs the caller's fence:
// checked with the row locked, a lease that holds then holds until commit
// as far as this row goes (see AdvanceFenced).
func fencedLoad(ctx context.Context, tx pgx.Tx, f func(context.Context, pgx.Tx) error, source, resource string) (Cursor, error) {
	c, err := load(ctx, tx, sqlLoadForUpdate, source, resource)
	if ferr := fence(ctx, tx, f); ferr != nil {
		return Cursor{}, ferr
	}
	return c, err
}

// AdvanceFenced is Advance, then the caller's fence (a lease check), in tx.
// The order closes check-then-commit: Advance locks the cursor row (or
// creates it, uncommitted), so an operator's Set or Reset, which locks the
// row before its own change, cannot commit between a fence that passed and
// this commit; it waits and applies after. A lease lost before the fence
// fails it, and the transaction rolls back.
func AdvanceFenced(ctx context.Context, tx pgx.Tx, f func(context.Context, pgx.Tx) error, source, resource string, to time.Time) error {
	if err := Advance(ctx, tx, source, resource, to); err != nil {
		return err
	}
	return fence(ctx, tx, f)
}

func fence(ctx context.Context, tx pgx.Tx, f func(context.Context, pgx.Tx) error) error {
	if f == nil {
		return nil
	}
	return f(ctx, tx)
}

func recordOperatorRun(ctx context.Context, tx DB, kind, source, resource, actor string, before, after time.Time) error {
	_, err := tx.Exec(ctx, sqlRecordOperatorRun, newRunID(kind), source, resource, kind, actor, nullTime(before), nullTime(after))
	return err
}

// inTx runs fn in a transaction on the Store's DB (a savepoint when the DB is
// itself a transaction). An operator change needs an actor.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error, actor string) error {
	if actor == "" {
		return errors.New("no actor given (who is making the change, e.g. user@host)")
	}
	b, ok := s.db.(beginner)
	if !ok {
		return fmt.Errorf("the Store's DB (%T) cannot begin a transaction", s.db)
	}
	return pgx.BeginFunc(ctx, b, fn)
}

// newRunID names an operator record in sync_runs, e.g. "cursor_set-3f9a...".
func newRunID(kind string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return kind + "-" + hex.EncodeToString(b)
}

// normTime is t in UTC at Postgres precision (microseconds), so comparisons
// in Go agree with those made by the database.
func normTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Microsecond)
}

// nullTime maps the zero time to SQL NULL.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = normTime(t)
	return &t
}

// fromNullTime maps SQL NULL to the zero time, and any time to UTC.
func fromNullTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// utcPtr returns t in UTC, keeping nil.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// noRows translates pgx.ErrNoRows into ErrNotFound.
func noRows(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// collect runs a listing and scans its rows; what names it in errors.
func collect[T any](ctx context.Context, db DB, what string, scan pgx.RowToFunc[T], sql string, args ...any) ([]T, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	list, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	return list, nil
}
