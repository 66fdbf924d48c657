package upsert

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/schema"
)

// TestEveryResource runs the write rule and tombstones through each table:
// insert, newer version, re-delivery, deletion without fields (typed
// columns kept), resurrection, and TombstoneMissing.
func TestEveryResource(t *testing.T) {
	t.Parallel()
	typed := map[clients.Resource]struct {
		set   func(r *clients.Record, name string)
		col   string // a typed column holding name
		extra string // a second typed column and its expected value
		want  string
	}{
		clients.Projects: {func(r *clients.Record, n string) {
			r.Row = schema.Projects.Row(schema.Values{"name": n, "code": "MW", "client_id": "5", "is_active": true, "is_billable": true})
		}, "name", "coalesce(code, '') || '/' || coalesce(client_id, '')", "MW/5"},
		clients.Clients: {func(r *clients.Record, n string) {
			r.Row = schema.Clients.Row(schema.Values{"name": n, "currency": "EUR", "is_active": true})
		}, "name", "coalesce(currency, '')", "EUR"},
		clients.Users: {func(r *clients.Record, n string) {
			// An empty last name is stored as NULL (EmptyIsNull), also when
			// a decoder hands "" over in the row.
			r.Row = schema.Users.Row(schema.Values{"first_name": n, "email": "kim@example.com", "is_active": true})
			r.Row[schema.Users.Index("last_name")] = ""
		}, "first_name", "coalesce(last_name, 'NULL') || '/' || email", "NULL/kim@example.com"},
		clients.Tasks: {func(r *clients.Record, n string) {
			r.Row = schema.Tasks.Row(schema.Values{"name": n, "is_active": true})
		}, "name", "is_active::text", "true"},
	}
	for res, ty := range typed {
		t.Run(string(res), func(t *testing.T) {
			t.Parallel()
			pool := pgtest.DB(t)
			ctx := context.Background()
			rec := func(v int, name string, deleted bool) clients.Record {
				version := t0.Add(time.Duration(v) * time.Second)
				r := clients.Record{ID: "42", Version: version, FetchedAt: version.Add(time.Minute),
					Raw: fmt.Appendf(nil, `{"id":42,"name":%q,"deleted":%t,"updated_at":%q}`, name, deleted, version.Format(time.RFC3339))}
				if deleted {
					r.DeletedAt = &version
				} else {
					ty.set(&r, name)
				}
				return r
			}
			apply := func(recs ...clients.Record) Counts {
				t.Helper()
				var c Counts
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					var err error
					c, err = Apply(ctx, tx, testSource, res, recs)
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			state := func() (name, extra string, deleted bool) {
				t.Helper()
				q := fmt.Sprintf(`SELECT %s, %s, deleted_at IS NOT NULL FROM %s WHERE source = $1 AND id = '42'`, ty.col, ty.extra, res)
				if err := pool.QueryRow(ctx, q, testSource).Scan(&name, &extra, &deleted); err != nil {
					t.Fatal(err)
				}
				return
			}
			steps := []struct {
				rec     clients.Record
				want    Counts
				name    string
				deleted bool
			}{
				{rec(1, "first", false), Counts{Inserted: 1}, "first", false},
				{rec(2, "second", false), Counts{Updated: 1}, "second", false},
				{rec(2, "second", false), Counts{Unchanged: 1}, "second", false},
				{rec(1, "first", false), Counts{Stale: 1}, "second", false},
				{rec(3, "", true), Counts{Updated: 1, Tombstoned: 1}, "second", true},
				{rec(4, "back", false), Counts{Updated: 1}, "back", false},
			}
			for i, st := range steps {
				if c := apply(st.rec); c != st.want {
					t.Fatalf("step %d: counts %+v, want %+v", i, c, st.want)
				}
				name, extra, deleted := state()
				if name != st.name || deleted != st.deleted || extra != ty.want {
					t.Fatalf("step %d: row (%s, %s, deleted %v), want (%s, %s, deleted %v)", i, name, extra, deleted, st.name, ty.want, st.deleted)
				}
			}
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				n, err := TombstoneMissing(ctx, tx, TombstoneParams{Source: testSource, Resource: res, Seen: []string{"7"}, AsOf: t0.Add(time.Hour), Max: 1})
				if err == nil && n != 1 {
					err = fmt.Errorf("tombstoned %d, want 1", n)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, deleted := state(); !deleted {
				t.Fatal("TombstoneMissing left the row live")
			}
			// A deletion of an id never seen is stored, with neutral typed columns.
			if c := apply(func() clients.Record { r := rec(5, "", true); r.ID = "43"; return r }()); c != (Counts{Inserted: 1, Tombstoned: 1}) {
				t.Fatalf("deletion of an unknown id: %+v", c)
			}
		})
	}
}
