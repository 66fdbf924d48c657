package upsert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	r := rec("9", 9, live)
	r.Row[gadgets.Index("spec")] = json.RawMessage(`{"a":"\u0000"}`)
	if _, err := apply(r); err == nil {
		t.Error(`spec with \u0000 accepted`)
	}
}
