-- +goose Up
-- How a source is read when it has more than one way (Clockify: the change
-- feed, or per-user listings while the feed is unusable), so that
-- `tidemark cursors`, another process, can show it.
ALTER TABLE pass_state ADD COLUMN mode text;
COMMENT ON COLUMN pass_state.mode IS 'incremental only: how the last pass read the resource when the source has more than one way (e.g. feed, or listing: <why>); null when it has one.';

-- +goose Down
ALTER TABLE pass_state DROP COLUMN mode;
