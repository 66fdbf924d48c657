package upsert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/schema"
)

// gadgetsTable declares a resource only this test knows, with a column of
// every type: adding a resource is a declaration and a table, and the
// upsert follows. It registers after the package was initialized, as a
// resource declared by another package could.
func gadgetsTable() *schema.Table {
	if t, ok := schema.Lookup("test_gadgets"); ok { // -count > 1
		return t
	}
	return schema.MustRegister(gadgetsDecl)
}

var gadgetsDecl = schema.Table{
	Name: "test_gadgets", Doc: "Gadgets (test).", Deletions: schema.Reconciled,
	ListBy: "made_on", UserColumn: "owner_id",
	Columns: []schema.Column{
		{Name: "name", Type: schema.Text, Doc: "Name."},
		{Name: "owner_id", Type: schema.Text, Nullable: true, EmptyIsNull: true, Doc: "Owner."},
		{Name: "made_on", Type: schema.Date, Tombstone: schema.VersionDay, Doc: "Day made."},
		{Name: "weight", Type: schema.Numeric, Nullable: true, Doc: "Weight."},
		{Name: "parts", Type: schema.Bigint, Doc: "Parts."},
		{Name: "checked_at", Type: schema.Timestamptz, Tombstone: schema.VersionDay, Doc: "Last check."},
		{Name: "spec", Type: schema.JSONB, Doc: "Spec."},
		{Name: "broken", Type: schema.Boolean, Doc: "Broken."},
	},
}

const gadgetsDDL = `CREATE TABLE test_gadgets (
    source text NOT NULL, id text NOT NULL,
    name text NOT NULL, owner_id text, made_on date NOT NULL, weight numeric, parts bigint NOT NULL,
    checked_at timestamptz NOT NULL, spec jsonb NOT NULL, broken boolean NOT NULL,
    updated_at timestamptz NOT NULL, fetched_at timestamptz NOT NULL, content_hash bytea NOT NULL,
    raw jsonb NOT NULL, first_seen_at timestamptz NOT NULL DEFAULT now(), deleted_at timestamptz,
    PRIMARY KEY (source, id))`

func TestDeclaredResource(t *testing.T) {
	t.Parallel()
	gadgets := gadgetsTable()
	if _, ok := tables[gadgets.Name]; ok {
		t.Fatal("test_gadgets was registered before the package was initialized")
	}
	pool := pgtest.DB(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, gadgetsDDL); err != nil {
		t.Fatal(err)
	}
	checked := time.Date(2026, 3, 1, 8, 30, 0, 123456789, time.UTC)
	rec := func(id string, v int, vs schema.Values) clients.Record {
		version := t0.Add(time.Duration(v) * time.Second)
		return clients.Record{ID: id, Version: version, FetchedAt: version.Add(time.Minute),
			Raw: fmt.Appendf(nil, `{"id":%q,"v":%d}`, id, v), Row: gadgets.Row(vs)}
	}
	live := schema.Values{
		"name": "g", "owner_id": "", "made_on": clients.Date{Year: 2026, Month: 2, Day: 27}, "weight": clients.Decimal("2.50"),
		"parts": int64(1) << 40, "checked_at": checked, "spec": json.RawMessage(`{"a": [1, 2]}`), "broken": true,
	}
	apply := func(recs ...clients.Record) (Counts, error) {
		var c Counts
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			c, err = Apply(ctx, tx, testSource, gadgets.Name, recs)
			return err
		})
		return c, err
	}
	v2 := schema.Values{}
	for k, v := range live {
		v2[k] = v
	}
	v2["owner_id"], v2["name"] = "u1", "h"
	if c, err := apply(rec("1", 1, live), rec("2", 1, v2)); err != nil || c != (Counts{Inserted: 2}) {
		t.Fatalf("apply: %+v, %v", c, err)
	}
	type row struct {
		name, owner, madeOn, weight, spec string
		parts                             int64
		checkedAt                         time.Time
		broken                            bool
	}
	read := func(id string) row {
		t.Helper()
		var r row
		var owner *string
		err := pool.QueryRow(ctx, `SELECT name, owner_id, made_on::text, coalesce(weight::text, 'NULL'), spec::text, parts, checked_at, broken
			FROM test_gadgets WHERE source = $1 AND id = $2`, testSource, id).
			Scan(&r.name, &owner, &r.madeOn, &r.weight, &r.spec, &r.parts, &r.checkedAt, &r.broken)
		if err != nil {
			t.Fatal(err)
		}
		r.checkedAt = r.checkedAt.UTC()
		r.owner = "NULL"
		if owner != nil {
			r.owner = *owner
		}
		return r
	}
	want := row{"g", "NULL", "2026-02-27", "2.50", `{"a": [1, 2]}`, 1 << 40, checked.Truncate(time.Microsecond), true}
	if got := read("1"); got != want {
		t.Fatalf("row 1 = %+v\nwant    %+v", got, want)
	}
	// A tombstone without content of an id never stored: neutral values,
	// and the version's day and instant where the declaration says so.
	tomb := rec("3", 7, nil)
	tomb.Row, tomb.DeletedAt = nil, &tomb.Version
	if c, err := apply(tomb); err != nil || c != (Counts{Inserted: 1, Tombstoned: 1}) {
		t.Fatalf("tombstone: %+v, %v", c, err)
	}
	want = row{"", "NULL", "2026-03-01", "NULL", "{}", 0, tomb.Version.UTC(), false}
	if got := read("3"); got != want {
		t.Fatalf("tombstone row = %+v\nwant            %+v", got, want)
	}
	// TombstoneMissing selects by the declared date and user columns.
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		n, err := TombstoneMissing(ctx, tx, TombstoneParams{Source: testSource, Resource: gadgets.Name, AsOf: t0.Add(time.Hour),
			From: clients.Date{Year: 2026, Month: 2, Day: 27}, To: clients.Date{Year: 2026, Month: 2, Day: 27},
			Scope: clients.Scope{UserIDs: []string{"u1"}}})
		if err == nil && n != 1 {
			err = fmt.Errorf("tombstoned %d, want 1 (gadget 2: in range, of u1)", n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// Values of the wrong Go type, or that the database cannot hold, are
	// refused naming the column.
	for col, bad := range map[string]any{
		"parts": 3, "checked_at": "2026-03-01", "spec": json.RawMessage(`{"a":`), "weight": 2.5, "name": []byte("g"),
	} {
		r := rec("9", 9, live)
		r.Row[gadgets.Index(col)] = bad
		_, err := apply(r)
		var re *RecordError
		if !errors.As(err, &re) || re.Field != col {
			t.Errorf("%s = %#v: err = %v, want a RecordError naming %s", col, bad, err, col)
		}
	}
	// A \u0000 escape, which jsonb refuses, is kept as text (issue 22).
	r := rec("9", 9, live)
	r.Row[gadgets.Index("spec")] = json.RawMessage(`{"a":"\u0000"}`)
	if c, err := apply(r); err != nil || c.Replaced != 1 {
		t.Errorf(`spec with \u0000: %+v, %v; want it stored, counted as replaced`, c, err)
	}
}

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

// set returns a mutation setting a time entry column, on a copy of the row.
func set(name string, v any) func(*clients.Record) {
	return func(r *clients.Record) { *r = with(*r, name, v) }
}

// TestBadRecords: a page with one bad record is refused with an error naming
// the record and the field, and nothing of the page is written.
func TestBadRecords(t *testing.T) {
	t.Parallel()
	f := t0.Add(time.Minute)
	cases := []struct {
		name, field string
		mutate      func(r *clients.Record)
	}{
		{"empty id", "id", func(r *clients.Record) { r.ID = "" }},
		{"invalid UTF-8 id", "id", func(r *clients.Record) { r.ID = "7\xff" }},
		{"missing version", "version", func(r *clients.Record) { r.Version = time.Time{} }},
		{"missing fetched_at", "fetched_at", func(r *clients.Record) { r.FetchedAt = time.Time{} }},
		{"invalid UTF-8 in raw", "raw", func(r *clients.Record) { r.Raw = []byte("{\"notes\":\"caf\xe9\"}") }},
		{"raw not JSON", "raw", func(r *clients.Record) { r.Raw = []byte("<html>502</html>") }},
		{"raw an array", "raw", func(r *clients.Record) { r.Raw = []byte(`[{"id":1}]`) }},
		{"raw two objects", "raw", func(r *clients.Record) { r.Raw = []byte(`{"id":1}{"id":2}`) }},
		{"raw empty", "raw", func(r *clients.Record) { r.Raw = nil }},
		{"NaN hours", "hours", set("hours", clients.Decimal("NaN"))},
		{"infinite hours", "hours", set("hours", clients.Decimal("Infinity"))},
		{"negative hours", "hours", set("hours", clients.Decimal("-1.5"))},
		{"hours not a decimal", "hours", set("hours", clients.Decimal("1,5"))},
		{"hours missing", "hours", set("hours", clients.Decimal(""))},
		{"no spent date", "spent_date", set("spent_date", clients.Date{})},
		{"not a calendar date", "spent_date", set("spent_date", clients.Date{Year: 2026, Month: 2, Day: 30})},
		{"NULL in a NOT NULL text", "user_id", set("user_id", nil)},
		{"NULL in a NOT NULL boolean", "billable", set("billable", nil)},
		{"hours of the wrong Go type", "hours", set("hours", "1.5")},
		{"spent date of the wrong Go type", "spent_date", set("spent_date", "2026-02-27")},
		{"a boolean of the wrong Go type", "is_locked", set("is_locked", 0)},
		{"an id of the wrong Go type", "project_id", set("project_id", 14307913)},
		{"live record without a row", "row", func(r *clients.Record) { r.Row = nil }},
		{"a row of another resource", "row", func(r *clients.Record) {
			r.Row = schema.Tasks.Row(schema.Values{"name": "x"})
		}},
	}
	pool := pgtest.DB(t)
	stored := entry(1, t0, f, "a")
	applyTx(t, pool, []clients.Record{stored})
	before, _ := readRow(t, pool, "1")
	for _, tc := range cases {
		page := []clients.Record{entry(1, t0.Add(time.Second), f, "b"), entry(2, t0, f, "a"), entry(3, t0, f, "a")}
		tc.mutate(&page[2])
		err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
			_, err := Apply(context.Background(), tx, testSource, clients.TimeEntries, page)
			return err
		})
		var re *RecordError
		if !errors.As(err, &re) {
			t.Errorf("%s: err = %v, want a *RecordError", tc.name, err)
			continue
		}
		if re.Index != 2 || re.ID != page[2].ID || re.Field != tc.field {
			t.Errorf("%s: error names record %d (id %q) field %q, want record 2 field %q: %v", tc.name, re.Index, re.ID, re.Field, tc.field, err)
		}
		if !strings.Contains(err.Error(), "record 2") || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: message %q does not name the record and field", tc.name, err)
		}
		if n := countRows(t, pool); n != 1 {
			t.Errorf("%s: %d rows after a refused page, want 1", tc.name, n)
		}
		if after, _ := readRow(t, pool, "1"); after.Xmin != before.Xmin {
			t.Errorf("%s: the stored row was written by a refused page", tc.name)
		}
	}
}

func TestParseDecimal(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"1.25": "1.25", "0": "0", "3": "3", "0.5": "0.5", "2.5e1": "25", "-0": "0", "123456789012345678901234.5": "123456789012345678901234.5"} {
		n, reason := parseDecimal(in)
		if reason != "" {
			t.Errorf("parseDecimal(%q): %s", in, reason)
			continue
		}
		b, err := n.MarshalJSON()
		if err != nil || string(b) != want {
			t.Errorf("parseDecimal(%q) = %s, want %s (%v)", in, b, want, err)
		}
	}
	for _, in := range []string{"", "NaN", "nan", "Infinity", "-Infinity", "inf", "-1", "-0.01", "1.2.3", "1,5", "abc", "1e", "1e5000", " 1", "."} {
		if _, reason := parseDecimal(in); reason == "" {
			t.Errorf("parseDecimal(%q) accepted", in)
		}
	}
}
