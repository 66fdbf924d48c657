package schema_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/schema"
)

// TestMain provides the throwaway PostgreSQL cluster of pgtest.DB, which
// only this file's tests use.
func TestMain(m *testing.M) { pgtest.Main(m) }

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

// TestChildTablesMatchDatabase holds each child table (line items) to its
// declaration: table and COMMENT, the common child columns, the parent
// column, and every declared column with type, nullability and COMMENT.
func TestChildTablesMatchDatabase(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	ctx := context.Background()
	for _, tb := range schema.All() {
		for _, ch := range tb.Children {
			t.Run(string(ch.Name), func(t *testing.T) {
				var comment *string
				if err := pool.QueryRow(ctx, `SELECT obj_description(format('public.%I', $1::text)::regclass, 'pg_class')`, string(ch.Name)).Scan(&comment); err != nil {
					t.Fatalf("table %s: %v", ch.Name, err)
				}
				if comment == nil || *comment != ch.Doc {
					t.Errorf("COMMENT ON TABLE %s = %s, declared %q", ch.Name, show(comment), ch.Doc)
				}
				want := map[string]schema.Column{ch.ParentColumn: {Type: schema.Text}}
				for _, c := range schema.ChildCommon {
					want[c.Name] = schema.Column{Type: c.Type, Nullable: c.Nullable}
				}
				for _, c := range ch.Columns {
					want[c.Name] = c
				}
				rows, err := pool.Query(ctx, `SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, col_description(a.attrelid, a.attnum)
					FROM pg_attribute a WHERE a.attrelid = format('public.%I', $1::text)::regclass AND a.attnum > 0 AND NOT a.attisdropped`, string(ch.Name))
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				n := 0
				for rows.Next() {
					var name, typ string
					var notNull bool
					var doc *string
					if err := rows.Scan(&name, &typ, &notNull, &doc); err != nil {
						t.Fatal(err)
					}
					n++
					c, ok := want[name]
					switch {
					case !ok:
						t.Errorf("%s.%s is in the database but not declared", ch.Name, name)
					case typ != sqlType[c.Type] || notNull == c.Nullable:
						t.Errorf("%s.%s is %s (not null %v), declared %s (nullable %v)", ch.Name, name, typ, notNull, c.Type, c.Nullable)
					case doc == nil || (c.Doc != "" && *doc != c.Doc):
						t.Errorf("COMMENT ON COLUMN %s.%s = %s, declared %q", ch.Name, name, show(doc), c.Doc)
					}
				}
				if n != len(want) {
					t.Errorf("%s has %d columns, %d declared", ch.Name, n, len(want))
				}
			})
		}
	}
}
