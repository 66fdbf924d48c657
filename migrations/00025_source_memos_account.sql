-- +goose Up
-- A memo is keyed by everything its answer depends on (issue 30, 4): the
-- source's name alone outlived a token change, so a restart with another
-- person's token took the previous owner's id and zone for up to a day.
-- account is a hash of the token, base URL and account/workspace, never
-- the token. Memos kept before cannot say whose they were: they go (Toggl
-- asks GET /me once more).
DELETE FROM source_memos;
ALTER TABLE source_memos ADD COLUMN account text NOT NULL DEFAULT '';
ALTER TABLE source_memos DROP CONSTRAINT source_memos_pkey;
ALTER TABLE source_memos ADD PRIMARY KEY (source, account, key);
COMMENT ON COLUMN source_memos.account IS 'Whose answer it is: a truncated SHA-256 of the token, base URL and account/workspace (never the token itself). Another token is another account.';

-- +goose Down
DELETE FROM source_memos WHERE account <> '';
ALTER TABLE source_memos DROP CONSTRAINT source_memos_pkey;
ALTER TABLE source_memos DROP COLUMN account;
ALTER TABLE source_memos ADD PRIMARY KEY (source, key);
