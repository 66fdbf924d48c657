package cursor

import (
	"context"
	"time"
)

const sqlRefusals = `
SELECT ` + runColumns + `
FROM sync_runs r
WHERE r.kind = 'reconcile' AND r.status = 'failed' AND r.started_at >= $2
  AND strpos(r.error, $1) > 0
ORDER BY r.started_at DESC, r.id DESC
LIMIT 50`

// Refusals lists the reconciles since a time that failed with an error
// holding reason (the upsert's "too many tombstones" refusal), newest
// first: the status page shows them until the operator has looked.
func (s *Store) Refusals(ctx context.Context, reason string, since time.Time) ([]Run, error) {
	return collect(ctx, s.db, "refused reconciles", scanRun, sqlRefusals, reason, since.UTC())
}
