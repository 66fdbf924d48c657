-- +goose Up
-- Issue 22: a record that cannot be stored fails alone. It waits here,
-- named with its error, while the rest of its page goes in; every later
-- pass that lists it tries it again, and an incremental cursor stays below
-- its version until it goes in (README, "The schema").
CREATE TABLE record_quarantine (
    source          text        NOT NULL,
    resource        text        NOT NULL,
    id              text        NOT NULL,
    version         timestamptz,
    raw             text        NOT NULL,
    error           text        NOT NULL,
    first_failed_at timestamptz NOT NULL DEFAULT now(),
    last_failed_at  timestamptz NOT NULL DEFAULT now(),
    failures        integer     NOT NULL DEFAULT 1,
    last_run_id     text        NOT NULL,
    PRIMARY KEY (source, resource, id)
);
COMMENT ON TABLE record_quarantine IS 'Records a pass could not store (the rest of their page went in); retried by every later pass that lists them, removed once stored or no longer listed.';
COMMENT ON COLUMN record_quarantine.source IS 'Configured source name.';
COMMENT ON COLUMN record_quarantine.resource IS 'Resource (table) name.';
COMMENT ON COLUMN record_quarantine.id IS 'The record''s id at the source, as received (bytes Postgres refuses shown escaped).';
COMMENT ON COLUMN record_quarantine.version IS 'The record''s version; an incremental cursor stays below the earliest one of its resource.';
COMMENT ON COLUMN record_quarantine.raw IS 'The record as received (JSON text; bytes Postgres refuses shown escaped).';
COMMENT ON COLUMN record_quarantine.error IS 'Why it could not be stored, at its last try.';
COMMENT ON COLUMN record_quarantine.first_failed_at IS 'When it first failed.';
COMMENT ON COLUMN record_quarantine.last_failed_at IS 'When it last failed.';
COMMENT ON COLUMN record_quarantine.failures IS 'How many passes failed to store it.';
COMMENT ON COLUMN record_quarantine.last_run_id IS 'The run (sync_runs.run_id) that last failed to store it.';

-- +goose Down
DROP TABLE record_quarantine;
