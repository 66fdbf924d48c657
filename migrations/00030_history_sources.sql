-- +goose Up
-- History (issue 31): which (source, resource) has kept its history without
-- a break since `since`. Present: every change since then has its version in
-- <resource>_history. A process that starts with history off for it deletes
-- the row, so that turning it on again first records the stored versions
-- that changed meanwhile ("first_seen"). The history tables themselves are
-- declared from the resources' declarations when history is first turned on.
CREATE TABLE history_sources (
    source   text        NOT NULL,
    resource text        NOT NULL,
    since    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, resource)
);
COMMENT ON TABLE history_sources IS 'Resources of a source whose history (`history:`) has been on without a break since `since`; <resource>_history holds their versions.';

-- +goose Down
DROP TABLE history_sources;
