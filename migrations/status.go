package migrations

import (
	"context"
	"database/sql"
	"fmt"
)

// Versions returns the schema version of the database at url and the
// newest one this binary carries (`tidemark doctor`: "run tidemark migrate"
// when they differ).
func Versions(ctx context.Context, url string) (current, latest int64, err error) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return 0, 0, fmt.Errorf("open database: %w", err)
	}
	defer db.Close()
	p, err := provider(db)
	if err != nil {
		return 0, 0, err
	}
	return p.GetVersions(ctx)
}

// sqlMissingRights lists, per table of the current schema, the rights the
// daemon needs that the current role lacks.
const sqlMissingRights = `
SELECT c.relname, array_to_string(array_remove(ARRAY[
    CASE WHEN NOT has_table_privilege(c.oid, 'SELECT') THEN 'SELECT' END,
    CASE WHEN NOT has_table_privilege(c.oid, 'INSERT') THEN 'INSERT' END,
    CASE WHEN NOT has_table_privilege(c.oid, 'UPDATE') THEN 'UPDATE' END,
    CASE WHEN NOT has_table_privilege(c.oid, 'DELETE') THEN 'DELETE' END], NULL), ', ')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND n.nspname = current_schema() AND c.relname <> $1
ORDER BY c.relname`

// MissingRights returns the tables of the schema on which the role at url
// lacks SELECT, INSERT, UPDATE or DELETE, with what it lacks.
func MissingRights(ctx context.Context, url string) (map[string]string, error) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, sqlMissingRights, VersionTable)
	if err != nil {
		return nil, fmt.Errorf("read table rights: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var table, missing string
		if err := rows.Scan(&table, &missing); err != nil {
			return nil, err
		}
		if missing != "" {
			out[table] = missing
		}
	}
	return out, rows.Err()
}
