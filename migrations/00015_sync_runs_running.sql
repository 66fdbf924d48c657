-- +goose NO TRANSACTION
-- +goose Up
-- A new owner of a source marks the runs its previous owner left running as
-- abandoned (cursor.AbandonRuns). By (source, resource, started_at) that
-- walked every run the source kept: a replica taking 3,000 sources read
-- millions of rows at start. Running rows are few: index just them.
-- CONCURRENTLY, for the reason 00014 gives.
DROP INDEX CONCURRENTLY IF EXISTS sync_runs_running;
CREATE INDEX CONCURRENTLY sync_runs_running ON sync_runs (source) WHERE status = 'running';
COMMENT ON INDEX sync_runs_running IS 'A new owner abandons the runs its predecessor left running (cursor.AbandonRuns).';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS sync_runs_running;
