-- +goose Up
-- Fields users filter on, and what a day was dated by (issue 10): the start
-- and end instants, the zone the spent date was taken in, tags, and
-- Harvest's approval state and external reference. All nullable: a source
-- that does not send one leaves it null, and existing rows keep theirs
-- null until their next version.
ALTER TABLE time_entries
    ADD COLUMN started_at         timestamptz,
    ADD COLUMN ended_at           timestamptz,
    ADD COLUMN time_zone          text,
    ADD COLUMN tags               jsonb,
    ADD COLUMN approval_status    text,
    ADD COLUMN external_reference jsonb;
COMMENT ON COLUMN time_entries.started_at IS 'When the time started, as an instant; null when the source gives only a day (Harvest).';
COMMENT ON COLUMN time_entries.ended_at IS 'When the time ended; null while a timer runs or when the source gives only a day.';
COMMENT ON COLUMN time_entries.time_zone IS 'IANA zone spent_date was taken in (the user''s, as the provider''s own reports date it); null when the source sends the day itself (Harvest).';
COMMENT ON COLUMN time_entries.tags IS 'Tag names, a JSON array of strings; null when the source has no tags.';
COMMENT ON COLUMN time_entries.approval_status IS 'Harvest approval state: unsubmitted, submitted or approved; null elsewhere.';
COMMENT ON COLUMN time_entries.external_reference IS 'Harvest external reference (the linked issue or task elsewhere), as sent; null when none.';

-- +goose Down
ALTER TABLE time_entries
    DROP COLUMN started_at,
    DROP COLUMN ended_at,
    DROP COLUMN time_zone,
    DROP COLUMN tags,
    DROP COLUMN approval_status,
    DROP COLUMN external_reference;
