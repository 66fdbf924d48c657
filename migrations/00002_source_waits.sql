-- +goose Up
-- A source asked us to wait (Toggl's 402 hourly quota, a long Retry-After):
-- recorded so that `tidemark cursors`, another process, can say so.
CREATE TABLE source_waits (
    source     text        PRIMARY KEY,
    until      timestamptz NOT NULL,
    reason     text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE source_waits IS 'Sources currently waiting on the provider (quota spent, long Retry-After); a row is removed when the source answers again.';
COMMENT ON COLUMN source_waits.source IS 'Configured source name.';
COMMENT ON COLUMN source_waits.until IS 'When the wait ends (our clock).';
COMMENT ON COLUMN source_waits.reason IS 'quota (HTTP 402) or retry_after (HTTP 429).';

-- +goose Down
DROP TABLE source_waits;
