-- +goose Up
-- Issue 13: the change feed. One row per real change of a mirror row
-- (insert, newer version, tombstone), appended by upsert in the transaction
-- of the change for the sources with `events: on`. River's own tables (the
-- webhook deliveries) are created by River's migrator, run after these.
CREATE TABLE events (
    seq          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id     uuid        NOT NULL,
    source       text        NOT NULL,
    resource     text        NOT NULL,
    record_id    text        NOT NULL,
    kind         text        NOT NULL CHECK (kind IN ('created', 'updated', 'deleted')),
    version      timestamptz NOT NULL,
    content_hash bytea       NOT NULL,
    recorded_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT events_event_id_key UNIQUE (event_id)
);
-- recorded_at grows with seq (appends are serialized), so a BRIN index is
-- enough for retention and costs almost no WAL per event.
CREATE INDEX events_recorded_at_brin ON events USING brin (recorded_at);
COMMENT ON TABLE events IS 'The change feed: one row per real change of a mirror row, in commit order (seq). Kept for the retention horizon.';
COMMENT ON COLUMN events.seq IS 'Position in the feed: commit order across every source and resource.';
COMMENT ON COLUMN events.event_id IS 'Stable id derived from (source, resource, record_id, version, content_hash): the same change applied again, after a crash, on another replica or from a backfill, has the same id.';
COMMENT ON COLUMN events.source IS 'The configured source name.';
COMMENT ON COLUMN events.resource IS 'The mirror table (resource name).';
COMMENT ON COLUMN events.record_id IS 'The record id in its mirror table (with source, the row''s key).';
COMMENT ON COLUMN events.kind IS 'created (the mirror did not have the record), updated, or deleted (a tombstone).';
COMMENT ON COLUMN events.version IS 'The record''s version after the change (the mirror row''s updated_at).';
COMMENT ON COLUMN events.content_hash IS 'The row''s content hash after the change.';
COMMENT ON COLUMN events.recorded_at IS 'When the change was written (database clock).';

-- A consumer's position: the seq of the last event it acknowledged.
CREATE TABLE event_consumers (
    name        text PRIMARY KEY,
    position    bigint      NOT NULL,
    status      text        NOT NULL DEFAULT 'active',
    status_note text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE event_consumers IS 'Named consumers of the change feed and their positions.';
COMMENT ON COLUMN event_consumers.position IS 'seq of the last event acknowledged; the next event is the first with a greater seq.';
COMMENT ON COLUMN event_consumers.status IS 'active, or disabled (a webhook endpoint answered 410 Gone; see status_note).';

-- The retention horizon: every event with seq <= pruned_through is gone.
CREATE TABLE event_horizon (
    one            boolean PRIMARY KEY DEFAULT true CHECK (one),
    pruned_through bigint      NOT NULL DEFAULT 0,
    pruned_at      timestamptz
);
INSERT INTO event_horizon DEFAULT VALUES;
COMMENT ON TABLE event_horizon IS 'Retention watermark: events with seq <= pruned_through were deleted; a consumer positioned before it must resynchronize from the mirror tables.';

-- +goose Down
DROP TABLE event_horizon;
DROP TABLE event_consumers;
DROP TABLE events;
