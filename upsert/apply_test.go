package upsert

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/schema"
)

// TestWriteRule has one case per row of the write-rule table in DESIGN.md,
// plus the edges between rows.
func TestWriteRule(t *testing.T) {
	t.Parallel()
	v1, v2 := t0, t0.Add(time.Second)
	f1, f2 := t0.Add(time.Minute), t0.Add(2*time.Minute)
	cases := []struct {
		name     string
		stored   *clients.Record // nil: no stored row
		incoming clients.Record
		want     Counts
		wins     string // "incoming" or "stored"
	}{
		{"no stored row: insert", nil, entry(1, v1, f1, "a"), Counts{Inserted: 1}, "incoming"},
		{"newer, content differs: update", ptr(entry(1, v1, f1, "a")), entry(1, v2, f2, "b"), Counts{Updated: 1}, "incoming"},
		{"same content: nothing", ptr(entry(1, v1, f1, "a")), entry(1, v1, f1, "a"), Counts{Unchanged: 1}, "stored"},
		{"same content fetched later: nothing", ptr(entry(1, v1, f1, "a")), entry(1, v1, f2, "a"), Counts{Unchanged: 1}, "stored"},
		{"newer version, same content: the version moves forward", ptr(unstamped(1, v1, f1, "a")), unstamped(1, v2, f2, "a"), Counts{Unchanged: 1}, "incoming"},
		{"newer version, same content, fetched earlier: the version moves forward", ptr(unstamped(1, v1, f2, "a")), unstamped(1, v2, f1, "a"), Counts{Unchanged: 1}, "incoming"},
		{"older version, same content: nothing", ptr(unstamped(1, v2, f1, "a")), unstamped(1, v1, f2, "a"), Counts{Unchanged: 1}, "stored"},
		{"older: nothing", ptr(entry(1, v2, f2, "b")), entry(1, v1, f1, "a"), Counts{Stale: 1}, "stored"},
		{"older version fetched later: nothing", ptr(entry(1, v2, f1, "b")), entry(1, v1, f2, "a"), Counts{Stale: 1}, "stored"},
		{"same version, content differs, fetched later: update (tie)", ptr(entry(1, v1, f1, "a")), entry(1, v1, f2, "b"), Counts{Updated: 1, Ties: 1}, "incoming"},
		{"same version, content differs, fetched earlier: stale", ptr(entry(1, v1, f2, "b")), entry(1, v1, f1, "a"), Counts{Stale: 1}, "stored"},
		{"same version and fetch time, content differs: stale", ptr(entry(1, v1, f1, "a")), entry(1, v1, f1, "b"), Counts{Stale: 1}, "stored"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := pgtest.DB(t)
			var before rowState
			if tc.stored != nil {
				applyTx(t, pool, []clients.Record{*tc.stored})
				before, _ = readRow(t, pool, tc.stored.ID)
				time.Sleep(2 * time.Millisecond) // a second transaction's now() differs
			}
			got := applyTx(t, pool, []clients.Record{tc.incoming})
			if got != tc.want {
				t.Fatalf("counts = %+v, want %+v", got, tc.want)
			}
			after, ok := readRow(t, pool, tc.incoming.ID)
			if !ok {
				t.Fatal("row missing")
			}
			want := tc.incoming
			if tc.wins == "stored" {
				want = *tc.stored
			}
			if !after.UpdatedAt.Equal(want.Version) || !bytes.Equal(after.Hash, hashOf(t, want)) || *after.Notes != notes(want) {
				t.Errorf("row = (%v, %v, notes %q), want the %s record (%v, notes %q)", after.UpdatedAt, after.FetchedAt, *after.Notes, tc.wins, want.Version, notes(want))
			}
			if tc.stored == nil {
				if after.FirstSeenAt.IsZero() || after.Hours != "1.25" || after.UserID != "1782959" {
					t.Errorf("inserted row = %+v", after)
				}
				return
			}
			if !after.FirstSeenAt.Equal(before.FirstSeenAt) {
				t.Errorf("first_seen_at changed: %v -> %v", before.FirstSeenAt, after.FirstSeenAt)
			}
			if tc.wins == "stored" {
				// xmin changes with a write, xmax with a row lock.
				if after.Xmin != before.Xmin || after.Xmax != before.Xmax || !after.FetchedAt.Equal(before.FetchedAt) {
					t.Errorf("row was written or locked (xmin %d -> %d, xmax %d -> %d, fetched_at %v -> %v), want neither", before.Xmin, after.Xmin, before.Xmax, after.Xmax, before.FetchedAt, after.FetchedAt)
				}
			} else if !after.FetchedAt.Equal(want.FetchedAt) {
				t.Errorf("fetched_at = %v, want %v", after.FetchedAt, want.FetchedAt)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestMain(m *testing.M) { pgtest.Main(m) }

const testSource = "acme"

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// entry builds a Harvest-shaped time entry record; rev changes the content
// (the notes) without changing the version.
func entry(id int64, version, fetched time.Time, rev string) clients.Record {
	notes := "Worked on the thing, rev " + rev
	hours := "1.25"
	raw := harvestJSON(id, version, notes, hours)
	return clients.Record{
		ID: strconv.FormatInt(id, 10), Version: version, FetchedAt: fetched, Raw: raw,
		Row: schema.TimeEntries.Row(schema.Values{
			"spent_date": clients.Date{Year: 2026, Month: 2, Day: 27}, "hours": clients.Decimal(hours), "notes": notes,
			"user_id": "1782959", "project_id": "14307913", "task_id": "8083365", "client_id": "5735776",
			"billable": true,
		}),
	}
}

// with returns rec with the named time entry column set to v, on a copy of
// its row (rows of records built from one another are never shared).
func with(rec clients.Record, name string, v any) clients.Record {
	rec.Row = slices.Clone(rec.Row)
	rec.Row[schema.TimeEntries.Index(name)] = v
	return rec
}

// notes returns a time entry record's notes ("" when NULL).
func notes(rec clients.Record) string { return schema.TimeEntries.Text(rec, "notes") }

// deletion is rec's deletion as Harvest's fake reports it; typed keeps its
// fields.
func deletion(rec clients.Record, typed bool) clients.Record {
	return markDeleted(rec, typed, `,"server_deleted_at":"x"}`)
}

// markDeleted turns rec into its deletion at its version, with tail closing
// the raw object so the deletion's content differs from every live one.
func markDeleted(rec clients.Record, typed bool, tail string) clients.Record {
	d := rec.Version
	rec.DeletedAt = &d
	rec.Raw = append(rec.Raw[:len(rec.Raw)-1:len(rec.Raw)-1], tail...)
	if !typed {
		rec.Row = nil
	}
	return rec
}

func onDay(rec clients.Record, day int) clients.Record {
	return with(rec, "spent_date", clients.Date{Year: 2026, Month: 3, Day: day})
}

func tombstone(t *testing.T, pool *pgxpool.Pool, p TombstoneParams) (int64, error) {
	t.Helper()
	var n int64
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		var err error
		n, err = TombstoneMissing(context.Background(), tx, p)
		return err
	})
	return n, err
}

func deletedIDs(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var s string
	err := pool.QueryRow(context.Background(), `SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM time_entries WHERE deleted_at IS NOT NULL`).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// harvestJSON renders a realistic (~700 byte) Harvest time entry.
func harvestJSON(id int64, version time.Time, notes, hours string) []byte {
	return fmt.Appendf(nil, `{"id":%d,"spent_date":"2026-02-27","hours":%s,"hours_without_timer":%s,"rounded_hours":%s,"notes":%q,"is_locked":false,"locked_reason":null,"is_closed":false,"is_billed":false,"timer_started_at":null,"started_time":null,"ended_time":null,"is_running":false,"billable":true,"budgeted":true,"billable_rate":100.0,"cost_rate":50.0,"created_at":"2026-02-27T16:05:44Z","updated_at":%q,"user":{"id":1782959,"name":"Kim Allen"},"client":{"id":5735776,"name":"123 Industries","currency":"EUR"},"project":{"id":14307913,"name":"Marketing Website","code":"MW"},"task":{"id":8083365,"name":"Graphic Design"},"user_assignment":{"id":125068553,"is_project_manager":true,"is_active":true,"budget":null,"hourly_rate":100.0},"task_assignment":{"id":155502709,"billable":true,"is_active":true,"hourly_rate":100.0,"budget":null},"external_reference":null,"invoice":null}`,
		id, hours, hours, hours, notes, version.UTC().Format(time.RFC3339Nano))
}

func applyTx(t testing.TB, pool *pgxpool.Pool, recs []clients.Record) Counts {
	t.Helper()
	var c Counts
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		var err error
		c, err = Apply(context.Background(), tx, testSource, clients.TimeEntries, recs)
		return err
	})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return c
}

type rowState struct {
	UpdatedAt, FetchedAt, FirstSeenAt time.Time
	DeletedAt                         *time.Time
	Hash                              []byte
	Notes                             *string
	Hours                             string
	UserID                            string
	Xmin, Xmax                        uint32
}

func readRow(t testing.TB, pool *pgxpool.Pool, id string) (rowState, bool) {
	t.Helper()
	var r rowState
	err := pool.QueryRow(context.Background(), `SELECT updated_at, fetched_at, first_seen_at, deleted_at, content_hash, notes, hours::text, user_id, xmin::text::bigint, xmax::text::bigint
		FROM time_entries WHERE source = $1 AND id = $2`, testSource, id).
		Scan(&r.UpdatedAt, &r.FetchedAt, &r.FirstSeenAt, &r.DeletedAt, &r.Hash, &r.Notes, &r.Hours, &r.UserID, &r.Xmin, &r.Xmax)
	if err == pgx.ErrNoRows {
		return r, false
	}
	if err != nil {
		t.Fatalf("read row %s: %v", id, err)
	}
	return r, true
}

func hashOf(t testing.TB, rec clients.Record) []byte {
	t.Helper()
	h, err := ContentHash(rec.Raw)
	if err != nil {
		t.Fatal(err)
	}
	return h[:]
}

func countRows(t testing.TB, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM time_entries`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestApplyOnAPool holds Apply handed a pool rather than a transaction: it
// commits its own writes (and their events) before it returns, writes
// nothing for a re-delivery, and leaves nothing of a page it refuses.
func TestApplyOnAPool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.DB(t)
	page := []clients.Record{entry(1, t0, t0, "a"), entry(2, t0, t0, "a")}
	if c, err := Apply(ctx, pool, testSource, clients.TimeEntries, page, WithEvents(true)); err != nil || c.Inserted != 2 {
		t.Fatalf("first delivery: %+v, %v", c, err)
	}
	before, ok := readRow(t, pool, "1")
	if !ok {
		t.Fatal("row 1 not committed")
	}
	if c, err := Apply(ctx, pool, testSource, clients.TimeEntries, page, WithEvents(true)); err != nil || c.Unchanged != 2 {
		t.Fatalf("re-delivery: %+v, %v", c, err)
	}
	if after, _ := readRow(t, pool, "1"); after.Xmin != before.Xmin {
		t.Errorf("re-delivery rewrote row 1 (xmin %d -> %d)", before.Xmin, after.Xmin)
	}
	newer := []clients.Record{entry(1, t0.Add(time.Second), t0.Add(time.Second), "b"), {ID: "3", Version: t0}}
	if _, err := Apply(ctx, pool, testSource, clients.TimeEntries, newer, WithEvents(true)); err == nil {
		t.Fatal("a page with a record without raw was accepted")
	}
	if after, _ := readRow(t, pool, "1"); notes(entry(1, t0, t0, "a")) != *after.Notes {
		t.Errorf("a refused page changed row 1: notes %q", *after.Notes)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM events`).Scan(&n); err != nil || n != 2 {
		t.Errorf("events = %d (%v), want the 2 of the first delivery", n, err)
	}
}

// Issue 23, item 9: a typed column derived from outside the raw record (a
// Clockify entry's client from its project, its day from its user's zone)
// is content: the same raw under the same version with another derived
// value rewrites the row; the same derived value again writes nothing; a
// record with nothing derived keeps the hash of its raw alone.
func TestDerivedValuesAreContent(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	rec := with(entry(1, t0, t0.Add(time.Minute), "a"), "client_id", "c1")
	rec.Derived = []byte("client=c1")
	if c := applyTx(t, pool, []clients.Record{rec}); c.Inserted != 1 {
		t.Fatalf("first apply: %+v", c)
	}
	moved := with(rec, "client_id", "c2") // the project moved to another client
	moved.Derived = []byte("client=c2")
	moved.FetchedAt = t0.Add(2 * time.Minute)
	if c := applyTx(t, pool, []clients.Record{moved}); c.Updated != 1 {
		t.Fatalf("the same raw with another derived client: %+v, want it rewritten", c)
	}
	var client string
	if err := pool.QueryRow(context.Background(), `SELECT client_id FROM time_entries WHERE source = $1 AND id = '1'`, testSource).Scan(&client); err != nil || client != "c2" {
		t.Fatalf("client_id %q, %v; want c2", client, err)
	}
	again := moved
	again.FetchedAt = t0.Add(3 * time.Minute)
	if c := applyTx(t, pool, []clients.Record{again}); c.Unchanged != 1 {
		t.Fatalf("a re-delivery: %+v, want unchanged", c)
	}
	plain := entry(2, t0, t0.Add(time.Minute), "a")
	applyTx(t, pool, []clients.Record{plain})
	if r, _ := readRow(t, pool, "2"); !bytes.Equal(r.Hash, hashOf(t, plain)) {
		t.Fatalf("a record with nothing derived: hash %x, want its raw's %x", r.Hash, hashOf(t, plain))
	}
}
