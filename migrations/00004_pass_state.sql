-- +goose Up
-- What a daemon knows about each resource of a source between passes, kept
-- where `tidemark cursors` (another process) can show it and a restarted
-- daemon can pick it up: a back-off after failures, and a reconcile that is
-- due but has not run yet.
CREATE TABLE pass_state (
    source        text        NOT NULL,
    resource      text        NOT NULL,
    kind          text        NOT NULL CHECK (kind IN ('incremental', 'reconcile')),
    failures      integer     NOT NULL DEFAULT 0,
    backoff_until timestamptz,
    last_error    text,
    due_since     timestamptz,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, resource, kind)
);
COMMENT ON TABLE pass_state IS 'Per (source, resource, pass kind): back-off after failures and pending reconciles; written by the daemon, shown by tidemark cursors.';
COMMENT ON COLUMN pass_state.source IS 'Configured source name.';
COMMENT ON COLUMN pass_state.resource IS 'Resource (table) name.';
COMMENT ON COLUMN pass_state.kind IS 'incremental or reconcile.';
COMMENT ON COLUMN pass_state.failures IS 'Consecutive failed passes of this kind; 0 after a success.';
COMMENT ON COLUMN pass_state.backoff_until IS 'No pass of this kind before this time (our clock); null when not backing off.';
COMMENT ON COLUMN pass_state.last_error IS 'The last failure''s error; null after a success.';
COMMENT ON COLUMN pass_state.due_since IS 'reconcile only: when a scheduled reconcile became due; null once it has run. A due reconcile waits out its back-off but is never dropped.';
COMMENT ON COLUMN pass_state.updated_at IS 'When the row last changed.';

-- +goose Down
DROP TABLE pass_state;
