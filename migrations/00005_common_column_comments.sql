-- +goose Up
-- Only comments: fetched_at and content_hash were documented on time_entries
-- alone. Every column of a resource table now carries a COMMENT (package
-- schema's test holds the tables to it).
COMMENT ON COLUMN projects.fetched_at IS 'When tidemark fetched this version; breaks ties between equal versions.';
COMMENT ON COLUMN projects.content_hash IS 'SHA-256 of the record in canonical JSON form.';
COMMENT ON COLUMN clients.fetched_at IS 'When tidemark fetched this version; breaks ties between equal versions.';
COMMENT ON COLUMN clients.content_hash IS 'SHA-256 of the record in canonical JSON form.';
COMMENT ON COLUMN users.fetched_at IS 'When tidemark fetched this version; breaks ties between equal versions.';
COMMENT ON COLUMN users.content_hash IS 'SHA-256 of the record in canonical JSON form.';
COMMENT ON COLUMN tasks.fetched_at IS 'When tidemark fetched this version; breaks ties between equal versions.';
COMMENT ON COLUMN tasks.content_hash IS 'SHA-256 of the record in canonical JSON form.';

-- +goose Down
COMMENT ON COLUMN projects.fetched_at IS NULL;
COMMENT ON COLUMN projects.content_hash IS NULL;
COMMENT ON COLUMN clients.fetched_at IS NULL;
COMMENT ON COLUMN clients.content_hash IS NULL;
COMMENT ON COLUMN users.fetched_at IS NULL;
COMMENT ON COLUMN users.content_hash IS NULL;
COMMENT ON COLUMN tasks.fetched_at IS NULL;
COMMENT ON COLUMN tasks.content_hash IS NULL;
