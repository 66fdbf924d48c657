-- +goose Up
-- Small answers a source's client keeps to save requests (Toggl's GET /me,
-- asked once a day), kept where the next process finds them: a restart, a
-- new owner or a CLI run does not ask again (issue 23). Never a credential.
CREATE TABLE source_memos (
    source    text        NOT NULL,
    key       text        NOT NULL,
    value     jsonb       NOT NULL,
    stored_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, key)
);
COMMENT ON TABLE source_memos IS 'Per source and key: an answer kept to save requests across processes (Toggl: the token owner''s id and time zone from GET /me).';
COMMENT ON COLUMN source_memos.source IS 'Configured source name.';
COMMENT ON COLUMN source_memos.key IS 'What the value is, e.g. me.';
COMMENT ON COLUMN source_memos.value IS 'The fields kept (never a token).';
COMMENT ON COLUMN source_memos.stored_at IS 'When the value was learnt (database clock): its age decides whether it is asked again.';

-- +goose Down
DROP TABLE source_memos;
