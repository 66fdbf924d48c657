package schema_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/schema"
)

// sqlType is format_type's spelling of a declared type.
var sqlType = map[schema.Type]string{
	schema.Text: "text", schema.Date: "date", schema.Numeric: "numeric", schema.Boolean: "boolean",
	schema.Bigint: "bigint", schema.Timestamptz: "timestamp with time zone", schema.JSONB: "jsonb",
	schema.Bytea: "bytea",
}

type dbColumn struct {
	typ     string
	notNull bool
	comment *string
	pos     int
}

// TestDeclarationsMatchDatabase holds every declaration against the
// migrated database: the table and its COMMENT exist; every declared column
// exists with its SQL type, its nullability and, word for word, the COMMENT
// the declaration gives; the declared columns are in table order; every
// common column exists with its type, nullability and a COMMENT; and the
// table has no column the declaration leaves out (the upsert would never
// write it).
func TestDeclarationsMatchDatabase(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	ctx := context.Background()
	for _, tb := range schema.All() {
		t.Run(string(tb.Name), func(t *testing.T) {
			var comment *string
			err := pool.QueryRow(ctx, `SELECT obj_description(c.oid, 'pg_class') FROM pg_class c
				WHERE c.relname = $1 AND c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'`, string(tb.Name)).Scan(&comment)
			if err == pgx.ErrNoRows {
				t.Fatalf("table %s does not exist", tb.Name)
			}
			if err != nil {
				t.Fatal(err)
			}
			if comment == nil || *comment != tb.Doc {
				t.Errorf("COMMENT ON TABLE %s = %s, declared %q", tb.Name, show(comment), tb.Doc)
			}
			rows, err := pool.Query(ctx, `SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
					col_description(a.attrelid, a.attnum), a.attnum
				FROM pg_attribute a WHERE a.attrelid = format('public.%I', $1::text)::regclass
				  AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, string(tb.Name))
			if err != nil {
				t.Fatal(err)
			}
			db := map[string]dbColumn{}
			var order []string
			for rows.Next() {
				var name string
				var c dbColumn
				if err := rows.Scan(&name, &c.typ, &c.notNull, &c.comment, &c.pos); err != nil {
					t.Fatal(err)
				}
				db[name] = c
				order = append(order, name)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			declared := map[string]bool{}
			last := 0
			for _, c := range tb.Columns {
				declared[c.Name] = true
				at := fmt.Sprintf("%s.%s", tb.Name, c.Name)
				d, ok := db[c.Name]
				if !ok {
					t.Errorf("%s is declared but not in the database", at)
					continue
				}
				if d.typ != sqlType[c.Type] {
					t.Errorf("%s is %s in the database, declared %s", at, d.typ, c.Type)
				}
				if d.notNull == c.Nullable {
					t.Errorf("%s: NOT NULL is %v in the database, declared nullable %v", at, d.notNull, c.Nullable)
				}
				if d.comment == nil || *d.comment != c.Doc {
					t.Errorf("COMMENT ON COLUMN %s = %s, declared %q", at, show(d.comment), c.Doc)
				}
				if d.pos < last {
					t.Errorf("%s comes before the column declared ahead of it (table order %v)", at, order)
				}
				last = d.pos
			}
			for _, c := range schema.Common {
				declared[c.Name] = true
				at := fmt.Sprintf("%s.%s", tb.Name, c.Name)
				d, ok := db[c.Name]
				switch {
				case !ok:
					t.Errorf("common column %s is missing", at)
				case d.typ != sqlType[c.Type]:
					t.Errorf("common column %s is %s, want %s", at, d.typ, c.Type)
				case d.notNull == c.Nullable:
					t.Errorf("common column %s: NOT NULL is %v, want %v", at, d.notNull, !c.Nullable)
				case d.comment == nil || *d.comment == "":
					t.Errorf("common column %s has no COMMENT", at)
				}
			}
			for _, name := range order {
				if !declared[name] {
					t.Errorf("%s.%s is in the database but not declared", tb.Name, name)
				}
			}
		})
	}
}

func show(s *string) string {
	if s == nil {
		return "NULL"
	}
	return fmt.Sprintf("%q", *s)
}
