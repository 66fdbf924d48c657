package cursor

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// sqlQueueBackfill creates a queued backfill of a range, or queues again an
// unfinished one (failed, cancelled); one already running stays running.
const sqlQueueBackfill = `
INSERT INTO backfills (source, resource, from_date, to_date, window_days, next_date, status, windows_total)
VALUES ($1, $2, $3, $4, $5, $3, 'queued', $6)
ON CONFLICT (source, resource, from_date, to_date) WHERE status <> 'done'
DO UPDATE SET status = CASE WHEN backfills.status = 'running' THEN 'running' ELSE 'queued' END,
              error = NULL, finished_at = NULL, updated_at = now()
RETURNING ` + backfillColumns

// QueueBackfill asks the daemon that owns the source to run a backfill
// (DESIGN.md, Scale-out: one owner, one rate budget). The owner picks it up
// with QueuedBackfills and runs it through StartBackfill, which resumes the
// same row.
func (s *Store) QueueBackfill(ctx context.Context, p BackfillParams) (Backfill, error) {
	return s.writeBackfill(ctx, "queue", sqlQueueBackfill, p)
}

const sqlQueuedBackfills = `
SELECT ` + backfillColumns + `
FROM backfills
WHERE status IN ('queued', 'requeued') AND ($1 = '' OR source = $1)
ORDER BY id`

// QueuedBackfills lists queued and requeued backfills, oldest first.
func (s *Store) QueuedBackfills(ctx context.Context, source string) ([]Backfill, error) {
	return collect(ctx, s.db, "queued backfills", scanBackfill, sqlQueuedBackfills, source)
}

const sqlBackfillByID = `SELECT ` + backfillColumns + ` FROM backfills WHERE id = $1`

// Backfill returns one backfill by id (ErrNotFound when none).
func (s *Store) Backfill(ctx context.Context, id int64) (Backfill, error) {
	rows, err := s.db.Query(ctx, sqlBackfillByID, id)
	if err != nil {
		return Backfill{}, fmt.Errorf("backfill %d: %w", id, err)
	}
	b, err := pgx.CollectExactlyOneRow(rows, scanBackfill)
	if err != nil {
		return Backfill{}, fmt.Errorf("backfill %d: %w", id, noRows(err))
	}
	return b, nil
}

const sqlRequeueRunning = `UPDATE backfills SET status = 'requeued', updated_at = now() WHERE status = 'running' AND source = ANY($1)`

// RequeueRunningBackfills puts (as requeued) the sources' backfills still
// marked running back in the queue: a new owner calls it, since whoever ran
// them is gone.
func (s *Store) RequeueRunningBackfills(ctx context.Context, sources []string) (int64, error) {
	tag, err := s.db.Exec(ctx, sqlRequeueRunning, sources)
	if err != nil {
		return 0, fmt.Errorf("queue running backfills of %d sources again: %w", len(sources), err)
	}
	return tag.RowsAffected(), nil
}

const sqlRequeue = `
UPDATE backfills SET status = 'requeued', error = NULLIF($2, ''), updated_at = now()
WHERE id = $1 AND status = 'running'`

// RequeueBackfill hands an interrupted running backfill back to the queue as
// requeued (a daemon stopping, a lease lost): a follower keeps following.
// A backfill no longer running (another owner took it over) is left alone.
func (s *Store) RequeueBackfill(ctx context.Context, id int64, reason string) error {
	if _, err := s.db.Exec(ctx, sqlRequeue, id, reason); err != nil {
		return fmt.Errorf("requeue backfill %d: %w", id, err)
	}
	return nil
}
