package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/simulated"
	"github.com/tidemarkhq/tidemark/schema"
	"github.com/tidemarkhq/tidemark/upsert"
)

// te is one time entry version as the history CLI tests write them.
type te struct {
	id      int
	version time.Time
	day     int // of January 2026
	hours   string
	notes   string
	tags    string // JSON array, "" for null
	deleted bool
}

// record builds te's record: the raw carries every field, so each content
// has its own hash.
func (e te) record() clients.Record {
	raw := fmt.Appendf(nil, `{"id":%d,"spent_date":"2026-01-%02d","hours":%s,"notes":%q,"tags":%s,"deleted":%t,"updated_at":%q}`,
		e.id, e.day, e.hours, e.notes, cmpOr(e.tags, "null"), e.deleted, e.version.Format(time.RFC3339Nano))
	var tags any
	if e.tags != "" {
		tags = json.RawMessage(e.tags)
	}
	rec := clients.Record{ID: strconv.Itoa(e.id), Version: e.version, FetchedAt: e.version, Raw: raw,
		Row: schema.TimeEntries.Row(schema.Values{
			"spent_date": clients.Date{Year: 2026, Month: 1, Day: e.day}, "hours": clients.Decimal(e.hours),
			"notes": e.notes, "user_id": "u1", "project_id": "p1", "billable": true, "tags": tags,
		})}
	if e.deleted {
		d := e.version
		rec.DeletedAt = &d
	}
	return rec
}

func cmpOr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

// applyRun applies entries with history on, in one transaction, as run.
func applyRun(t *testing.T, e *env, run string, es ...te) {
	t.Helper()
	var recs []clients.Record
	for _, x := range es {
		recs = append(recs, x.record())
	}
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		_, err := upsert.Apply(ctx, tx, "acme", clients.TimeEntries, recs, upsert.WithHistory(true), upsert.WithRun(run))
		return err
	})
	if err != nil {
		t.Fatalf("apply %s: %v", run, err)
	}
}

func jan(day, hour int) time.Time { return time.Date(2026, 1, day, hour, 0, 0, 0, time.UTC) }

// dbNow reads the database clock (recorded time is the database's).
func dbNow(t *testing.T, e *env) time.Time {
	t.Helper()
	var ts time.Time
	if err := e.pool.QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&ts); err != nil {
		t.Fatal(err)
	}
	return ts
}

// historyWorld writes a known history of time entries of source acme:
// four runs, an update, a deletion, a creation, a restore. It returns the
// config and two instants of recorded time (after r2, after r4).
func historyWorld(t *testing.T) (*env, string, time.Time, time.Time) {
	e := newEnv(t)
	_, cfg := e.acme(simulated.Params{Seed: 3}, source{history: true})
	if err := upsert.EnsureHistory(context.Background(), e.pool, "acme", []clients.Resource{clients.TimeEntries}); err != nil {
		t.Fatal(err)
	}
	applyRun(t, e, "r1", te{id: 1, version: jan(5, 10), day: 5, hours: "1.50", notes: "a", tags: `["x"]`},
		te{id: 2, version: jan(5, 10), day: 5, hours: "2.00", notes: "two"},
		te{id: 3, version: jan(5, 10), day: 5, hours: "0.75", notes: "three"})
	applyRun(t, e, "r2", te{id: 1, version: jan(6, 9), day: 5, hours: "2.25", notes: "b", tags: `["x", "y"]`})
	k1 := dbNow(t, e)
	applyRun(t, e, "r3", te{id: 2, version: jan(7, 12), day: 5, hours: "2.00", notes: "two", deleted: true},
		te{id: 4, version: jan(7, 12), day: 7, hours: "3.00", notes: "four"})
	applyRun(t, e, "r4", te{id: 3, version: jan(8, 8), day: 5, hours: "0.75", notes: "three, edited"},
		te{id: 2, version: jan(9, 8), day: 5, hours: "1.00", notes: "two again"})
	return e, cfg, k1, dbNow(t, e)
}

// ---- the history as SQL returns it ------------------------------------------

// sqlRow is one history row read with SQL: its columns as PostgreSQL's text
// (timestamptz in UTC), nil for NULL.
type sqlRow struct {
	id           string
	seq          int64
	prevSeq      *int64
	change       string
	deleted      bool
	validFrom    time.Time
	validTo      *time.Time
	recordedFrom time.Time
	recordedTo   *time.Time
	run          *string
	updatedAt    time.Time
	hash         []byte
	text         map[string]*string
}

// typedText lists the typed columns as text, for a query on h.
func typedText() string {
	var cols []string
	for _, c := range schema.TimeEntries.Columns {
		if c.Type == schema.Timestamptz {
			cols = append(cols, fmt.Sprintf("(h.%s AT TIME ZONE 'UTC')::text", c.Name))
		} else {
			cols = append(cols, fmt.Sprintf("h.%s::text", c.Name))
		}
	}
	return strings.Join(cols, ", ")
}

// sqlRows runs `SELECT … FROM <from> h` (from: a history function call).
func sqlRows(t *testing.T, e *env, from string, args ...any) []sqlRow {
	t.Helper()
	q := `SELECT h.id, h.seq, h.prev_seq, h.change, h.deleted, h.valid_from,
	  CASE WHEN h.valid_to = 'infinity' THEN NULL ELSE h.valid_to END, h.recorded_from,
	  CASE WHEN h.recorded_to = 'infinity' THEN NULL ELSE h.recorded_to END,
	  h.run_id, h.updated_at, h.content_hash, ` + typedText() + ` FROM ` + from + ` h`
	rows, err := e.pool.Query(context.Background(), q, args...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (sqlRow, error) {
		var v sqlRow
		texts := make([]*string, len(schema.TimeEntries.Columns))
		dst := []any{&v.id, &v.seq, &v.prevSeq, &v.change, &v.deleted, &v.validFrom, &v.validTo,
			&v.recordedFrom, &v.recordedTo, &v.run, &v.updatedAt, &v.hash}
		for i := range texts {
			dst = append(dst, &texts[i])
		}
		err := r.Scan(dst...)
		v.text = map[string]*string{}
		for i, c := range schema.TimeEntries.Columns {
			v.text[c.Name] = texts[i]
		}
		return v, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// jsonText turns a value of the CLI's JSON into the text SQL gives for a
// column of type typ (nil for null); jsonb compares as parsed JSON.
func jsonText(t *testing.T, raw json.RawMessage, typ schema.Type) *string {
	t.Helper()
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	s := string(raw)
	switch {
	case typ == schema.JSONB:
		s = normalJSON(t, s)
	case raw[0] == '"':
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		if typ == schema.Timestamptz {
			ts, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				t.Fatalf("%s: %v", s, err)
			}
			s = ts.UTC().Format("2006-01-02 15:04:05.999999")
		}
	}
	return &s
}

func normalJSON(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// sqlText is a column's SQL text as jsonText compares it.
func sqlText(t *testing.T, s *string, typ schema.Type) *string {
	if s == nil || typ != schema.JSONB {
		return s
	}
	n := normalJSON(t, *s)
	return &n
}

func sameText(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func show(s *string) string {
	if s == nil {
		return "NULL"
	}
	return *s
}

// checkValues holds the CLI's values of a record to SQL's, column by column.
func checkValues(t *testing.T, where string, got map[string]json.RawMessage, want map[string]*string) {
	t.Helper()
	if len(got) != len(schema.TimeEntries.Columns) {
		t.Errorf("%s: %d values, want the %d typed columns", where, len(got), len(schema.TimeEntries.Columns))
	}
	for _, c := range schema.TimeEntries.Columns {
		g, w := jsonText(t, got[c.Name], c.Type), sqlText(t, want[c.Name], c.Type)
		if !sameText(g, w) {
			t.Errorf("%s: %s = %s, SQL says %s", where, c.Name, show(g), show(w))
		}
	}
}

// cliChange is one column of `changed` in the CLI's JSON.
type cliChange struct {
	From json.RawMessage `json:"from"`
	To   json.RawMessage `json:"to"`
}

// checkChanged holds the CLI's changed columns to the columns whose SQL
// text differs between two versions.
func checkChanged(t *testing.T, where string, got map[string]cliChange, from, to map[string]*string) {
	t.Helper()
	var want []string
	for _, c := range schema.TimeEntries.Columns {
		a, b := sqlText(t, from[c.Name], c.Type), sqlText(t, to[c.Name], c.Type)
		if sameText(a, b) {
			continue
		}
		want = append(want, c.Name)
		ch, ok := got[c.Name]
		if !ok {
			continue
		}
		if g := jsonText(t, ch.From, c.Type); !sameText(g, a) {
			t.Errorf("%s: %s changed from %s, SQL says %s", where, c.Name, show(g), show(a))
		}
		if g := jsonText(t, ch.To, c.Type); !sameText(g, b) {
			t.Errorf("%s: %s changed to %s, SQL says %s", where, c.Name, show(g), show(b))
		}
	}
	if g := slices.Sorted(maps.Keys(got)); !slices.Equal(g, slices.Sorted(slices.Values(want))) {
		t.Errorf("%s: changed %v, SQL says %v", where, g, want)
	}
}

// ---- tidemark history SOURCE RESOURCE ID ---------------------------------------

// cliVersion is one element of `tidemark history --json`, by its documented
// names.
type cliVersion struct {
	Seq          int64                      `json:"seq"`
	PrevSeq      *int64                     `json:"prev_seq"`
	Change       string                     `json:"change"`
	Deleted      bool                       `json:"deleted"`
	ValidFrom    time.Time                  `json:"valid_from"`
	ValidTo      *time.Time                 `json:"valid_to"`
	RecordedFrom time.Time                  `json:"recorded_from"`
	RecordedTo   *time.Time                 `json:"recorded_to"`
	RunID        *string                    `json:"run_id"`
	UpdatedAt    time.Time                  `json:"updated_at"`
	ContentHash  string                     `json:"content_hash"`
	Values       map[string]json.RawMessage `json:"values"`
	Changed      map[string]cliChange       `json:"changed"`
}

func sameTime(a, b *time.Time) bool { return (a == nil) == (b == nil) && (a == nil || a.Equal(*b)) }

// checkVersions holds `history --json` of one record to <r>_versions,
// field by field.
func checkVersions(t *testing.T, got []cliVersion, want []sqlRow) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d versions, time_entries_versions returns %d", len(got), len(want))
	}
	for i, g := range got {
		w, where := want[i], fmt.Sprintf("version %d (seq %d)", i, want[i].seq)
		same := g.Seq == w.seq && reflect.DeepEqual(g.PrevSeq, w.prevSeq) && g.Change == w.change &&
			g.Deleted == w.deleted && g.ValidFrom.Equal(w.validFrom) && sameTime(g.ValidTo, w.validTo) &&
			g.RecordedFrom.Equal(w.recordedFrom) && sameTime(g.RecordedTo, w.recordedTo) &&
			sameText(g.RunID, w.run) && g.UpdatedAt.Equal(w.updatedAt) && g.ContentHash == hex.EncodeToString(w.hash)
		if !same {
			t.Errorf("%s: CLI %+v\nSQL %+v", where, g, w)
		}
		checkValues(t, where, g.Values, w.text)
		var prev map[string]*string
		if i > 0 {
			prev = want[i-1].text
		} else {
			prev = w.text // the first version changes nothing
		}
		checkChanged(t, where, g.Changed, prev, w.text)
	}
}

// TestE2EHistoryCLIVersions (issue 32): `tidemark history SOURCE RESOURCE
// ID --json` returns what time_entries_versions returns, field by field,
// with the changed columns between versions; the human output shows the
// same in blocks that fit 80 columns.
func TestE2EHistoryCLIVersions(t *testing.T) {
	t.Parallel()
	e, cfg, _, _ := historyWorld(t)
	for id, changes := range map[string][]string{
		"1": {"created", "updated"},
		"2": {"created", "deleted", "restored"},
		"4": {"created"},
	} {
		got := cliJSON[[]cliVersion](t, e, "history", "acme", "time_entries", id, "--json", "--config", cfg)
		checkVersions(t, got, sqlRows(t, e, `time_entries_versions('acme', $1)`, id))
		var kinds []string
		for _, v := range got {
			kinds = append(kinds, v.Change)
		}
		if !slices.Equal(kinds, changes) {
			t.Errorf("entry %s: changes %v, want %v", id, kinds, changes)
		}
	}
	v1 := cliJSON[[]cliVersion](t, e, "history", "acme", "time_entries", "1", "--json")
	if c := v1[1].Changed; len(c) != 3 || string(c["hours"].From) != "1.50" || string(c["hours"].To) != "2.25" {
		t.Errorf("entry 1's update changed %v, want hours 1.50 → 2.25, notes and tags", c)
	}
	out, errs, code := e.cli("history", "acme", "time_entries", "1", "--config", cfg)
	if code != 0 {
		t.Fatalf("history exited %d: %s", code, errs)
	}
	for _, want := range []string{"time_entries 1 of acme: 2 versions", "created  run r1", "updated  run r2",
		"2026-01-05T10:00:00Z → 2026-01-06T09:00:00Z", "2026-01-06T09:00:00Z → open",
		"1.50 → 2.25", "a → b", "spent_date", "2026-01-05"} {
		if !strings.Contains(out, want) {
			t.Errorf("history output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "spent_date") != 1 {
		t.Errorf("an unchanged column is repeated:\n%s", out)
	}
	fits80(t, out)
}

func fits80(t *testing.T, out string) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if utf8.RuneCountInString(l) > 80 {
			t.Errorf("line of %d columns: %q", utf8.RuneCountInString(l), l)
		}
	}
}
