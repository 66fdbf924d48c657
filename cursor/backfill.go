package cursor

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/schema"
)

// Statuses of a backfill (StatusRunning, StatusFailed and StatusCancelled
// are shared with runs).
const (
	BackfillQueued = "queued"
	// BackfillRequeued is a backfill interrupted by its daemon's shutdown or
	// a lost lease: not an end, the owner resumes it.
	BackfillRequeued = "requeued"
	BackfillDone     = "done"
)

// Final reports whether a backfill status is an end: done, failed or
// cancelled. Queued, requeued and running are not.
func Final(status string) bool {
	switch status {
	case BackfillDone, StatusFailed, StatusCancelled:
		return true
	}
	return false
}

// Backfill is the progress of one backfill of a spent-date range.
type Backfill struct {
	ID               int64
	Source, Resource string
	// From and To are the range, both inclusive. Next is the first day not
	// yet applied: a resumed backfill continues there.
	From, To, Next clients.Date
	WindowDays     int
	Status         string
	WindowsDone    int
	WindowsTotal   int
	Records        int64
	Error          string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	FinishedAt     *time.Time
}

// Done reports whether every day of the range has been applied.
func (b Backfill) Done() bool { return b.Next.After(b.To) }

// BackfillParams are the inputs of StartBackfill.
type BackfillParams struct {
	Source, Resource string
	From, To         clients.Date
	WindowDays       int
}

const backfillColumns = `id, source, resource, from_date, to_date, next_date, window_days, status,
       windows_done, windows_total, records, error, created_at, updated_at, finished_at`

// sqlStartBackfill creates the backfill of a range, or, when an unfinished
// one exists (the partial unique index backfills_open_range), takes it up
// again as running. Two concurrent calls for one range get the same row: the
// second waits for the first's insert, then updates that row.
const sqlStartBackfill = `
INSERT INTO backfills (source, resource, from_date, to_date, window_days, next_date, status, windows_total)
VALUES ($1, $2, $3, $4, $5, $3, 'running', $6)
ON CONFLICT (source, resource, from_date, to_date) WHERE status <> 'done'
DO UPDATE SET status = 'running', error = NULL, finished_at = NULL, updated_at = now()
RETURNING ` + backfillColumns

// StartBackfill returns the unfinished backfill of the same (source,
// resource, from, to) with its status set to running (resume: continue at
// its Next, with its own WindowDays), or else creates one with Next = From
// and WindowsTotal = ceil(days / WindowDays).
func (s *Store) StartBackfill(ctx context.Context, p BackfillParams) (Backfill, error) {
	return s.writeBackfill(ctx, "start", sqlStartBackfill, p)
}

// writeBackfill checks p and runs query, an INSERT … RETURNING one
// backfill with the windows it will take; verb names the act in errors.
func (s *Store) writeBackfill(ctx context.Context, verb, query string, p BackfillParams) (Backfill, error) {
	switch {
	case p.From.IsZero() || p.To.IsZero():
		return Backfill{}, fmt.Errorf("%s backfill of %s/%s: from and to dates are both required", verb, p.Source, p.Resource)
	case p.To.Before(p.From):
		return Backfill{}, fmt.Errorf("%s backfill of %s/%s: from %s is after to %s", verb, p.Source, p.Resource, p.From, p.To)
	case p.WindowDays <= 0:
		return Backfill{}, fmt.Errorf("%s backfill of %s/%s: window days must be positive, got %d", verb, p.Source, p.Resource, p.WindowDays)
	}
	days := int(p.To.Time().Sub(p.From.Time())/(24*time.Hour)) + 1
	if t, ok := schema.Lookup(clients.Resource(p.Resource)); ok && !t.ListedByDate() {
		// Listed whole, not by date: the range is one window, so that
		// progress reads 1/1 when it is done, not 1 of the range's windows.
		p.WindowDays = days
	}
	total := (days + p.WindowDays - 1) / p.WindowDays
	rows, err := s.db.Query(ctx, query, p.Source, p.Resource, p.From.Time(), p.To.Time(), p.WindowDays, total)
	if err != nil {
		return Backfill{}, fmt.Errorf("%s backfill of %s/%s %s..%s: %w", verb, p.Source, p.Resource, p.From, p.To, err)
	}
	b, err := pgx.CollectExactlyOneRow(rows, scanBackfill)
	if err != nil {
		return Backfill{}, fmt.Errorf("%s backfill of %s/%s %s..%s: %w", verb, p.Source, p.Resource, p.From, p.To, noRows(err))
	}
	return b, nil
}

// sqlBackfillProgress moves next_date forward only; a window counts as done
// only when it moves next_date.
const sqlBackfillProgress = `
UPDATE backfills
SET next_date = GREATEST(next_date, $2::date),
    windows_done = windows_done + CASE WHEN $2::date > next_date THEN 1 ELSE 0 END,
    records = records + $3,
    updated_at = now()
WHERE id = $1`

// BackfillProgress records, in the caller's transaction (with the window's
// last page), that the days before next are applied: next_date = next,
// windows_done + 1, records + n. It never moves next_date backward: a next
// at or before the stored one only adds the records.
func BackfillProgress(ctx context.Context, tx DB, id int64, next clients.Date, records int64) error {
	if next.IsZero() {
		return fmt.Errorf("backfill %d progress: no next date", id)
	}
	tag, err := tx.Exec(ctx, sqlBackfillProgress, id, next.Time(), records)
	if err != nil {
		return fmt.Errorf("backfill %d progress to %s: %w", id, next, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("backfill %d progress: %w", id, ErrNotFound)
	}
	return nil
}

const sqlFinishBackfill = `
UPDATE backfills
SET status = $2, error = NULLIF($3, ''), finished_at = now(), updated_at = now()
WHERE id = $1`

// FinishBackfill ends a backfill as done, failed or cancelled. A failed or
// cancelled one stays resumable by StartBackfill of the same range; once
// done, the same range starts afresh.
func (s *Store) FinishBackfill(ctx context.Context, id int64, status, errText string) error {
	switch status {
	case BackfillDone, StatusFailed, StatusCancelled:
	default:
		return fmt.Errorf("finish backfill %d: status %q is not final (want done, failed or cancelled)", id, status)
	}
	tag, err := s.db.Exec(ctx, sqlFinishBackfill, id, status, errText)
	if err != nil {
		return fmt.Errorf("finish backfill %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("finish backfill %d: %w", id, ErrNotFound)
	}
	return nil
}

const sqlBackfills = `
SELECT ` + backfillColumns + `
FROM backfills
WHERE $1 = '' OR source = $1
ORDER BY created_at DESC, id DESC`

// Backfills lists backfills, newest first, filtered by source when non-empty.
func (s *Store) Backfills(ctx context.Context, source string) ([]Backfill, error) {
	return collect(ctx, s.db, "backfills", scanBackfill, sqlBackfills, source)
}

func scanBackfill(row pgx.CollectableRow) (Backfill, error) {
	var (
		b                  Backfill
		from, to, next     time.Time
		errText            *string
		finishedAt         *time.Time
		createdAt, updated time.Time
	)
	err := row.Scan(&b.ID, &b.Source, &b.Resource, &from, &to, &next, &b.WindowDays, &b.Status,
		&b.WindowsDone, &b.WindowsTotal, &b.Records, &errText, &createdAt, &updated, &finishedAt)
	if err != nil {
		return Backfill{}, err
	}
	b.From, b.To, b.Next = clients.DateOf(from), clients.DateOf(to), clients.DateOf(next)
	b.Error = deref(errText)
	b.CreatedAt, b.UpdatedAt = createdAt.UTC(), updated.UTC()
	b.FinishedAt = utcPtr(finishedAt)
	return b, nil
}
