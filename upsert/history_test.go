package upsert

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/schema"
)

// tb is what the history checks need of a *testing.T or a *rapid.T.
type tb interface {
	Helper()
	Fatal(...any)
	Fatalf(string, ...any)
	Errorf(string, ...any)
}

// hv is one history row as the tests compare them.
type hv struct {
	ID                       string
	Updated                  time.Time
	Deleted                  bool
	Change                   string
	ValidFrom, ValidTo       time.Time
	RecordedFrom, RecordedTo time.Time
	Run                      *string
	Notes                    *string
	Hash                     []byte
}

var infinity = time.Date(294276, 12, 31, 23, 59, 59, 999999000, time.UTC)

func historyDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool := pgtest.DB(t)
	if err := EnsureHistory(context.Background(), pool, testSource, []clients.Resource{clients.TimeEntries}); err != nil {
		t.Fatal(err)
	}
	return pool
}

// applyH applies recs with history on, in one transaction, as run.
func applyH(t testing.TB, pool *pgxpool.Pool, run string, recs ...clients.Record) Counts {
	t.Helper()
	var c Counts
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		var err error
		c, err = Apply(context.Background(), tx, testSource, clients.TimeEntries, recs, WithHistory(true), WithRun(run))
		return err
	})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return c
}

func readHistory(t tb, pool *pgxpool.Pool, source, id string) []hv {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT id, updated_at, deleted, change, valid_from,
		CASE WHEN valid_to = 'infinity' THEN $3 ELSE valid_to END, recorded_from,
		CASE WHEN recorded_to = 'infinity' THEN $3 ELSE recorded_to END, run_id, notes, content_hash
		FROM time_entries_versions($1, $2)`, source, id, infinity)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (hv, error) {
		var v hv
		err := r.Scan(&v.ID, &v.Updated, &v.Deleted, &v.Change, &v.ValidFrom, &v.ValidTo, &v.RecordedFrom, &v.RecordedTo, &v.Run, &v.Notes, &v.Hash)
		return v, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func changes(vs []hv) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Change)
	}
	return out
}

// checkChain holds the intervals of one record's versions: each starts
// where the previous ended, in valid and recorded time, the last is open.
func checkChain(t tb, vs []hv) {
	t.Helper()
	for i, v := range vs {
		if v.ValidTo.Before(v.ValidFrom) || v.RecordedTo.Before(v.RecordedFrom) {
			t.Errorf("version %d ends before it starts: %+v", i, v)
		}
		if i == len(vs)-1 {
			if !v.ValidTo.Equal(infinity) || !v.RecordedTo.Equal(infinity) {
				t.Errorf("last version not open: %+v", v)
			}
			continue
		}
		n := vs[i+1]
		if !v.ValidTo.Equal(n.ValidFrom) || !v.RecordedTo.Equal(n.RecordedFrom) {
			t.Errorf("version %d ends at (%v, %v), the next starts at (%v, %v)", i, v.ValidTo, v.RecordedTo, n.ValidFrom, n.RecordedFrom)
		}
	}
}

func TestHistoryRecordsEveryRealChangeOnly(t *testing.T) {
	t.Parallel()
	pool := historyDB(t)
	v1, v2, v3 := t0, t0.Add(time.Hour), t0.Add(2*time.Hour)
	f := func(d int) time.Time { return t0.Add(time.Duration(d) * time.Minute) }

	applyH(t, pool, "r1", entry(1, v1, f(1), "a"))
	applyH(t, pool, "r2", entry(1, v1, f(2), "a"))                         // re-delivery
	applyH(t, pool, "r3", entry(1, v2, f(3), "b"))                         // newer
	if c := applyH(t, pool, "r4", entry(1, v1, f(4), "c")); c.Stale != 1 { // older, other content
		t.Fatalf("stale counts = %+v", c)
	}
	applyH(t, pool, "r5", entry(1, v2, f(5), "b2")) // same version, content differs
	applyH(t, pool, "r6", entry(1, v2, f(6), "b2")) // re-delivery of it
	applyH(t, pool, "r7", deletion(entry(1, v3, f(7), "b2"), true))
	applyH(t, pool, "r8", entry(1, v3.Add(time.Hour), f(8), "d")) // restore
	applyH(t, pool, "r9", deletion(entry(1, v3.Add(2*time.Hour), f(9), "d"), false))

	vs := readHistory(t, pool, testSource, "1")
	want := []string{"created", "updated", "updated", "deleted", "restored", "deleted"}
	if got := changes(vs); !equalStrings(got, want) {
		t.Fatalf("changes = %v, want %v", got, want)
	}
	runs := []string{"r1", "r3", "r5", "r7", "r8", "r9"}
	for i, v := range vs {
		if v.Run == nil || *v.Run != runs[i] {
			t.Errorf("version %d written by %v, want %s", i, v.Run, runs[i])
		}
	}
	checkChain(t, vs)
	// The tie: the first version of v2 lasted no valid time at all.
	if !vs[1].ValidFrom.Equal(v2) || !vs[1].ValidTo.Equal(v2) || !vs[2].ValidFrom.Equal(v2) {
		t.Errorf("tie versions = %+v, %+v", vs[1], vs[2])
	}
	// Three intervals of life, two of deletion, no overlap.
	if *vs[2].Notes != "Worked on the thing, rev b2" || !vs[3].Deleted || vs[4].Deleted || !vs[5].Deleted {
		t.Errorf("versions = %+v", vs)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestHistoryAsOfEdges: a version is valid from its own instant on
// (inclusive) and until the next one's (exclusive).
func TestHistoryAsOfEdges(t *testing.T) {
	t.Parallel()
	pool := historyDB(t)
	v1 := time.Date(2028, 2, 29, 23, 59, 59, 0, time.UTC) // a leap day's last second
	v2 := time.Date(2028, 3, 1, 0, 0, 0, 0, time.UTC)
	applyH(t, pool, "r1", entry(7, v1, v1, "a"))
	applyH(t, pool, "r2", entry(7, v2, v2, "b"))
	asOf := func(at time.Time) string {
		var n string
		err := pool.QueryRow(context.Background(), `SELECT coalesce(string_agg(notes, ','), '') FROM time_entries_as_of($1, $2)`, testSource, at).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, c := range []struct {
		at   time.Time
		want string
	}{
		{v1.Add(-time.Microsecond), ""},
		{v1, "Worked on the thing, rev a"},
		{v2.Add(-time.Microsecond), "Worked on the thing, rev a"},
		{v2, "Worked on the thing, rev b"},
		{v2.AddDate(10, 0, 0), "Worked on the thing, rev b"},
	} {
		if got := asOf(c.at); got != c.want {
			t.Errorf("as of %v = %q, want %q", c.at, got, c.want)
		}
	}
}

// TestHistoryOverlapRefusedByDatabase: whatever the code does, Postgres
// refuses two versions of one record valid at the same instant: a second
// first version, a second successor, a version that does not start where
// its predecessor ends, a closed version moved, an interval backwards.
func TestHistoryOverlapRefusedByDatabase(t *testing.T) {
	t.Parallel()
	pool := historyDB(t)
	applyH(t, pool, "r1", entry(1, t0, t0, "a"))
	applyH(t, pool, "r2", entry(1, t0.Add(time.Hour), t0.Add(time.Hour), "b"))
	const copyRow = `INSERT INTO time_entries_history_store
		(source, id, prev_seq, spent_date, hours, user_id, billable, is_locked, is_closed, is_billed, is_running,
		 updated_at, fetched_at, content_hash, change, valid_from, valid_to, recorded_from)
		SELECT source, id, %s, spent_date, hours, user_id, billable, is_locked, is_closed, is_billed, is_running,
		 updated_at, fetched_at, content_hash, 'updated', %s, %s, now()
		FROM time_entries_history_store WHERE seq = (SELECT min(seq) FROM time_entries_history_store)`
	for _, c := range []struct{ name, sql, code string }{
		{"a second first version", fmt.Sprintf(copyRow, "NULL", "valid_from + interval '1 second'", "'infinity'"), "23505"},
		{"a second successor", fmt.Sprintf(copyRow, "seq", "valid_to", "'infinity'"), "23505"},
		{"a successor that does not start where its predecessor ends", fmt.Sprintf(copyRow, "(SELECT max(seq) FROM time_entries_history_store)", "valid_from", "'infinity'"), "23503"},
		{"a closed version moved", `UPDATE time_entries_history_store SET valid_to = valid_to + interval '1 second' WHERE valid_to <> 'infinity'`, "23503"},
		{"an interval backwards", `UPDATE time_entries_history_store SET valid_to = valid_from - interval '1 second' WHERE valid_to = 'infinity'`, "23514"},
	} {
		_, err := pool.Exec(context.Background(), c.sql)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != c.code {
			t.Errorf("%s: err = %v, want SQLSTATE %s", c.name, err, c.code)
		}
	}
	checkChain(t, readHistory(t, pool, testSource, "1"))
}

// TestHistoryFirstSeen: turning history on records the stored versions as
// first seen; turned off and on again, what changed meanwhile is first seen
// too, and what was recorded stays.
func TestHistoryFirstSeen(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	applyTx(t, pool, []clients.Record{entry(1, t0, t0, "a"), entry(2, t0, t0, "a")})
	ensure := func() {
		t.Helper()
		if err := EnsureHistory(context.Background(), pool, testSource, []clients.Resource{clients.TimeEntries}); err != nil {
			t.Fatal(err)
		}
	}
	ensure()
	ensure() // idempotent
	if got := changes(readHistory(t, pool, testSource, "1")); !equalStrings(got, []string{"first_seen"}) {
		t.Fatalf("after turning on: %v", got)
	}
	applyH(t, pool, "r1", entry(1, t0.Add(time.Hour), t0.Add(time.Hour), "b"))
	// Off: a change without history; on again.
	if err := PrepareHistory(context.Background(), pool, testSource, nil, []clients.Resource{clients.TimeEntries}); err != nil {
		t.Fatal(err)
	}
	applyTx(t, pool, []clients.Record{entry(1, t0.Add(2*time.Hour), t0.Add(2*time.Hour), "c")})
	ensure()
	vs := readHistory(t, pool, testSource, "1")
	if got := changes(vs); !equalStrings(got, []string{"first_seen", "updated", "first_seen"}) {
		t.Fatalf("after off and on: %v", got)
	}
	checkChain(t, vs)
	if got := changes(readHistory(t, pool, testSource, "2")); !equalStrings(got, []string{"first_seen"}) {
		t.Fatalf("unchanged record: %v", got)
	}
}

// TestHistoryHealedFalseDeletion: a reconcile that tombstones a record the
// next pass brings back leaves both versions, each with its run: the false
// deletion lasts no valid time once healed by the same version.
func TestHistoryHealedFalseDeletion(t *testing.T) {
	t.Parallel()
	pool := historyDB(t)
	applyH(t, pool, "pass1", entry(1, t0, t0, "a"), entry(2, t0, t0, "a"))
	asOf := t0.Add(time.Hour)
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		_, err := TombstoneMissing(context.Background(), tx, TombstoneParams{Source: testSource, Resource: clients.TimeEntries,
			AsOf: asOf, Seen: []string{"2"}, History: true, RunID: "reconcile1"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The next pass lists it again: same version, fetched after the mark.
	if c := applyH(t, pool, "pass2", entry(1, t0, time.Now(), "a")); c.Updated != 1 {
		t.Fatalf("heal counts = %+v", c)
	}
	vs := readHistory(t, pool, testSource, "1")
	if got := changes(vs); !equalStrings(got, []string{"created", "deleted", "restored"}) {
		t.Fatalf("changes = %v", got)
	}
	if *vs[1].Run != "reconcile1" || *vs[2].Run != "pass2" {
		t.Errorf("runs = %v, %v", *vs[1].Run, *vs[2].Run)
	}
	// Dated no later than the reconcile that found it missing.
	if vs[1].ValidFrom.After(asOf) {
		t.Errorf("deletion dated %v, after the reconcile's %v", vs[1].ValidFrom, asOf)
	}
	checkChain(t, vs)
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM time_entries_as_of($1, $2) WHERE id = '1'`, testSource, asOf.Add(time.Minute)).Scan(&n); err != nil || n != 1 {
		t.Errorf("healed record as of after the reconcile: %d rows, %v", n, err)
	}
}

// TestHistoryOffWritesNothing: a resource without history writes no
// version; a re-delivery with history on writes none either.
func TestHistoryOffWritesNothing(t *testing.T) {
	t.Parallel()
	pool := historyDB(t)
	applyTx(t, pool, []clients.Record{entry(1, t0, t0, "a")})
	applyH(t, pool, "r1", entry(2, t0, t0, "a"))
	applyH(t, pool, "r2", entry(2, t0, t0.Add(time.Minute), "a"), entry(1, t0, t0, "a"))
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM time_entries_history`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("history rows = %d (%v), want 1", n, err)
	}
}

// TestHistoryPrune: versions whose valid time ended before the horizon go,
// the current one always stays, and what is left is one chain again.
func TestHistoryPrune(t *testing.T) {
	t.Parallel()
	pool := historyDB(t)
	for i := range 4 {
		v := t0.Add(time.Duration(i) * 24 * time.Hour)
		applyH(t, pool, "r", entry(1, v, v, fmt.Sprint(i)), entry(2, t0, t0, "a"))
	}
	n, err := PruneHistory(context.Background(), pool, testSource, clients.TimeEntries, t0.Add(36*time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("pruned %d (%v), want 1 (the version that ended at day 1)", n, err)
	}
	vs := readHistory(t, pool, testSource, "1")
	if len(vs) != 3 || !vs[0].ValidFrom.Equal(t0.Add(24*time.Hour)) {
		t.Fatalf("left %+v", vs)
	}
	checkChain(t, vs)
	// Everything but the current versions.
	if n, err = PruneHistory(context.Background(), pool, testSource, clients.TimeEntries, time.Now()); err != nil || n != 2 {
		t.Fatalf("pruned %d (%v), want 2", n, err)
	}
	if vs := readHistory(t, pool, testSource, "1"); len(vs) != 1 || *vs[0].Notes != "Worked on the thing, rev 3" {
		t.Fatalf("left %+v", vs)
	}
	if vs := readHistory(t, pool, testSource, "2"); len(vs) != 1 {
		t.Fatalf("record 2: %+v", vs)
	}
	// The chain goes on from the version left.
	applyH(t, pool, "r", entry(1, t0.Add(10*24*time.Hour), time.Now(), "4"))
	checkChain(t, readHistory(t, pool, testSource, "1"))
}

// TestHistoryMonthEndInTheAccountZone: an entry worked on November 30th in
// New York but changed at 04:30 UTC on December 1st belongs to November's
// report, and is in it as of November's end in the account's zone, not
// before its own version.
func TestHistoryMonthEndInTheAccountZone(t *testing.T) {
	t.Parallel()
	pool := historyDB(t)
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip("no tz database")
	}
	v := time.Date(2026, 11, 30, 23, 30, 0, 0, ny) // 04:30 UTC on Dec 1st
	applyH(t, pool, "r", with(entry(9, v, v, "a"), "spent_date", clients.Date{Year: 2026, Month: 11, Day: 30}))
	count := func(at time.Time) int {
		var n int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM time_entries_as_of($1, $2)
			WHERE spent_date >= '2026-11-01' AND spent_date < '2026-12-01'`, testSource, at).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(time.Date(2026, 11, 30, 23, 59, 59, 0, ny)); n != 1 {
		t.Errorf("as of November's end in New York: %d entries of November, want 1", n)
	}
	if n := count(time.Date(2026, 11, 30, 23, 59, 59, 0, time.UTC)); n != 0 {
		t.Errorf("as of November's end in UTC (before the version): %d, want 0", n)
	}
}

// invoice is a Harvest-shaped invoice at version v: state, amount, due and
// its lines' description.
func invoice(v time.Time, state, amount, due string, sent, paid *time.Time, line string) clients.Record {
	raw := fmt.Appendf(nil, `{"id":13150378,"client":{"id":5735776},"state":%q,"amount":%s,"due_amount":%s,"line_items":[{"id":1,"kind":"Service","description":%q,"quantity":1,"unit_price":%s,"amount":%s,"taxed":false,"taxed2":false}],"updated_at":%q}`,
		state, amount, due, line, amount, amount, v.Format(time.RFC3339))
	vals := schema.Values{"client_id": "5735776", "state": state, "amount": clients.Decimal(amount), "due_amount": clients.Decimal(due)}
	if sent != nil {
		vals["sent_at"] = *sent
	}
	if paid != nil {
		vals["paid_at"] = *paid
	}
	return clients.Record{ID: "13150378", Version: v, FetchedAt: v, Raw: raw, Row: schema.Invoices.Row(vals)}
}

// TestInvoiceLateEdits (issue 32): invoice_late_edits lists an invoice's
// content changed after it was sent (its amount and its lines), not the
// sending itself, not an edit of the draft, not a payment.
func TestInvoiceLateEdits(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	ctx := context.Background()
	if err := EnsureHistory(ctx, pool, testSource, []clients.Resource{"invoices"}); err != nil {
		t.Fatal(err)
	}
	apply := func(rec clients.Record) {
		t.Helper()
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := Apply(ctx, tx, testSource, "invoices", []clients.Record{rec}, WithHistory(true))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	at := func(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }
	sent, paid := at(2), at(4)
	apply(invoice(at(0), "draft", "100.0", "100.0", nil, nil, "Design"))
	apply(invoice(at(1), "draft", "120.0", "120.0", nil, nil, "Design, more"))     // a draft edited: no late edit
	apply(invoice(at(2), "open", "120.0", "120.0", &sent, nil, "Design, more"))    // sent: a status
	apply(invoice(at(3), "open", "150.0", "150.0", &sent, nil, "Design and copy")) // edited after it was sent
	apply(invoice(at(4), "paid", "150.0", "0.0", &sent, &paid, "Design and copy")) // paid: no edit
	var got string
	err := pool.QueryRow(ctx, `SELECT string_agg(format('%s %s %s %s', id, change, array_to_string(changed, ','), amount_change), '; ')
		FROM invoice_late_edits WHERE source = $1`, testSource).Scan(&got)
	if err != nil {
		t.Fatal(err)
	}
	if want := "13150378 updated amount,line_items 30.0"; got != want {
		t.Fatalf("invoice late edits: %q, want %q", got, want)
	}
}
