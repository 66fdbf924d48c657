-- +goose NO TRANSACTION
-- +goose Up
-- Retention of sync_runs (issue 15, cursor/prune.go): the pruner deletes
-- idle runs after runs.keep_idle and the others after runs.keep. Each kind
-- gets a partial index by finished_at, so that either delete reads only the
-- rows old enough for it and never walks the ones it keeps (between a day
-- and a month old: the busy runs). Every finished row is in exactly one of
-- them, so a run write maintains one more index, not two. The predicate
-- must stay the same as cursor.idleRun for the planner to use them.
-- CONCURRENTLY: a fleet's sync_runs can hold tens of millions of rows, and a
-- plain CREATE INDEX would block every pass's run write while it builds. A
-- build that failed leaves an invalid index behind: drop it first.
DROP INDEX CONCURRENTLY IF EXISTS sync_runs_idle_expiry;
CREATE INDEX CONCURRENTLY sync_runs_idle_expiry ON sync_runs (finished_at)
WHERE (status = 'ok' AND kind IN ('incremental', 'backfill', 'reconcile')
    AND inserted = 0 AND updated = 0 AND tombstoned = 0
    AND high_water_after IS NOT DISTINCT FROM high_water_before);
DROP INDEX CONCURRENTLY IF EXISTS sync_runs_busy_expiry;
CREATE INDEX CONCURRENTLY sync_runs_busy_expiry ON sync_runs (finished_at)
WHERE NOT (status = 'ok' AND kind IN ('incremental', 'backfill', 'reconcile')
    AND inserted = 0 AND updated = 0 AND tombstoned = 0
    AND high_water_after IS NOT DISTINCT FROM high_water_before);
COMMENT ON INDEX sync_runs_idle_expiry IS 'Retention (runs.keep_idle): idle runs by finished_at. Idle: a pass that ended ok with nothing inserted, updated or tombstoned and its cursor unchanged.';
COMMENT ON INDEX sync_runs_busy_expiry IS 'Retention (runs.keep): every other run (and operator record) by finished_at; a running row has no finished_at.';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS sync_runs_busy_expiry;
DROP INDEX CONCURRENTLY IF EXISTS sync_runs_idle_expiry;
