package upsert

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
)

const benchPage = 2000

// benchRecords builds one page of realistic time entries with ids from
// first, all at version v.
func benchRecords(first int64, v time.Time, rev string) []clients.Record {
	recs := make([]clients.Record, benchPage)
	for i := range recs {
		recs[i] = entry(first+int64(i), v, v.Add(time.Minute), rev)
	}
	return recs
}

func walLSN(b *testing.B, pool *pgxpool.Pool) string {
	var lsn string
	if err := pool.QueryRow(context.Background(), `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
		b.Fatal(err)
	}
	return lsn
}

func walSince(b *testing.B, pool *pgxpool.Pool, from string) float64 {
	var n float64
	if err := pool.QueryRow(context.Background(), `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)`, from).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// measure runs one page per iteration: prepare (untimed) builds the page,
// write applies it in its own transaction. It reports rows/s and WAL bytes
// per row.
func measure(b *testing.B, pool *pgxpool.Pool, prepare func(i int) []clients.Record, write func(tx pgx.Tx, recs []clients.Record) error) {
	ctx := context.Background()
	b.ReportAllocs()
	b.StopTimer()
	lsn := walLSN(b, pool)
	for i := 0; i < b.N; i++ {
		recs := prepare(i)
		b.StartTimer()
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return write(tx, recs) }); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
	}
	wal := walSince(b, pool, lsn)
	rows := float64(b.N * benchPage)
	b.ReportMetric(rows/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(wal/rows, "WAL-B/row")
	b.ReportMetric(0, "ns/op")
}

func applyWrite(want func(Counts) bool) func(pgx.Tx, []clients.Record) error {
	return func(tx pgx.Tx, recs []clients.Record) error {
		c, err := Apply(context.Background(), tx, testSource, clients.TimeEntries, recs)
		if err == nil && !want(c) {
			err = fmt.Errorf("unexpected counts %+v", c)
		}
		return err
	}
}

// BenchmarkApply compares, in one run, the versioned apply of pages of 2,000
// time entries against a plain COPY into a table with only its primary key
// and against a row-by-row INSERT … ON CONFLICT loop. Ratios:
// go test -bench . -run '^$' -count 3 ./upsert/ | awk -f upsert/benchratio.awk
func BenchmarkApply(b *testing.B) {
	pool := pgtest.DB(b)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, benchPlainDDL); err != nil {
		b.Fatal(err)
	}
	next := int64(1)
	fresh := func(int) []clients.Record {
		recs := benchRecords(next, t0, "a")
		next += benchPage
		return recs
	}
	all := func(n int) func(Counts) bool {
		return func(c Counts) bool { return c.Total() == benchPage && c.Inserted == int64(n) }
	}

	b.Run("copy_plain_new", func(b *testing.B) {
		measure(b, pool, fresh, plainCopy)
	})
	b.Run("row_by_row_new", func(b *testing.B) {
		measure(b, pool, fresh, rowByRow)
	})
	b.Run("apply_new", func(b *testing.B) {
		measure(b, pool, fresh, applyWrite(all(benchPage)))
	})

	same := benchRecords(next, t0, "a")
	next += benchPage
	applyTx(b, pool, same)
	b.Run("apply_unchanged", func(b *testing.B) {
		measure(b, pool, func(int) []clients.Record { return same },
			applyWrite(func(c Counts) bool { return c.Unchanged == benchPage }))
	})

	// The same content under a newer version (a source whose version is not
	// in the record): only the stored version moves forward.
	fwdFirst := next
	fwdPage := func(v time.Time) []clients.Record {
		recs := make([]clients.Record, benchPage)
		for i := range recs {
			recs[i] = unstamped(fwdFirst+int64(i), v, v.Add(time.Minute), "a")
		}
		return recs
	}
	applyTx(b, pool, fwdPage(t0))
	next += benchPage
	fwdRound := 0
	b.Run("apply_same_content_newer_version", func(b *testing.B) {
		measure(b, pool, func(int) []clients.Record {
			fwdRound++
			return fwdPage(t0.Add(time.Duration(fwdRound) * time.Second))
		}, applyWrite(func(c Counts) bool { return c.Unchanged == benchPage }))
	})

	mixedFirst := next
	applyTx(b, pool, benchRecords(mixedFirst, t0.Add(time.Hour), "a"))
	next += benchPage
	round := 0
	b.Run("apply_half_newer_half_stale", func(b *testing.B) {
		measure(b, pool, func(int) []clients.Record {
			round++
			newer := benchRecords(mixedFirst, t0.Add(time.Hour+time.Duration(round)*time.Second), strconv.Itoa(round))
			stale := benchRecords(mixedFirst, t0, "old")
			recs := make([]clients.Record, 0, benchPage)
			for i := range benchPage {
				if i%2 == 0 {
					recs = append(recs, newer[i])
				} else {
					recs = append(recs, stale[i])
				}
			}
			return recs
		}, applyWrite(func(c Counts) bool { return c.Updated == benchPage/2 && c.Stale == benchPage/2 }))
	})
}

// benchPlainDDL is time_entries with only its primary key: the baseline's
// table (same columns, same NOT NULLs, no indexes).
const benchPlainDDL = `CREATE TABLE bench_plain (LIKE time_entries INCLUDING DEFAULTS, PRIMARY KEY (source, id))`

// plainColumns are the columns plainRow fills, in its order: the key, the
// declared typed columns, then the version, fetch time, hash, raw and
// deletion stamp.
// (Built on first use: the declared tables are registered by init.)
var plainColumns = sync.OnceValue(func() []string {
	ns := []string{"source", "id"}
	for _, c := range tables[clients.TimeEntries].typed {
		ns = append(ns, c.name)
	}
	return append(ns, "updated_at", "fetched_at", "content_hash", "raw", "deleted_at")
})

// plainCopy is the baseline: a COPY into a table with only its primary key.
func plainCopy(tx pgx.Tx, recs []clients.Record) error {
	_, err := tx.CopyFrom(context.Background(), pgx.Identifier{"bench_plain"}, plainColumns(), pgx.CopyFromSlice(len(recs), func(i int) ([]any, error) {
		return plainRow(recs[i])
	}))
	return err
}

// rowByRow is the naive alternative: one INSERT … ON CONFLICT per record.
func rowByRow(tx pgx.Tx, recs []clients.Record) error {
	for i := range recs {
		args, err := plainRow(recs[i])
		if err != nil {
			return err
		}
		if _, err := tx.Exec(context.Background(), rowByRowSQL(), args...); err != nil {
			return err
		}
	}
	return nil
}

// plainRow is what a plain COPY would send: the same values Apply writes,
// computed the same way (typed columns, content hash).
func plainRow(rec clients.Record) ([]any, error) {
	h, err := ContentHash(rec.Raw)
	if err != nil {
		return nil, err
	}
	vals, _, re := tables[clients.TimeEntries].values(&rec, []any{testSource, rec.ID})
	if re != nil {
		return nil, re
	}
	return append(vals, rec.Version, rec.FetchedAt, h[:], rec.Raw, nil), nil
}

// benchOnConflict is the guarded write both alternatives end with.
var benchOnConflict = sync.OnceValue(func() string {
	var set []string
	for _, c := range plainColumns()[2:] {
		set = append(set, c+" = EXCLUDED."+c)
	}
	return "ON CONFLICT (source, id) DO UPDATE SET " + strings.Join(set, ", ") +
		"\nWHERE (t.updated_at, t.fetched_at) < (EXCLUDED.updated_at, EXCLUDED.fetched_at) AND t.content_hash <> EXCLUDED.content_hash"
})

// rowByRowSQL is the naive mechanism: one guarded upsert per record.
var rowByRowSQL = sync.OnceValue(func() string {
	ps := make([]string, len(plainColumns()))
	for i := range ps {
		ps[i] = fmt.Sprintf("$%d", i+1)
	}
	return "INSERT INTO time_entries AS t (" + strings.Join(plainColumns(), ", ") + ")\nVALUES (" + strings.Join(ps, ", ") + ")\n" + benchOnConflict()
})

// The alternatives measured to choose the mechanism (BENCHMARKS.md). They
// share Apply's validation and hashing, and differ in how rows reach the
// table. Both write the guarded upsert for every row, with no lookup first.

// altStagingUpsert: COPY into the staging table, then one INSERT … SELECT …
// ON CONFLICT DO UPDATE … WHERE guard per page.
func altStagingUpsert(tx pgx.Tx, recs []clients.Record) error {
	ctx := context.Background()
	t := tables[clients.TimeEntries]
	items, err := prepare(t, recs)
	if err != nil {
		return err
	}
	items, _ = dedupe(items)
	all := make([]*item, len(items))
	for i := range items {
		all[i] = &items[i]
	}
	if _, err := tx.Exec(ctx, t.createStage); err != nil {
		return err
	}
	if err := stage(ctx, tx, t, nil, all); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, t.upsertExisting, testSource)
	if err == nil {
		_, err = tx.Exec(ctx, t.clearStage)
	}
	return err
}

// altUnnest: one INSERT … SELECT FROM unnest($arrays) … ON CONFLICT DO
// UPDATE … WHERE guard per page.
func altUnnest(tx pgx.Tx, recs []clients.Record) error {
	t := tables[clients.TimeEntries]
	items, err := prepare(t, recs)
	if err != nil {
		return err
	}
	items, _ = dedupe(items)
	n := len(items)
	// The columns time entries had when the mechanism was chosen (the
	// later ones are nullable and left out).
	var pick []int
	for i, c := range t.typed {
		if slices.Contains(unnestColumns, c.name) {
			pick = append(pick, i)
		}
	}
	cols := make([][]any, len(pick))
	for c := range cols {
		cols[c] = make([]any, n)
	}
	ids := make([]string, n)
	versions, fetched := make([]time.Time, n), make([]time.Time, n)
	hashes, raws := make([][]byte, n), make([]string, n)
	for i, it := range items {
		ids[i], versions[i], fetched[i], hashes[i], raws[i] = it.rec.ID, it.version, it.fetched, it.hash[:], string(it.rec.Raw)
		for c, j := range pick {
			cols[c][i] = it.typed[j]
		}
	}
	args := []any{testSource, ids}
	for _, c := range cols {
		args = append(args, c)
	}
	args = append(args, versions, fetched, hashes, raws)
	_, err = tx.Exec(context.Background(), altUnnestSQL(), args...)
	return err
}

var unnestColumns = []string{"spent_date", "hours", "notes", "user_id", "project_id", "task_id", "client_id",
	"billable", "is_locked", "is_closed", "is_billed", "is_running", "invoice_id"}

// altUnnestSQL writes the unnestColumns.
var altUnnestSQL = sync.OnceValue(func() string {
	return `INSERT INTO time_entries AS t (source, id, spent_date, hours, notes, user_id, project_id, task_id,
    client_id, billable, is_locked, is_closed, is_billed, is_running, invoice_id, updated_at, fetched_at, content_hash, raw)
SELECT $1, u.id, u.spent_date, u.hours, u.notes, u.user_id, u.project_id, u.task_id, u.client_id, u.billable, u.is_locked,
    u.is_closed, u.is_billed, u.is_running, u.invoice_id, u.updated_at, u.fetched_at, u.content_hash, u.raw::jsonb
FROM unnest($2::text[], $3::date[], $4::numeric[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::bool[],
    $11::bool[], $12::bool[], $13::bool[], $14::bool[], $15::text[], $16::timestamptz[], $17::timestamptz[], $18::bytea[], $19::text[])
    AS u(id, spent_date, hours, notes, user_id, project_id, task_id, client_id, billable, is_locked, is_closed, is_billed,
         is_running, invoice_id, updated_at, fetched_at, content_hash, raw)
` + benchOnConflict()
})

// BenchmarkMechanisms compares Apply's mechanism with the alternatives above
// on new and on unchanged pages, measured next to each other, since the
// machine's load drifts during a run.
func BenchmarkMechanisms(b *testing.B) {
	pool := pgtest.DB(b)
	next := int64(1)
	fresh := func(int) []clients.Record {
		recs := benchRecords(next, t0, "a")
		next += benchPage
		return recs
	}
	for _, m := range []struct {
		name  string
		write func(pgx.Tx, []clients.Record) error
	}{
		{"chosen_lookup_copy", func(tx pgx.Tx, recs []clients.Record) error {
			_, err := Apply(context.Background(), tx, testSource, clients.TimeEntries, recs)
			return err
		}},
		{"staging_upsert_no_prefilter", altStagingUpsert},
		{"unnest_upsert_no_prefilter", altUnnest},
	} {
		b.Run(m.name+"_new", func(b *testing.B) { measure(b, pool, fresh, m.write) })
		same := fresh(0)
		if err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error { return m.write(tx, same) }); err != nil {
			b.Fatal(err)
		}
		b.Run(m.name+"_unchanged", func(b *testing.B) { measure(b, pool, func(int) []clients.Record { return same }, m.write) })
	}
}

// BenchmarkInterleaved runs every BenchmarkApply scenario once per
// iteration, one after the other, so that all of them see the same machine
// load: on a shared 2-core machine the load drifts within seconds, and
// scenarios measured a minute apart are not comparable. Its ratios are the
// ones BENCHMARKS.md reports against the targets, with the alternative
// mechanisms measured the same way.
func BenchmarkInterleaved(b *testing.B) {
	pool := pgtest.DB(b)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, benchPlainDDL); err != nil {
		b.Fatal(err)
	}
	type acc struct {
		d    time.Duration
		wal  float64
		rows int
	}
	accs := map[string]*acc{}
	order := []string{"copy_plain_new", "apply_new", "apply_unchanged", "apply_half_newer_half_stale", "row_by_row_new",
		"staging_upsert_no_prefilter_new", "staging_upsert_no_prefilter_unchanged",
		"unnest_upsert_no_prefilter_new", "unnest_upsert_no_prefilter_unchanged"}
	for _, n := range order {
		accs[n] = &acc{}
	}
	run := func(name string, recs []clients.Record, write func(pgx.Tx, []clients.Record) error) {
		lsn := walLSN(b, pool)
		start := time.Now()
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return write(tx, recs) }); err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		a := accs[name]
		a.d += time.Since(start)
		a.wal += walSince(b, pool, lsn)
		a.rows += len(recs)
	}
	apply := func(tx pgx.Tx, recs []clients.Record) error {
		_, err := Apply(ctx, tx, testSource, clients.TimeEntries, recs)
		return err
	}
	next := int64(1)
	page := func(v time.Time, rev string) []clients.Record {
		recs := benchRecords(next, v, rev)
		next += benchPage
		return recs
	}
	mixedBase := page(t0.Add(time.Hour), "a")
	applyTx(b, pool, mixedBase)
	mixedFirst, _ := strconv.ParseInt(mixedBase[0].ID, 10, 64)

	b.StopTimer()
	b.ResetTimer()
	for i := range b.N {
		forCopy, forApply, forRows := page(t0, "a"), page(t0, "a"), page(t0, "a")
		newer := benchRecords(mixedFirst, t0.Add(time.Hour+time.Duration(i+1)*time.Second), strconv.Itoa(i+1))
		stale := benchRecords(mixedFirst, t0, "old")
		mixed := make([]clients.Record, benchPage)
		for j := range mixed {
			mixed[j] = stale[j]
			if j%2 == 0 {
				mixed[j] = newer[j]
			}
		}
		run("copy_plain_new", forCopy, plainCopy)
		run("apply_new", forApply, apply)
		run("apply_unchanged", forApply, apply)
		run("apply_half_newer_half_stale", mixed, apply)
		run("row_by_row_new", forRows, rowByRow)
		forStaging, forUnnest := page(t0, "a"), page(t0, "a")
		run("staging_upsert_no_prefilter_new", forStaging, altStagingUpsert)
		run("staging_upsert_no_prefilter_unchanged", forStaging, altStagingUpsert)
		run("unnest_upsert_no_prefilter_new", forUnnest, altUnnest)
		run("unnest_upsert_no_prefilter_unchanged", forUnnest, altUnnest)
	}
	for _, n := range order {
		a := accs[n]
		b.ReportMetric(float64(a.rows)/a.d.Seconds(), n+":rows/s")
		b.ReportMetric(a.wal/float64(a.rows), n+":WAL-B/row")
	}
	b.ReportMetric(0, "ns/op")
}
