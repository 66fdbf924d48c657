-- +goose Up
-- Issue 23: an event id names one change for ever. A record that returns to
-- an earlier (version, content) gets the next occurrence's id; the
-- occurrences were counted in the feed only, which retention empties, so a
-- record's first id came back for a later change. Retention now keeps here
-- what it deletes of each record's latest version; appends only read it.
CREATE TABLE event_states (
    source    text        NOT NULL,
    resource  text        NOT NULL,
    record_id text        NOT NULL,
    version   timestamptz NOT NULL,
    hashes    bytea[]     NOT NULL,
    PRIMARY KEY (source, resource, record_id)
);
COMMENT ON TABLE event_states IS 'Per record whose events retention deleted: the content hashes of those at its latest version, so that an event id is never reused after retention. Written by retention only.';
COMMENT ON COLUMN event_states.version IS 'The latest version of the record''s deleted events.';
COMMENT ON COLUMN event_states.hashes IS 'The content hashes of the record''s deleted events at that version, in order: a change to a hash there (or still in the feed) gets the next occurrence''s id.';

-- +goose Down
DROP TABLE event_states;
