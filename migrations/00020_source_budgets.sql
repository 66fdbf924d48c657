-- +goose Up
-- What a source has spent of its provider's budget, kept with the pass state
-- so that it outlives a process: a restart, a hand-over to another replica
-- or a CLI run starts where the last one left off, never with a fresh
-- allowance (issue 23).
CREATE TABLE source_budgets (
    source       text             NOT NULL PRIMARY KEY,
    next_at      timestamptz,
    quota_tokens double precision,
    quota_at     timestamptz,
    updated_at   timestamptz      NOT NULL DEFAULT now()
);
COMMENT ON TABLE source_budgets IS 'Per source: the rate limiter''s next free send time and the webhook-triggered passes'' spare-quota bucket, shared by every process on this database.';
COMMENT ON COLUMN source_budgets.source IS 'Configured source name.';
COMMENT ON COLUMN source_budgets.next_at IS 'The earliest time (database clock) the next request of the source may be sent; each request reserves its slot and moves this on by the rate limit''s spacing.';
COMMENT ON COLUMN source_budgets.quota_tokens IS 'Requests left in the spare-quota bucket of webhook-triggered passes at quota_at; null: full.';
COMMENT ON COLUMN source_budgets.quota_at IS 'When quota_tokens was counted (database clock).';
COMMENT ON COLUMN source_budgets.updated_at IS 'When the row last changed.';

-- +goose Down
DROP TABLE source_budgets;
