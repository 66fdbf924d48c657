-- +goose Up
-- When each config of a source first appeared in the fleet (issue 30, item
-- 8): of two live members with different configs of one source, the one
-- whose config appeared later serves it. A member's load time would not
-- do: any reload or restart bumps it for all its sources, and a replica
-- reloaded for another source took back a source it held in an older form.
CREATE TABLE source_configs (
    source        text        NOT NULL,
    fingerprint   text        NOT NULL,
    first_seen_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (source, fingerprint)
);
COMMENT ON TABLE source_configs IS 'Each config of a source a fleet member has served (fingerprint of its keys, never the token) and when it first appeared: the newer config of a source wins between members.';
COMMENT ON COLUMN source_configs.first_seen_at IS 'When a member first registered this config of the source; never moved afterwards.';

-- +goose Down
DROP TABLE source_configs;
