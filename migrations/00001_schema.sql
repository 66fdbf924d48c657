-- +goose Up
-- The public schema of DESIGN.md. Every resource table: one row per (source, id),
-- the source's version in updated_at, our fetch time, a canonical content hash,
-- the record as received, and deleted_at for tombstones.

CREATE TABLE time_entries (
    source        text        NOT NULL,
    id            text        NOT NULL,
    spent_date    date        NOT NULL,
    hours         numeric     NOT NULL,
    notes         text,
    user_id       text        NOT NULL,
    project_id    text        NOT NULL,
    task_id       text,
    client_id     text,
    billable      boolean     NOT NULL,
    is_locked     boolean     NOT NULL,
    is_closed     boolean     NOT NULL,
    is_billed     boolean     NOT NULL,
    is_running    boolean     NOT NULL,
    invoice_id    text,
    updated_at    timestamptz NOT NULL,
    fetched_at    timestamptz NOT NULL,
    content_hash  bytea       NOT NULL,
    raw           jsonb       NOT NULL,
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz,
    PRIMARY KEY (source, id)
);
CREATE INDEX time_entries_spent_date ON time_entries (source, spent_date);

CREATE TABLE projects (
    source        text        NOT NULL,
    id            text        NOT NULL,
    name          text        NOT NULL,
    code          text,
    client_id     text,
    is_active     boolean     NOT NULL,
    is_billable   boolean     NOT NULL,
    updated_at    timestamptz NOT NULL,
    fetched_at    timestamptz NOT NULL,
    content_hash  bytea       NOT NULL,
    raw           jsonb       NOT NULL,
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz,
    PRIMARY KEY (source, id)
);

CREATE TABLE clients (
    source        text        NOT NULL,
    id            text        NOT NULL,
    name          text        NOT NULL,
    currency      text,
    is_active     boolean     NOT NULL,
    updated_at    timestamptz NOT NULL,
    fetched_at    timestamptz NOT NULL,
    content_hash  bytea       NOT NULL,
    raw           jsonb       NOT NULL,
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz,
    PRIMARY KEY (source, id)
);

CREATE TABLE users (
    source        text        NOT NULL,
    id            text        NOT NULL,
    first_name    text,
    last_name     text,
    email         text,
    is_active     boolean     NOT NULL,
    updated_at    timestamptz NOT NULL,
    fetched_at    timestamptz NOT NULL,
    content_hash  bytea       NOT NULL,
    raw           jsonb       NOT NULL,
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz,
    PRIMARY KEY (source, id)
);

CREATE TABLE tasks (
    source        text        NOT NULL,
    id            text        NOT NULL,
    name          text        NOT NULL,
    is_active     boolean     NOT NULL,
    updated_at    timestamptz NOT NULL,
    fetched_at    timestamptz NOT NULL,
    content_hash  bytea       NOT NULL,
    raw           jsonb       NOT NULL,
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz,
    PRIMARY KEY (source, id)
);

-- Tidemark's own state.

CREATE TABLE cursors (
    source      text        NOT NULL,
    resource    text        NOT NULL,
    high_water  timestamptz,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    updated_by  text        NOT NULL DEFAULT 'poller',
    PRIMARY KEY (source, resource)
);

CREATE TABLE sync_runs (
    id                bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id            text        NOT NULL UNIQUE,
    source            text        NOT NULL,
    resource          text        NOT NULL,
    kind              text        NOT NULL CHECK (kind IN ('incremental', 'backfill', 'reconcile', 'cursor_set', 'cursor_reset')),
    status            text        NOT NULL CHECK (status IN ('running', 'ok', 'failed', 'cancelled')),
    started_at        timestamptz NOT NULL DEFAULT now(),
    finished_at       timestamptz,
    error             text,
    actor             text,
    window_since      timestamptz,
    window_from       date,
    window_to         date,
    high_water_before timestamptz,
    high_water_after  timestamptz,
    pages             integer     NOT NULL DEFAULT 0,
    fetched           bigint      NOT NULL DEFAULT 0,
    inserted          bigint      NOT NULL DEFAULT 0,
    updated           bigint      NOT NULL DEFAULT 0,
    unchanged         bigint      NOT NULL DEFAULT 0,
    stale             bigint      NOT NULL DEFAULT 0,
    ties              bigint      NOT NULL DEFAULT 0,
    tombstoned        bigint      NOT NULL DEFAULT 0
);
CREATE INDEX sync_runs_recent ON sync_runs (source, resource, started_at DESC);

CREATE TABLE backfills (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source        text        NOT NULL,
    resource      text        NOT NULL,
    from_date     date        NOT NULL,
    to_date       date        NOT NULL,
    window_days   integer     NOT NULL CHECK (window_days > 0),
    next_date     date        NOT NULL,
    status        text        NOT NULL CHECK (status IN ('queued', 'running', 'done', 'failed', 'cancelled')),
    windows_done  integer     NOT NULL DEFAULT 0,
    windows_total integer     NOT NULL,
    records       bigint      NOT NULL DEFAULT 0,
    error         text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz,
    CHECK (from_date <= to_date)
);
-- One unfinished backfill per range: running the same range again resumes it.
CREATE UNIQUE INDEX backfills_open_range ON backfills (source, resource, from_date, to_date)
    WHERE status <> 'done';

COMMENT ON TABLE time_entries IS 'Mirror of the tracker''s time entries: one row per (source, id), latest version seen.';
COMMENT ON COLUMN time_entries.source IS 'Configured source name (sources[].name).';
COMMENT ON COLUMN time_entries.id IS 'The provider''s id as text (Harvest/Toggl integers in decimal, Clockify hex).';
COMMENT ON COLUMN time_entries.spent_date IS 'Day the time was spent (local date of the tracker, no zone).';
COMMENT ON COLUMN time_entries.hours IS 'Hours recorded, exact decimal as the source sent it.';
COMMENT ON COLUMN time_entries.notes IS 'Free-text notes; null when none.';
COMMENT ON COLUMN time_entries.user_id IS 'Id of the user who tracked the time (users.id).';
COMMENT ON COLUMN time_entries.project_id IS 'Project id (projects.id).';
COMMENT ON COLUMN time_entries.task_id IS 'Task id (tasks.id); null when none.';
COMMENT ON COLUMN time_entries.client_id IS 'Client id (clients.id); null when none.';
COMMENT ON COLUMN time_entries.billable IS 'Whether the time is billable.';
COMMENT ON COLUMN time_entries.is_locked IS 'Locked against edits (approved or invoiced).';
COMMENT ON COLUMN time_entries.is_closed IS 'Approved.';
COMMENT ON COLUMN time_entries.is_billed IS 'Included in an invoice.';
COMMENT ON COLUMN time_entries.is_running IS 'A timer is running; hours still grow.';
COMMENT ON COLUMN time_entries.invoice_id IS 'Invoice id when billed; null otherwise.';
COMMENT ON COLUMN time_entries.updated_at IS 'The source''s version stamp of this row (Harvest updated_at, Toggl at).';
COMMENT ON COLUMN time_entries.fetched_at IS 'When tidemark fetched this version; breaks ties between equal versions.';
COMMENT ON COLUMN time_entries.content_hash IS 'SHA-256 of the record in canonical JSON form.';
COMMENT ON COLUMN time_entries.raw IS 'The record as the source sent it.';
COMMENT ON COLUMN time_entries.first_seen_at IS 'When tidemark first stored this id; never changed afterwards.';
COMMENT ON COLUMN time_entries.deleted_at IS 'Set when the record was deleted at the source (tombstone); null while live.';

COMMENT ON TABLE projects IS 'Mirror of the tracker''s projects.';
COMMENT ON COLUMN projects.source IS 'Configured source name.';
COMMENT ON COLUMN projects.id IS 'The provider''s project id as text.';
COMMENT ON COLUMN projects.name IS 'Project name.';
COMMENT ON COLUMN projects.code IS 'Project code; null when none.';
COMMENT ON COLUMN projects.client_id IS 'Client id (clients.id).';
COMMENT ON COLUMN projects.is_active IS 'Active (not archived).';
COMMENT ON COLUMN projects.is_billable IS 'Billable project.';
COMMENT ON COLUMN projects.updated_at IS 'The source''s version stamp.';
COMMENT ON COLUMN projects.raw IS 'The record as the source sent it.';
COMMENT ON COLUMN projects.first_seen_at IS 'When tidemark first stored this id.';
COMMENT ON COLUMN projects.deleted_at IS 'Tombstone; null while live.';

COMMENT ON TABLE clients IS 'Mirror of the tracker''s clients (customers).';
COMMENT ON COLUMN clients.source IS 'Configured source name.';
COMMENT ON COLUMN clients.id IS 'The provider''s client id as text.';
COMMENT ON COLUMN clients.name IS 'Client name.';
COMMENT ON COLUMN clients.currency IS 'Billing currency (ISO 4217).';
COMMENT ON COLUMN clients.is_active IS 'Active (not archived).';
COMMENT ON COLUMN clients.updated_at IS 'The source''s version stamp.';
COMMENT ON COLUMN clients.raw IS 'The record as the source sent it.';
COMMENT ON COLUMN clients.first_seen_at IS 'When tidemark first stored this id.';
COMMENT ON COLUMN clients.deleted_at IS 'Tombstone; null while live.';

COMMENT ON TABLE users IS 'Mirror of the tracker''s users.';
COMMENT ON COLUMN users.source IS 'Configured source name.';
COMMENT ON COLUMN users.id IS 'The provider''s user id as text.';
COMMENT ON COLUMN users.first_name IS 'First name.';
COMMENT ON COLUMN users.last_name IS 'Last name.';
COMMENT ON COLUMN users.email IS 'E-mail address.';
COMMENT ON COLUMN users.is_active IS 'Active (not archived).';
COMMENT ON COLUMN users.updated_at IS 'The source''s version stamp.';
COMMENT ON COLUMN users.raw IS 'The record as the source sent it.';
COMMENT ON COLUMN users.first_seen_at IS 'When tidemark first stored this id.';
COMMENT ON COLUMN users.deleted_at IS 'Tombstone; null while live.';

COMMENT ON TABLE tasks IS 'Mirror of the tracker''s tasks.';
COMMENT ON COLUMN tasks.source IS 'Configured source name.';
COMMENT ON COLUMN tasks.id IS 'The provider''s task id as text.';
COMMENT ON COLUMN tasks.name IS 'Task name.';
COMMENT ON COLUMN tasks.is_active IS 'Active (not archived).';
COMMENT ON COLUMN tasks.updated_at IS 'The source''s version stamp.';
COMMENT ON COLUMN tasks.raw IS 'The record as the source sent it.';
COMMENT ON COLUMN tasks.first_seen_at IS 'When tidemark first stored this id.';
COMMENT ON COLUMN tasks.deleted_at IS 'Tombstone; null while live.';

COMMENT ON TABLE cursors IS 'Incremental cursor per (source, resource).';
COMMENT ON COLUMN cursors.source IS 'Configured source name.';
COMMENT ON COLUMN cursors.resource IS 'Resource (table) name.';
COMMENT ON COLUMN cursors.high_water IS 'Newest source version durably applied, capped by the source clock; next window starts at high_water - overlap. Null: never synced.';
COMMENT ON COLUMN cursors.updated_at IS 'When the cursor last moved.';
COMMENT ON COLUMN cursors.updated_by IS 'Who moved it last: poller, or the operator for cursor set/reset.';

COMMENT ON TABLE sync_runs IS 'One row per pass (and per operator cursor change): what ran, how it ended, what it counted.';
COMMENT ON COLUMN sync_runs.run_id IS 'Run id, also on every log line of the pass.';
COMMENT ON COLUMN sync_runs.source IS 'Configured source name.';
COMMENT ON COLUMN sync_runs.resource IS 'Resource (table) name.';
COMMENT ON COLUMN sync_runs.kind IS 'incremental, backfill, reconcile, or cursor_set/cursor_reset for operator changes.';
COMMENT ON COLUMN sync_runs.status IS 'running, ok, failed or cancelled.';
COMMENT ON COLUMN sync_runs.started_at IS 'When the pass started.';
COMMENT ON COLUMN sync_runs.finished_at IS 'When the pass ended; null while running.';
COMMENT ON COLUMN sync_runs.error IS 'Error text of a failed pass (never contains a token).';
COMMENT ON COLUMN sync_runs.actor IS 'Operator who changed a cursor (user@host).';
COMMENT ON COLUMN sync_runs.fetched IS 'Records received.';
COMMENT ON COLUMN sync_runs.inserted IS 'Rows inserted.';
COMMENT ON COLUMN sync_runs.updated IS 'Rows updated to a newer version.';
COMMENT ON COLUMN sync_runs.unchanged IS 'Re-delivered with the same content: nothing written.';
COMMENT ON COLUMN sync_runs.stale IS 'Older than the stored version: skipped.';
COMMENT ON COLUMN sync_runs.ties IS 'Same version, different content, fetched later: updated.';
COMMENT ON COLUMN sync_runs.tombstoned IS 'Rows marked deleted.';

COMMENT ON TABLE backfills IS 'Backfill progress per (source, resource, range); resumable.';
COMMENT ON COLUMN backfills.from_date IS 'First spent date of the range (inclusive).';
COMMENT ON COLUMN backfills.to_date IS 'Last spent date of the range (inclusive).';
COMMENT ON COLUMN backfills.next_date IS 'First day not yet applied; the backfill resumes here.';
COMMENT ON COLUMN backfills.status IS 'queued, running, done, failed or cancelled.';
COMMENT ON COLUMN backfills.records IS 'Records applied so far.';

-- +goose Down
DROP TABLE backfills;
DROP TABLE sync_runs;
DROP TABLE cursors;
DROP TABLE tasks;
DROP TABLE users;
DROP TABLE clients;
DROP TABLE projects;
DROP TABLE time_entries;
