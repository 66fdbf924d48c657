-- +goose Up
-- The fleet: each `tidemark run` is a member while its lease session lives
-- and its heartbeat is fresh. Sources are spread over the live members by
-- rendezvous hashing with bounded loads (package lease); the advisory locks
-- still decide who owns a source.
CREATE TABLE fleet_members (
    id            text        PRIMARY KEY,
    host          text        NOT NULL,
    pid           integer     NOT NULL,
    lease_pid     integer     NOT NULL,
    lease_started timestamptz NOT NULL,
    joined_at     timestamptz NOT NULL DEFAULT now(),
    heartbeat_at  timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE fleet_members IS 'tidemark daemons sharing the sources: one row per member, live while its lease session (lease_pid, lease_started) exists and heartbeat_at is fresh.';
COMMENT ON COLUMN fleet_members.id IS 'The member''s name: host/pid of the daemon.';
COMMENT ON COLUMN fleet_members.lease_pid IS 'Backend pid of the member''s lease connection (the session that holds its advisory locks).';
COMMENT ON COLUMN fleet_members.lease_started IS 'backend_start of that session: (pid, start) names one session, a pid alone is reused.';
COMMENT ON COLUMN fleet_members.heartbeat_at IS 'Last heartbeat; a member silent for longer than its heartbeat TTL is not live.';

-- +goose Down
DROP TABLE fleet_members;
