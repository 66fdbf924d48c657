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
)

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
		{"invalid UTF-8 in notes", "notes", func(r *clients.Record) { s := "caf\xe9"; r.TimeEntry.Notes = &s }},
		{"NUL in notes", "notes", func(r *clients.Record) { s := "a\x00b"; r.TimeEntry.Notes = &s }},
		{"NaN hours", "hours", func(r *clients.Record) { r.TimeEntry.Hours = "NaN" }},
		{"infinite hours", "hours", func(r *clients.Record) { r.TimeEntry.Hours = "Infinity" }},
		{"negative hours", "hours", func(r *clients.Record) { r.TimeEntry.Hours = "-1.5" }},
		{"hours not a decimal", "hours", func(r *clients.Record) { r.TimeEntry.Hours = "1,5" }},
		{"hours missing", "hours", func(r *clients.Record) { r.TimeEntry.Hours = "" }},
		{"no spent date", "spent_date", func(r *clients.Record) { r.TimeEntry.SpentDate = clients.Date{} }},
		{"live record without typed fields", "TimeEntry", func(r *clients.Record) { r.TimeEntry = nil }},
		{"typed fields of another resource", "typed fields", func(r *clients.Record) { r.Task = &clients.Task{Name: "x"} }},
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
