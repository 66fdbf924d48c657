package cursor

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Status is one line of `tidemark cursors`: a (source, resource) with its
// cursor and its last pass.
type Status struct {
	Source, Resource string
	// HighWater is zero when never synced or when there is no cursor row yet.
	HighWater time.Time
	// UpdatedBy is who last moved the cursor; "" when there is no cursor row.
	UpdatedBy string
	// LastRun is the newest incremental, backfill or reconcile run, running
	// or finished; nil when none.
	LastRun *Run
	// LastOK is the finished_at of the newest successful run of those kinds.
	LastOK *time.Time
}

// sqlList lists every (source, resource) known from cursors or from passes
// in sync_runs (operator records alone do not make a line: they always come
// with a cursor row), with the cursor, the newest pass and the newest
// successful pass.
const sqlList = `
WITH keys AS (
    SELECT source, resource FROM cursors WHERE $1 = '' OR source = $1
    UNION
    SELECT source, resource FROM sync_runs
    WHERE ($1 = '' OR source = $1) AND kind IN ('incremental', 'backfill', 'reconcile')
)
SELECT k.source, k.resource, c.high_water, coalesce(c.updated_by, ''), ok.finished_at,
       ` + runColumns + `
FROM keys k
LEFT JOIN cursors c ON c.source = k.source AND c.resource = k.resource
LEFT JOIN LATERAL (
    SELECT * FROM sync_runs s
    WHERE s.source = k.source AND s.resource = k.resource
      AND s.kind IN ('incremental', 'backfill', 'reconcile')
    ORDER BY s.started_at DESC, s.id DESC
    LIMIT 1
) r ON true
LEFT JOIN LATERAL (
    SELECT s.finished_at FROM sync_runs s
    WHERE s.source = k.source AND s.resource = k.resource
      AND s.kind IN ('incremental', 'backfill', 'reconcile') AND s.status = 'ok'
    ORDER BY s.started_at DESC, s.id DESC
    LIMIT 1
) ok ON true
ORDER BY k.source, k.resource`

// List returns the state behind `tidemark cursors`: one Status per (source,
// resource) known from cursors or from sync_runs, ordered by source and
// resource, filtered by source when it is non-empty.
func (s *Store) List(ctx context.Context, source string) ([]Status, error) {
	return collect(ctx, s.db, "cursors", scanStatus, sqlList, source)
}

func scanStatus(row pgx.CollectableRow) (Status, error) {
	var (
		st     Status
		hw, ok *time.Time
		r      runRow
	)
	dest := append([]any{&st.Source, &st.Resource, &hw, &st.UpdatedBy, &ok}, r.dest()...)
	if err := row.Scan(dest...); err != nil {
		return Status{}, err
	}
	st.HighWater = fromNullTime(hw)
	st.LastOK = utcPtr(ok)
	if r.runID != nil {
		run := r.run()
		st.LastRun = &run
	}
	return st, nil
}
