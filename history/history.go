// Package history reads the history that upsert writes (issue 31): the
// versions of one record with what changed between them, and what was
// created, changed and deleted between two instants (issue 32). It only
// reads, through the SQL functions upsert declares per resource
// (<r>_versions, <r>_as_of, <r>_known_at); values come out as PostgreSQL's
// own JSON of each column (numerics exact, times in UTC).
package history

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/schema"
)

// DB is what the reads need: a pool, a connection or a transaction (each
// read runs in a transaction of its own, or a savepoint).
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Values are a version's typed columns: column name → its JSON value.
type Values map[string]json.RawMessage

// Change is one column's values before and after.
type Change struct {
	From json.RawMessage `json:"from"`
	To   json.RawMessage `json:"to"`
}

// NotOnError: the resource has no history table, history was never on.
type NotOnError struct{ Resource clients.Resource }

func (e *NotOnError) Error() string {
	return fmt.Sprintf("%s has no history: add it to the source's `history:` in the config (history: all, or a list naming %s), then run the daemon or `tidemark sync`", e.Resource, e.Resource)
}

// UnknownSourceError: the history of the resource holds nothing of the
// source and it was never on for it.
type UnknownSourceError struct {
	Source   string
	Resource clients.Resource
}

func (e *UnknownSourceError) Error() string {
	return fmt.Sprintf("source %q has no history of %s: is it a source of the config, with %s in its `history:`?", e.Source, e.Resource, e.Resource)
}

// NotFoundError: the record has no version in the history.
type NotFoundError struct {
	Source, ID string
	Resource   clients.Resource
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("no version of %s %s in source %s", e.Resource, e.ID, e.Source)
}

// check returns a *NotOnError when t has no history table, an
// *UnknownSourceError when it holds nothing of source and was never on for
// it.
func check(ctx context.Context, db pgx.Tx, source string, t *schema.Table) error {
	table := pgx.Identifier{string(t.Name) + "_history"}.Sanitize()
	var exists bool
	if err := db.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists); err != nil {
		return fmt.Errorf("history of %s: %w", t.Name, err)
	}
	if !exists {
		return &NotOnError{Resource: t.Name}
	}
	var known bool
	err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM history_sources WHERE source = $1 AND resource = $2)
		OR EXISTS (SELECT 1 FROM `+table+` WHERE source = $1)`, source, string(t.Name)).Scan(&known)
	if err != nil {
		return fmt.Errorf("history of %s/%s: %w", source, t.Name, err)
	}
	if !known {
		return &UnknownSourceError{Source: source, Resource: t.Name}
	}
	return nil
}

// row is a history row as to_jsonb gives it: the typed columns are picked
// from it by the declaration.
type row map[string]json.RawMessage

// values returns r's typed columns.
func (r row) values(t *schema.Table) Values {
	v := make(Values, len(t.Columns))
	for _, c := range t.Columns {
		if x, ok := r[c.Name]; ok {
			v[c.Name] = x
		} else {
			v[c.Name] = json.RawMessage("null") // declared after this version
		}
	}
	return v
}

// changed compares two versions column by column.
func changed(t *schema.Table, from, to Values) map[string]Change {
	out := map[string]Change{}
	for _, c := range t.Columns {
		if !bytes.Equal(from[c.Name], to[c.Name]) {
			out[c.Name] = Change{From: from[c.Name], To: to[c.Name]}
		}
	}
	return out
}

// rawDiffers says whether two rows' raw differ (parents of child tables
// keep it; their lines change only there).
func rawDiffers(a, b row) bool {
	ra, ok := a["raw"]
	if !ok {
		return false
	}
	var x, y any
	if json.Unmarshal(ra, &x) != nil || json.Unmarshal(b["raw"], &y) != nil {
		return !bytes.Equal(ra, b["raw"])
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return !bytes.Equal(xa, ya)
}

// fn names resource t's history function suffix (as_of, known_at, versions).
func fn(t *schema.Table, suffix string) string {
	return pgx.Identifier{string(t.Name) + "_" + suffix}.Sanitize()
}

// utc is the session setting the reads run under: to_jsonb prints
// timestamptz in the session's zone.
const utc = `SET LOCAL TimeZone = 'UTC'`

// read runs f in a transaction whose session prints times in UTC, after
// checking that the history of t exists and holds source.
func read(ctx context.Context, db DB, source string, t *schema.Table, f func(pgx.Tx) error) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, utc); err != nil {
		return fmt.Errorf("history: %w", err)
	}
	if err := check(ctx, tx, source, t); err != nil {
		return err
	}
	return f(tx)
}
