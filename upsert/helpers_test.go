package upsert

import (
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
