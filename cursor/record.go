package cursor

import (
	"context"
	"fmt"
	"time"
)

// RunRecord is an incremental run written whole, once, when it ends: an
// idle pass then costs one row write instead of a start and a finish, and
// the passes of one source share one statement (RecordRuns). A pass that
// takes long is written as running first (Status running), so that it shows
// while it lasts; its end then overwrites that row.
type RunRecord struct {
	RunID, Source, Resource, Status string
	// Error is the error text of a failed pass ("" stores NULL).
	Error string
	// Started and Finished are read on this process's clock; the row gets
	// the database's clock less their age when it is written, as a row
	// started and finished in the database would. Finished is zero while
	// running.
	Started, Finished time.Time
	WindowSince       *time.Time
	HighWaterBefore   *time.Time
	HighWaterAfter    *time.Time
	Pages             int
	Counts            Counts
}

const sqlRecordRuns = `
INSERT INTO sync_runs (run_id, source, resource, kind, status, error, started_at, finished_at,
                       window_since, high_water_before, high_water_after, pages,
                       fetched, inserted, updated, unchanged, stale, ties, tombstoned, replaced, quarantined)
SELECT r.run_id, r.source, r.resource, 'incremental', r.status, NULLIF(r.error, ''),
       now() - make_interval(secs => r.started_ago), now() - make_interval(secs => r.finished_ago),
       r.window_since, r.hw_before, r.hw_after, r.pages,
       r.fetched, r.inserted, r.updated, r.unchanged, r.stale, r.ties, r.tombstoned, r.replaced, r.quarantined
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::float8[], $7::float8[],
            $8::timestamptz[], $9::timestamptz[], $10::timestamptz[], $11::int[],
            $12::int8[], $13::int8[], $14::int8[], $15::int8[], $16::int8[], $17::int8[], $18::int8[],
            $19::int8[], $20::int8[])
     AS r(run_id, source, resource, status, error, started_ago, finished_ago,
          window_since, hw_before, hw_after, pages,
          fetched, inserted, updated, unchanged, stale, ties, tombstoned, replaced, quarantined)
ON CONFLICT (run_id) DO UPDATE
SET status = EXCLUDED.status, error = EXCLUDED.error, finished_at = EXCLUDED.finished_at,
    high_water_after = EXCLUDED.high_water_after, pages = EXCLUDED.pages,
    fetched = EXCLUDED.fetched, inserted = EXCLUDED.inserted, updated = EXCLUDED.updated,
    unchanged = EXCLUDED.unchanged, stale = EXCLUDED.stale, ties = EXCLUDED.ties, tombstoned = EXCLUDED.tombstoned,
    replaced = EXCLUDED.replaced, quarantined = EXCLUDED.quarantined
WHERE EXCLUDED.status <> 'running'`

// RecordRuns writes incremental runs in one statement. A finished record
// overwrites the running row of its run; a running record never overwrites
// a row (it may reach the database after its run's end). Pass the poller's
// transaction as db to commit a run with the cursor it moved.
func RecordRuns(ctx context.Context, db DB, runs []RunRecord) error {
	if len(runs) == 0 {
		return nil
	}
	n := len(runs)
	var (
		ids, sources, resources, statuses, errs = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		startedAgo                              = make([]float64, n)
		finishedAgo                             = make([]*float64, n)
		since, before, after                    = make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n)
		pages                                   = make([]int32, n)
		counts                                  [9][]int64
	)
	for i := range counts {
		counts[i] = make([]int64, n)
	}
	now := time.Now()
	for i, r := range runs {
		switch r.Status {
		case StatusRunning, StatusOK, StatusFailed, StatusCancelled:
		default:
			return fmt.Errorf("record run %s: unknown status %q", r.RunID, r.Status)
		}
		if r.RunID == "" || r.Started.IsZero() || (r.Status == StatusRunning) != r.Finished.IsZero() {
			return fmt.Errorf("record run %q of %s/%s: needs a run id, a start, and an end unless running", r.RunID, r.Source, r.Resource)
		}
		ids[i], sources[i], resources[i], statuses[i], errs[i] = r.RunID, r.Source, r.Resource, r.Status, r.Error
		startedAgo[i] = now.Sub(r.Started).Seconds()
		if !r.Finished.IsZero() {
			ago := now.Sub(r.Finished).Seconds()
			finishedAgo[i] = &ago
		}
		since[i], before[i], after[i] = ptrTime(r.WindowSince), ptrTime(r.HighWaterBefore), ptrTime(r.HighWaterAfter)
		pages[i] = int32(r.Pages)
		c := r.Counts
		for k, v := range []int64{c.Fetched, c.Inserted, c.Updated, c.Unchanged, c.Stale, c.Ties, c.Tombstoned, c.Replaced, c.Quarantined} {
			counts[k][i] = v
		}
	}
	_, err := db.Exec(ctx, sqlRecordRuns, ids, sources, resources, statuses, errs, startedAgo, finishedAgo,
		since, before, after, pages, counts[0], counts[1], counts[2], counts[3], counts[4], counts[5], counts[6], counts[7], counts[8])
	if err != nil {
		return fmt.Errorf("record %d runs (first %s of %s/%s): %w", n, runs[0].RunID, runs[0].Source, runs[0].Resource, err)
	}
	return nil
}
