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
	t.Helper()
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

// ---- tidemark history diff -----------------------------------------------------

// cliDiff is `tidemark history diff --json`, by its documented names.
type cliDiff struct {
	Source   string     `json:"source"`
	Resource string     `json:"resource"`
	Time     string     `json:"time"`
	From     time.Time  `json:"from"`
	To       time.Time  `json:"to"`
	Created  []cliEntry `json:"created"`
	Changed  []cliEntry `json:"changed"`
	Deleted  []cliEntry `json:"deleted"`
	Totals   struct {
		Created     int          `json:"created"`
		Changed     int          `json:"changed"`
		Deleted     int          `json:"deleted"`
		HoursFrom   *json.Number `json:"hours_from"`
		HoursTo     *json.Number `json:"hours_to"`
		HoursChange *json.Number `json:"hours_change"`
	} `json:"totals"`
}

type cliEntry struct {
	ID      string                     `json:"id"`
	Values  map[string]json.RawMessage `json:"values"`
	Changed map[string]cliChange       `json:"changed"`
}

// sqlHours sums the hours a history function returns, in SQL's numeric.
func sqlHours(t *testing.T, e *env, fn string, at time.Time) string {
	t.Helper()
	var s string
	if err := e.pool.QueryRow(context.Background(), `SELECT coalesce(sum(hours), 0)::text FROM `+fn+`('acme', $1)`, at).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// checkDiff holds a `history diff --json` to the history function fn at
// both instants: created, changed and deleted ids, their values and
// changed columns, and the hours, field by field. It returns the ids.
func checkDiff(t *testing.T, e *env, fn string, d cliDiff) (created, changed, deleted []string) {
	t.Helper()
	byID := func(rs []sqlRow) map[string]sqlRow {
		m := map[string]sqlRow{}
		for _, r := range rs {
			m[r.id] = r
		}
		return m
	}
	a := byID(sqlRows(t, e, fn+`('acme', $1)`, d.From))
	b := byID(sqlRows(t, e, fn+`('acme', $1)`, d.To))
	var want [3][]string
	for id, r := range b {
		if p, ok := a[id]; !ok {
			want[0] = append(want[0], id)
		} else if !slices.Equal(p.hash, r.hash) {
			want[1] = append(want[1], id)
		}
	}
	for id := range a {
		if _, ok := b[id]; !ok {
			want[2] = append(want[2], id)
		}
	}
	for i, s := range []struct {
		name   string
		es     []cliEntry
		values map[string]sqlRow
	}{{"created", d.Created, b}, {"changed", d.Changed, b}, {"deleted", d.Deleted, a}} {
		var ids []string
		for _, x := range s.es {
			ids = append(ids, x.ID)
			checkValues(t, s.name+" "+x.ID, x.Values, s.values[x.ID].text)
			if s.name == "changed" {
				checkChanged(t, "changed "+x.ID, x.Changed, a[x.ID].text, b[x.ID].text)
			}
		}
		slices.Sort(want[i])
		if !slices.Equal(slices.Sorted(slices.Values(ids)), want[i]) {
			t.Errorf("%s %v, %s says %v", s.name, ids, fn, want[i])
		}
	}
	tot := d.Totals
	if tot.Created != len(want[0]) || tot.Changed != len(want[1]) || tot.Deleted != len(want[2]) {
		t.Errorf("totals %+v, want %d, %d, %d", tot, len(want[0]), len(want[1]), len(want[2]))
	}
	hf, ht := sqlHours(t, e, fn, d.From), sqlHours(t, e, fn, d.To)
	var delta string
	if err := e.pool.QueryRow(context.Background(), `SELECT ($2::numeric - $1::numeric)::text`, hf, ht).Scan(&delta); err != nil {
		t.Fatal(err)
	}
	if tot.HoursFrom == nil || tot.HoursTo == nil || tot.HoursChange == nil ||
		tot.HoursFrom.String() != hf || tot.HoursTo.String() != ht || tot.HoursChange.String() != delta {
		t.Errorf("hours %v → %v (%v), %s says %s → %s (%s)", tot.HoursFrom, tot.HoursTo, tot.HoursChange, fn, hf, ht, delta)
	}
	return want[0], want[1], want[2]
}

// TestE2EHistoryCLIDiff (issue 32): `history diff --json` returns what
// time_entries_as_of (valid time) and time_entries_known_at (--known,
// recorded time) return at both instants, with exact hours; the human
// output says the same in 80 columns.
func TestE2EHistoryCLIDiff(t *testing.T) {
	t.Parallel()
	e, cfg, k1, k2 := historyWorld(t)
	d := cliJSON[cliDiff](t, e, "history", "diff", "acme", "time_entries", "--from", "2026-01-06",
		"--to", "2026-01-08T10:00:00+01:00", "--json", "--config", cfg)
	if d.Time != "valid" || !d.From.Equal(jan(6, 0)) || !d.To.Equal(jan(8, 9)) || d.Source != "acme" || d.Resource != "time_entries" {
		t.Errorf("diff of %s %s, %s time %v → %v", d.Source, d.Resource, d.Time, d.From, d.To)
	}
	c, ch, del := checkDiff(t, e, "time_entries_as_of", d)
	if !slices.Equal(c, []string{"4"}) || !slices.Equal(ch, []string{"1", "3"}) || !slices.Equal(del, []string{"2"}) ||
		d.Totals.HoursFrom.String() != "4.25" || d.Totals.HoursTo.String() != "6.00" {
		t.Errorf("valid-time diff: created %v, changed %v, deleted %v, hours %v → %v; want 4; 1, 3; 2; 4.25 → 6.00",
			c, ch, del, d.Totals.HoursFrom, d.Totals.HoursTo)
	}
	k := cliJSON[cliDiff](t, e, "history", "diff", "acme", "time_entries", "--known", "--json",
		"--from", k1.Format(time.RFC3339Nano), "--to", k2.Format(time.RFC3339Nano))
	c, ch, del = checkDiff(t, e, "time_entries_known_at", k)
	if k.Time != "recorded" || !slices.Equal(c, []string{"4"}) || !slices.Equal(ch, []string{"2", "3"}) || len(del) != 0 {
		t.Errorf("recorded-time diff (%s): created %v, changed %v, deleted %v; want 4; 2, 3; none", k.Time, c, ch, del)
	}
	out, errs, code := e.cli("history", "diff", "acme", "time_entries", "--from", "2026-01-06", "--to", "2026-01-08T09:00:00Z")
	if code != 0 {
		t.Fatalf("history diff exited %d: %s", code, errs)
	}
	for _, want := range []string{"time_entries of acme, valid time", "created 1, changed 2, deleted 1",
		"hours 4.25 → 6.00 (+1.75)", "  + 4 ", "  ~ 1", "1.50 → 2.25", "  - 2 "} {
		if !strings.Contains(out, want) {
			t.Errorf("diff output lacks %q:\n%s", want, out)
		}
	}
	fits80(t, out)
}

// TestE2EHistoryCLIBadInput: bad usage exits 2 naming the argument or flag
// (an unknown resource or source, a bad or reversed instant, a resource
// without history, naming `history:`); a record without versions exits 1.
func TestE2EHistoryCLIBadInput(t *testing.T) {
	t.Parallel()
	e, cfg, _, _ := historyWorld(t)
	diff := func(args ...string) []string {
		return append([]string{"history", "diff", "acme", "time_entries"}, args...)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"history", "acme", "nope", "1"}, 2, `RESOURCE: unknown resource "nope"`},
		{[]string{"history", "diff", "acme", "nope", "--from", "2026-01-01"}, 2, "RESOURCE"},
		{[]string{"history", "acme", "time_entries"}, 2, "accepts 3 arg(s)"},
		{diff(), 2, "--from is required"},
		{diff("--from", "yesterday"), 2, `--from "yesterday"`},
		{diff("--from", "2026-01-01", "--to", "2026-13-01"), 2, `--to "2026-13-01"`},
		{diff("--from", "2026-01-02", "--to", "2026-01-01"), 2, "--to 2026-01-01T00:00:00Z is before --from"},
		{[]string{"history", "diff", "ghost", "time_entries", "--from", "2026-01-01", "--config", cfg}, 2, `SOURCE: ` + cfg + `: no source named "ghost"`},
		{[]string{"history", "ghost", "time_entries", "1"}, 2, `source "ghost" has no history of time_entries`},
		{[]string{"history", "acme", "projects", "1", "--config", cfg}, 2, "projects has no history: add it to the source's `history:`"},
		{[]string{"history", "diff", "acme", "invoices", "--from", "2026-01-01"}, 2, "`history:`"},
		{[]string{"history", "acme", "time_entries", "999"}, 1, "no version of time_entries 999 in source acme"},
	} {
		out, errs, code := e.cli(tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d saying %q", tc.args, code, out, errs, tc.code, tc.want)
		}
	}
}
