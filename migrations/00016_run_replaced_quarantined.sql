-- +goose Up
-- Issue 22: a run counts the records it stored with characters Postgres
-- refuses kept another way, and the records it could not store at all
-- (put in record_quarantine, 00017) while the rest of their pages went in.
ALTER TABLE sync_runs ADD COLUMN replaced bigint NOT NULL DEFAULT 0;
ALTER TABLE sync_runs ADD COLUMN quarantined bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN sync_runs.replaced IS 'Records written with a \u0000 or unpaired surrogate escape kept as text in raw, or NUL and bytes that are not UTF-8 replaced by U+FFFD in a text column.';
COMMENT ON COLUMN sync_runs.quarantined IS 'Records that could not be stored, put in record_quarantine; the rest of their pages went in.';

-- +goose Down
ALTER TABLE sync_runs DROP COLUMN quarantined;
ALTER TABLE sync_runs DROP COLUMN replaced;
