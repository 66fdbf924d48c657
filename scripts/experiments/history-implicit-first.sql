-- Issue 31, the write-rate targets: what the next layout of the history
-- would cost, measured in SQL alone (BENCHMARKS.md, "History: a measured
-- plan"). Run against a scratch database:
--   psql -q -d scratch -f scripts/experiments/history-implicit-first.sql
-- It compares, per 100,000 new time-entry-shaped rows: the mirror alone;
-- today's first version of each new record (a row in a history table with
-- its three indexes); and the mirror carrying the new record's version in
-- three columns of its own (no history row), with the statement-level
-- trigger that lets PostgreSQL refuse an implicit version beside a history.
\timing on
DROP TABLE IF EXISTS m, h, m2, rows_src CASCADE;
CREATE TABLE rows_src AS
SELECT 's1'::text AS source, (10000000+g)::text AS id, date '2026-01-01' + (g % 365) AS spent_date,
  (14000000 + g % 53)::text AS project_id, (700 + g % 20)::text AS user_id, (g % 8 + 0.25)::numeric AS hours,
  'note ' || g AS notes, jsonb_build_object('id', 10000000+g, 'notes', 'note ' || g, 'hours', g % 8, 'spent_date', '2026-01-01', 'project', jsonb_build_object('id', 14000000 + g % 53, 'name', 'Project x'), 'user', jsonb_build_object('id', 700 + g % 20, 'name', 'User y'), 'billable', true, 'is_locked', false) AS raw,
  now() - interval '1 day' + g * interval '1 ms' AS updated_at, now() AS fetched_at, sha256(g::text::bytea) AS content_hash, NULL::timestamptz AS deleted_at
FROM generate_series(1, 100000) g;
CREATE TABLE m (LIKE rows_src, PRIMARY KEY (source, id));
CREATE INDEX ON m (source, spent_date);
CREATE INDEX ON m (source, updated_at);
CREATE TABLE h (source text, id text, seq bigint GENERATED ALWAYS AS IDENTITY, prev_seq bigint, spent_date date, project_id text, user_id text, hours numeric, notes text,
  updated_at timestamptz, fetched_at timestamptz, content_hash bytea, deleted_at timestamptz, change text, valid_from timestamptz, valid_to timestamptz DEFAULT 'infinity',
  recorded_from timestamptz DEFAULT clock_timestamp(), recorded_to timestamptz DEFAULT 'infinity', run_id text,
  PRIMARY KEY (seq, valid_to, source, id));
CREATE UNIQUE INDEX ON h (source, id, coalesce(prev_seq, 0));
CREATE INDEX ON h (source, spent_date, valid_from, valid_to, project_id, user_id);
-- m2: the mirror with the implicit first version's columns and the check
CREATE TABLE m2 (LIKE rows_src, hist_from timestamptz, hist_recorded timestamptz, hist_run text, PRIMARY KEY (source, id));
CREATE INDEX ON m2 (source, spent_date);
CREATE INDEX ON m2 (source, updated_at);
CREATE OR REPLACE FUNCTION m2_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM new_rows n JOIN h ON h.source = n.source AND h.id = n.id AND coalesce(h.prev_seq, 0) = 0 WHERE n.hist_from IS NOT NULL) THEN
    RAISE EXCEPTION 'a record with a history cannot have an implicit first version';
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER m2_check AFTER INSERT ON m2 REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION m2_check();
CHECKPOINT;
\echo === mirror only (off)
INSERT INTO m SELECT * FROM rows_src;
\echo === history first versions (today: one row per new record)
INSERT INTO h (source, id, spent_date, project_id, user_id, hours, notes, updated_at, fetched_at, content_hash, deleted_at, change, valid_from)
SELECT source, id, spent_date, project_id, user_id, hours, notes, updated_at, fetched_at, content_hash, deleted_at, 'created', updated_at FROM rows_src;
\echo === mirror with implicit version columns + statement trigger (history empty for these ids)
INSERT INTO m2 SELECT 's2', r.id, r.spent_date, r.project_id, r.user_id, r.hours, r.notes, r.raw, r.updated_at, r.fetched_at, r.content_hash, r.deleted_at, r.updated_at, clock_timestamp(), 'run1' FROM rows_src r;
DROP TRIGGER m2_check ON m2;
TRUNCATE m2;
CHECKPOINT;
\echo === the same mirror columns without the trigger
INSERT INTO m2 SELECT 's2', r.id, r.spent_date, r.project_id, r.user_id, r.hours, r.notes, r.raw, r.updated_at, r.fetched_at, r.content_hash, r.deleted_at, r.updated_at, clock_timestamp(), 'run1' FROM rows_src r;
