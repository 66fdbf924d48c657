package cursor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/upsert"
)

// Kinds and statuses of sync_runs rows.
const (
	KindIncremental = "incremental"
	KindBackfill    = "backfill"
	KindReconcile   = "reconcile"

	StatusRunning   = "running"
	StatusOK        = "ok"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
)

// AbandonedError is the error text AbandonRuns gives to runs left running.
const AbandonedError = "abandoned (process ended)"

// Counts are the outcomes of a pass: the records fetched, and what upsert
// made of them.
type Counts struct {
	Fetched int64 `json:"fetched"`
	upsert.Counts
	// Quarantined counts the records that could not be stored and wait in
	// record_quarantine; the rest of their pages went in.
	Quarantined int64 `json:"quarantined,omitempty"`
}

// Add adds o to c.
func (c *Counts) Add(o Counts) {
	c.Fetched += o.Fetched
	c.Quarantined += o.Quarantined
	c.Counts.Add(o.Counts)
}

// Run is one row of sync_runs: a pass, or an operator's cursor change.
type Run struct {
	RunID, Source, Resource, Kind, Status string
	// Error is the error text of a failed pass; "" otherwise.
	Error string
	// Actor is the operator of a cursor_set / cursor_reset; "" for passes.
	Actor       string
	StartedAt   time.Time
	FinishedAt  *time.Time // nil while running
	WindowSince *time.Time // incremental: updated_since of the window
	// WindowFrom and WindowTo are the spent-date range of a backfill or
	// reconcile pass; zero otherwise.
	WindowFrom, WindowTo            clients.Date
	HighWaterBefore, HighWaterAfter *time.Time
	Pages                           int
	Counts                          Counts
}

// StartRunParams are the inputs of StartRun.
type StartRunParams struct {
	RunID, Source, Resource, Kind string
	WindowSince                   *time.Time
	WindowFrom, WindowTo          clients.Date
	HighWaterBefore               *time.Time
}

const sqlStartRun = `
INSERT INTO sync_runs (run_id, source, resource, kind, status, started_at,
                       window_since, window_from, window_to, high_water_before)
VALUES ($1, $2, $3, $4, 'running', now(), $5, $6, $7, $8)`

// StartRun records the start of a pass with status running. It returns
// ErrRunExists when the run id is already recorded.
func (s *Store) StartRun(ctx context.Context, p StartRunParams) error {
	switch p.Kind {
	case KindIncremental, KindBackfill, KindReconcile:
	default:
		return fmt.Errorf("start run %s: unknown kind %q (want incremental, backfill or reconcile)", p.RunID, p.Kind)
	}
	if p.RunID == "" {
		return fmt.Errorf("start run of %s/%s: empty run id", p.Source, p.Resource)
	}
	_, err := s.db.Exec(ctx, sqlStartRun, p.RunID, p.Source, p.Resource, p.Kind,
		ptrTime(p.WindowSince), dateArg(p.WindowFrom), dateArg(p.WindowTo), ptrTime(p.HighWaterBefore))
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "23505" {
		return fmt.Errorf("start run %s: %w", p.RunID, ErrRunExists)
	}
	if err != nil {
		return fmt.Errorf("start run %s of %s/%s: %w", p.RunID, p.Source, p.Resource, err)
	}
	return nil
}

// FinishRunParams are the inputs of FinishRun.
type FinishRunParams struct {
	RunID string
	// Status is ok, failed or cancelled.
	Status string
	// Error is the error text of a failed pass ("" stores NULL).
	Error          string
	Pages          int
	Counts         Counts
	HighWaterAfter *time.Time
}

const sqlFinishRun = `
UPDATE sync_runs
SET status = $2, error = NULLIF($3, ''), finished_at = now(), pages = $4,
    fetched = $5, inserted = $6, updated = $7, unchanged = $8, stale = $9, ties = $10, tombstoned = $11,
    high_water_after = $12, replaced = $13, quarantined = $14
WHERE run_id = $1`

// FinishRun records the end of a run: status, error text, pages, counts and
// high_water_after. Pass the poller's transaction as db to commit it with the
// last page and the cursor, or the pool after a failure. It returns
// ErrNotFound when the run was never started.
func FinishRun(ctx context.Context, db DB, p FinishRunParams) error {
	switch p.Status {
	case StatusOK, StatusFailed, StatusCancelled:
	default:
		return fmt.Errorf("finish run %s: status %q is not final (want ok, failed or cancelled)", p.RunID, p.Status)
	}
	c := p.Counts
	tag, err := db.Exec(ctx, sqlFinishRun, p.RunID, p.Status, p.Error, p.Pages,
		c.Fetched, c.Inserted, c.Updated, c.Unchanged, c.Stale, c.Ties, c.Tombstoned, ptrTime(p.HighWaterAfter), c.Replaced, c.Quarantined)
	if err != nil {
		return fmt.Errorf("finish run %s: %w", p.RunID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("finish run %s: %w", p.RunID, ErrNotFound)
	}
	return nil
}

// RunsParams are the inputs of Runs.
type RunsParams struct {
	// Source and Resource filter when non-empty.
	Source, Resource string
	// Limit caps the number of runs; 0 means DefaultRunsLimit.
	Limit int
}

// DefaultRunsLimit is how many runs Runs returns when no limit is given.
const DefaultRunsLimit = 50

// runColumns is the column list that scanRun reads, for table alias r.
const runColumns = `r.run_id, r.source, r.resource, r.kind, r.status, r.error, r.actor,
       r.started_at, r.finished_at, r.window_since, r.window_from, r.window_to,
       r.high_water_before, r.high_water_after, r.pages,
       r.fetched, r.inserted, r.updated, r.unchanged, r.stale, r.ties, r.tombstoned, r.replaced, r.quarantined`

const sqlRuns = `
SELECT ` + runColumns + `
FROM sync_runs r
WHERE ($1 = '' OR r.source = $1) AND ($2 = '' OR r.resource = $2)
ORDER BY r.started_at DESC, r.id DESC
LIMIT $3`

// Runs returns recent runs, newest first, including operator cursor changes.
func (s *Store) Runs(ctx context.Context, p RunsParams) ([]Run, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = DefaultRunsLimit
	}
	return collect(ctx, s.db, "runs", scanRun, sqlRuns, p.Source, p.Resource, limit)
}

func scanRun(row pgx.CollectableRow) (Run, error) {
	var r runRow
	if err := row.Scan(r.dest()...); err != nil {
		return Run{}, err
	}
	return r.run(), nil
}

const sqlAbandonRuns = `
UPDATE sync_runs
SET status = 'failed', error = $3, finished_at = now()
WHERE status = 'running' AND source = ANY($1) AND started_at < $2`

// AbandonRuns marks the runs of the sources still running but started
// before `before` as failed with error AbandonedError, and returns how many.
// A new owner calls it: a kill -9 leaves its runs running. One statement
// for all the sources a replica takes at once (migration 00015 indexes the
// running rows).
func (s *Store) AbandonRuns(ctx context.Context, sources []string, before time.Time) (int64, error) {
	tag, err := s.db.Exec(ctx, sqlAbandonRuns, sources, before.UTC(), AbandonedError)
	if err != nil {
		return 0, fmt.Errorf("abandon runs of %d sources: %w", len(sources), err)
	}
	return tag.RowsAffected(), nil
}

// runRow scans runColumns; every column is nullable so that it also reads
// the missing side of an outer join.
type runRow struct {
	runID, source, resource, kind, status, errText, actor *string
	startedAt, finishedAt, windowSince                    *time.Time
	windowFrom, windowTo                                  *time.Time
	hwBefore, hwAfter                                     *time.Time
	pages                                                 *int
	fetched, inserted, updated, unchanged                 *int64
	stale, ties, tombstoned                               *int64
	replaced, quarantined                                 *int64
}

func (r *runRow) dest() []any {
	return []any{&r.runID, &r.source, &r.resource, &r.kind, &r.status, &r.errText, &r.actor,
		&r.startedAt, &r.finishedAt, &r.windowSince, &r.windowFrom, &r.windowTo,
		&r.hwBefore, &r.hwAfter, &r.pages,
		&r.fetched, &r.inserted, &r.updated, &r.unchanged, &r.stale, &r.ties, &r.tombstoned, &r.replaced, &r.quarantined}
}

func (r *runRow) run() Run {
	return Run{
		RunID:           deref(r.runID),
		Source:          deref(r.source),
		Resource:        deref(r.resource),
		Kind:            deref(r.kind),
		Status:          deref(r.status),
		Error:           deref(r.errText),
		Actor:           deref(r.actor),
		StartedAt:       fromNullTime(r.startedAt),
		FinishedAt:      utcPtr(r.finishedAt),
		WindowSince:     utcPtr(r.windowSince),
		WindowFrom:      dateOf(r.windowFrom),
		WindowTo:        dateOf(r.windowTo),
		HighWaterBefore: utcPtr(r.hwBefore),
		HighWaterAfter:  utcPtr(r.hwAfter),
		Pages:           deref(r.pages),
		Counts: Counts{Fetched: deref(r.fetched), Quarantined: deref(r.quarantined), Counts: upsert.Counts{
			Inserted:   deref(r.inserted),
			Updated:    deref(r.updated),
			Unchanged:  deref(r.unchanged),
			Stale:      deref(r.stale),
			Ties:       deref(r.ties),
			Tombstoned: deref(r.tombstoned),
			Replaced:   deref(r.replaced),
		}},
	}
}

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// ptrTime is a query argument for a nullable timestamptz.
func ptrTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	return nullTime(*t)
}

// dateArg is a query argument for a nullable date column: a zero Date is NULL.
func dateArg(d clients.Date) *time.Time {
	if d.IsZero() {
		return nil
	}
	t := d.Time()
	return &t
}

// dateOf reads a nullable date column: NULL is the zero Date.
func dateOf(t *time.Time) clients.Date {
	if t == nil {
		return clients.Date{}
	}
	return clients.DateOf(*t)
}
