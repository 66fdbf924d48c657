-- +goose Up
-- A backfill interrupted by a daemon's shutdown or a lost lease goes back to
-- the queue as 'requeued', never through 'cancelled' or 'failed', which a
-- follower (tidemark backfill) would take as its end.
ALTER TABLE backfills DROP CONSTRAINT backfills_status_check;
ALTER TABLE backfills ADD CONSTRAINT backfills_status_check
    CHECK (status IN ('queued', 'requeued', 'running', 'done', 'failed', 'cancelled'));
COMMENT ON COLUMN backfills.status IS 'queued, requeued (interrupted; the owner resumes it), running, done, failed or cancelled.';

-- +goose Down
UPDATE backfills SET status = 'queued' WHERE status = 'requeued';
ALTER TABLE backfills DROP CONSTRAINT backfills_status_check;
ALTER TABLE backfills ADD CONSTRAINT backfills_status_check
    CHECK (status IN ('queued', 'running', 'done', 'failed', 'cancelled'));
COMMENT ON COLUMN backfills.status IS 'queued, running, done, failed or cancelled.';
