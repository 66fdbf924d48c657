-- +goose Up
-- Issue 23: an event id names one change for ever. A record that returns to
-- an earlier (version, content) gets the next occurrence's id; the
-- occurrences were counted in the feed, which retention empties, so a
-- record's first id came back for a later change. The count now lives here,
-- written by events.Append with each change and never pruned.
CREATE TABLE event_states (
    source    text        NOT NULL,
    resource  text        NOT NULL,
    record_id text        NOT NULL,
    version   timestamptz NOT NULL,
    hashes    bytea[]     NOT NULL,
    PRIMARY KEY (source, resource, record_id)
);
COMMENT ON TABLE event_states IS 'Per record with events: the content hashes of the changes it had at its latest version, so that an event id is never reused after retention.';
COMMENT ON COLUMN event_states.version IS 'The version of the record''s last event.';
COMMENT ON COLUMN event_states.hashes IS 'The content hashes of the record''s events at that version, in order: a change to a hash already there gets the next occurrence''s id.';

-- Seed from the feed as it is, so that the ids still kept count as before.
INSERT INTO event_states (source, resource, record_id, version, hashes)
SELECT e.source, e.resource, e.record_id, l.version, array_agg(e.content_hash ORDER BY e.seq)
FROM events e
JOIN (SELECT source, resource, record_id, max(version) AS version FROM events GROUP BY 1, 2, 3) l
  USING (source, resource, record_id)
WHERE e.version = l.version
GROUP BY e.source, e.resource, e.record_id, l.version;

-- +goose Down
DROP TABLE event_states;
