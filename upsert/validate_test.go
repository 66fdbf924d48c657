package upsert

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/schema"
)

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
		{"raw with \\u0000", "raw", func(r *clients.Record) { r.Raw = []byte(`{"notes":"a\u0000b"}`) }},
		{"raw with a lone surrogate", "raw", func(r *clients.Record) { r.Raw = []byte(`{"notes":"\ud800"}`) }},
		{"invalid UTF-8 in notes", "notes", set("notes", "caf\xe9")},
		{"NUL in notes", "notes", set("notes", "a\x00b")},
		{"NaN hours", "hours", set("hours", clients.Decimal("NaN"))},
		{"infinite hours", "hours", set("hours", clients.Decimal("Infinity"))},
		{"negative hours", "hours", set("hours", clients.Decimal("-1.5"))},
		{"hours not a decimal", "hours", set("hours", clients.Decimal("1,5"))},
		{"hours missing", "hours", set("hours", clients.Decimal(""))},
		{"no spent date", "spent_date", set("spent_date", clients.Date{})},
		{"not a calendar date", "spent_date", set("spent_date", clients.Date{Year: 2026, Month: 2, Day: 30})},
		{"NUL in an id", "user_id", set("user_id", "17\x00")},
		{"invalid UTF-8 in a nullable id", "task_id", set("task_id", "\xff")},
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
