-- +goose NO TRANSACTION
-- +goose Up
-- Retention of sync_runs (issue 15, cursor/prune.go): the pruner deletes
-- idle runs after runs.keep_idle and every run after runs.keep. One index
-- serves both: the idle runs older than a cutoff are one range of it, the
-- others another, so neither delete walks the rows it keeps. The key
-- expression must stay the same as cursor.idleRun for the planner to use it.
-- CONCURRENTLY: a fleet's sync_runs can hold tens of millions of rows, and a
-- plain CREATE INDEX would block every pass's run write while it builds. A
-- build that failed leaves an invalid index behind: drop it first.
DROP INDEX CONCURRENTLY IF EXISTS sync_runs_expiry;
CREATE INDEX CONCURRENTLY sync_runs_expiry ON sync_runs ((
    status = 'ok' AND kind IN ('incremental', 'backfill', 'reconcile')
    AND inserted = 0 AND updated = 0 AND tombstoned = 0
    AND high_water_after IS NOT DISTINCT FROM high_water_before
), finished_at);
COMMENT ON INDEX sync_runs_expiry IS 'Retention: (idle, finished_at). Idle: a pass that ended ok with nothing inserted, updated or tombstoned and its cursor unchanged; runs.keep_idle applies to those, runs.keep to all.';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS sync_runs_expiry;
