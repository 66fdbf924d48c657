-- +goose Up
-- What each fleet member can serve (issue 25): ownership of a source is
-- spread only over the live members that have it configured.
ALTER TABLE fleet_members ADD COLUMN sources jsonb;
ALTER TABLE fleet_members ADD COLUMN config_at timestamptz;
ALTER TABLE fleet_members ADD COLUMN sources_digest text;
COMMENT ON COLUMN fleet_members.sources IS 'The sources this member has configured: name -> fingerprint of the source''s config (no secret in it). NULL: a member older than this column, taken to serve every source.';
COMMENT ON COLUMN fleet_members.sources_digest IS 'A digest of sources and config_at, written with them: the peers read sources again only when it changes.';
COMMENT ON COLUMN fleet_members.config_at IS 'When the member loaded the config it serves; of two members with different configs for one source, the newer config wins.';

-- +goose Down
ALTER TABLE fleet_members DROP COLUMN sources_digest;
ALTER TABLE fleet_members DROP COLUMN config_at;
ALTER TABLE fleet_members DROP COLUMN sources;
