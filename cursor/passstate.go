package cursor

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// PassState is what a daemon keeps per (source, resource, kind) between
// passes: a back-off after failures, and a due reconcile not yet run.
type PassState struct {
	Source, Resource, Kind string
	Failures               int
	BackoffUntil           *time.Time
	LastError              string
	DueSince               *time.Time
	// Mode says how the last incremental pass read the resource, when the
	// source has more than one way ("" when it has one).
	Mode      string
	UpdatedAt time.Time
}

const sqlPassFailed = `
INSERT INTO pass_state (source, resource, kind, failures, backoff_until, last_error)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (source, resource, kind) DO UPDATE
SET failures = EXCLUDED.failures, backoff_until = EXCLUDED.backoff_until,
    last_error = EXCLUDED.last_error, updated_at = now()`

// PassFailed records a failed pass and the back-off that follows it.
func (s *Store) PassFailed(ctx context.Context, source, resource, kind string, failures int, until time.Time, errText string) error {
	if _, err := s.db.Exec(ctx, sqlPassFailed, source, resource, kind, failures, until, errText); err != nil {
		return fmt.Errorf("record failure of %s/%s %s: %w", source, resource, kind, err)
	}
	return nil
}

const sqlPassOK = `
UPDATE pass_state
SET failures = 0, backoff_until = NULL, last_error = NULL,
    due_since = CASE WHEN $4 THEN NULL ELSE due_since END, updated_at = now()
WHERE source = $1 AND resource = $2 AND kind = $3
  AND (failures <> 0 OR due_since IS NOT NULL)`

// PassOK records a successful pass: no back-off, and for a reconcile, no
// longer due. A source that never failed costs an UPDATE of no row.
func (s *Store) PassOK(ctx context.Context, source, resource, kind string) error {
	if _, err := s.db.Exec(ctx, sqlPassOK, source, resource, kind, kind == KindReconcile); err != nil {
		return fmt.Errorf("record success of %s/%s %s: %w", source, resource, kind, err)
	}
	return nil
}

const sqlMarkDue = `
INSERT INTO pass_state (source, resource, kind, due_since)
SELECT $1, r, 'reconcile', $3 FROM unnest($2::text[]) AS r
ON CONFLICT (source, resource, kind) DO UPDATE
SET due_since = COALESCE(pass_state.due_since, EXCLUDED.due_since), updated_at = now()`

// MarkReconcileDue records that a reconcile of these resources is due. An
// earlier due time is kept: the reconcile is still owed from then.
func (s *Store) MarkReconcileDue(ctx context.Context, source string, resources []string, since time.Time) error {
	if _, err := s.db.Exec(ctx, sqlMarkDue, source, resources, since); err != nil {
		return fmt.Errorf("mark reconcile of %s due: %w", source, err)
	}
	return nil
}

const sqlPassStates = `
SELECT source, resource, kind, failures, backoff_until, last_error, due_since, COALESCE(mode, ''), updated_at
FROM pass_state
WHERE $1 = '' OR source = $1
ORDER BY source, resource, kind`

// PassStates lists the pass state of a source, or of all when source is "".
func (s *Store) PassStates(ctx context.Context, source string) ([]PassState, error) {
	return collect(ctx, s.db, "pass state", scanPassState, sqlPassStates, source)
}

func scanPassState(row pgx.CollectableRow) (PassState, error) {
	var ps PassState
	var lastErr *string
	err := row.Scan(&ps.Source, &ps.Resource, &ps.Kind, &ps.Failures, &ps.BackoffUntil, &lastErr, &ps.DueSince, &ps.Mode, &ps.UpdatedAt)
	ps.LastError = deref(lastErr)
	ps.BackoffUntil, ps.DueSince = utcPtr(ps.BackoffUntil), utcPtr(ps.DueSince)
	ps.UpdatedAt = ps.UpdatedAt.UTC()
	return ps, err
}

const sqlSetMode = `
INSERT INTO pass_state (source, resource, kind, mode)
VALUES ($1, $2, 'incremental', NULLIF($3, ''))
ON CONFLICT (source, resource, kind) DO UPDATE
SET mode = EXCLUDED.mode, updated_at = now()
WHERE pass_state.mode IS DISTINCT FROM EXCLUDED.mode`

// SetMode records how incremental passes of a resource read it now (see
// PassState.Mode); an unchanged mode writes nothing.
func (s *Store) SetMode(ctx context.Context, source, resource, mode string) error {
	if _, err := s.db.Exec(ctx, sqlSetMode, source, resource, mode); err != nil {
		return fmt.Errorf("record the read mode of %s/%s: %w", source, resource, err)
	}
	return nil
}
