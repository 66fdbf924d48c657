-- +goose Up
-- Sources an operator retired (issue 25, `tidemark cursor retire`): a source
-- the database knows that no live replica serves any more is shown red
-- until retired; retired, it leaves the view and the count of sources not
-- served. Its rows stay. Configured again, it shows again.
CREATE TABLE retired_sources (
    source     text        PRIMARY KEY,
    retired_at timestamptz NOT NULL DEFAULT now(),
    retired_by text        NOT NULL DEFAULT ''
);
COMMENT ON TABLE retired_sources IS 'Sources retired from the view by `tidemark cursor retire`: no live replica serves them and that is meant. Their mirrored rows and cursors stay.';

-- +goose Down
DROP TABLE retired_sources;
