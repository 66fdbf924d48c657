package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/upsert"
)

// The history-asof scenario (issue 31): as-of queries over a history of
// 1 M time entries with 5 versions each (5 M rows; -quick: 100,000), loaded in bulk with the
// table, indexes and constraint the program declares, warm cache. Entries
// spread over 400 days (about 76,000 a month) and 53 projects; version k of
// an entry is valid from its day plus 3k days, the last one open.

const (
	asofVersions = 5
	asofProjects = 53
	asofRuns     = 15
)

// asofQueries are the queries timed, by name.
var asofQueries = []struct{ name, sql string }{
	{"project_month", `SELECT count(*), sum(hours) FROM time_entries_as_of('bench', '2026-12-05') WHERE project_id = 'p7' AND spent_date >= '2026-11-01' AND spent_date < '2026-12-01'`},
	{"account_month", `SELECT count(*), sum(hours) FROM time_entries_as_of('bench', '2026-12-05') WHERE spent_date >= '2026-11-01' AND spent_date < '2026-12-01'`},
	{"account_month_rows", `SELECT id, hours, notes, project_id FROM time_entries_as_of('bench', '2026-12-05') WHERE spent_date >= '2026-11-01' AND spent_date < '2026-12-01'`},
	{"known_at_month", `SELECT count(*), sum(hours) FROM time_entries_known_at('bench', '2026-12-05') WHERE spent_date >= '2026-11-01' AND spent_date < '2026-12-01'`},
	{"record_versions", `SELECT * FROM time_entries_versions('bench', '500000')`},
}

func (b *bench) runHistoryAsOf(ctx context.Context) (line, error) {
	l, err := b.historyAsOf(ctx, false)
	if err != nil {
		return l, err
	}
	worst, err := b.historyAsOf(ctx, true)
	if err != nil {
		return l, err
	}
	x := worst.res.Extra
	l.extra += fmt.Sprintf("; rows shuffled (worst case): project's month %.2f ms, account's month %.1f ms (rows %.1f ms), known-at month %.1f ms, versions %.3f ms",
		x["project_month_ms"], x["account_month_ms"], x["account_month_rows_ms"], x["known_at_month_ms"], x["record_versions_ms"])
	return l, nil
}

func (b *bench) historyAsOf(ctx context.Context, shuffled bool) (line, error) {
	db, drop, err := b.freshDB(ctx)
	if err != nil {
		return line{}, err
	}
	defer drop()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		return line{}, err
	}
	defer conn.Close(ctx)
	start := time.Now()
	entries := 1_000_000
	if b.o.quick {
		entries = 100_000
	}
	if err := loadAsOf(ctx, conn, db, entries, shuffled); err != nil {
		return line{}, err
	}
	load := time.Since(start)
	x := map[string]float64{}
	var plans strings.Builder
	for _, q := range asofQueries {
		med, plan, err := timeQuery(ctx, conn, q.sql)
		if err != nil {
			return line{}, fmt.Errorf("%s: %w", q.name, err)
		}
		x[q.name+"_ms"] = float64(med) / float64(time.Millisecond)
		fmt.Fprintf(&plans, "-- %s (median of %d: %.3f ms)\n%s\n%s\n\n", q.name, asofRuns, x[q.name+"_ms"], q.sql, plan)
	}
	path := cmpOr(b.o.keep, os.TempDir()) + "/tidemark-history-asof-plans.txt"
	if shuffled {
		path = strings.Replace(path, ".txt", "-shuffled.txt", 1)
	}
	if err := os.WriteFile(path, []byte(plans.String()), 0o644); err != nil {
		return line{}, err
	}
	var rows, size float64
	if err := conn.QueryRow(ctx, `SELECT count(*), pg_total_relation_size('time_entries_history_store') FROM time_entries_history_store`).Scan(&rows, &size); err != nil {
		return line{}, err
	}
	res := result{Records: int64(rows), WallSec: load.Seconds(), Extra: x}
	return line{name: "history-asof", res: res, ratio: x["account_month_ms"], ratioText: "ms, the account's month as of an instant (median)",
		extra: fmt.Sprintf("project's month %.2f ms, account's month %.1f ms (all columns of its %s: %.1f ms), known-at month %.1f ms, one record's versions %.3f ms; %.0f rows, %.0f B a version; plans in %s",
			x["project_month_ms"], x["account_month_ms"], "rows", x["account_month_rows_ms"], x["known_at_month_ms"], x["record_versions_ms"], rows, size/rows, path)}, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// loadAsOf declares the history as the program does, loads it in bulk
// without its indexes, then builds them as declared. The rows go in the
// order a mirror appends them, by valid_from (a month's versions are
// written during that month and the next), or shuffled: the worst case,
// every row of a month on its own page.
func loadAsOf(ctx context.Context, conn *pgx.Conn, db string, entries int, shuffled bool) error {
	pool, err := pgxpool.New(ctx, db)
	if err != nil {
		return err
	}
	err = upsert.EnsureHistory(ctx, pool, "bench", []clients.Resource{clients.TimeEntries})
	pool.Close()
	if err != nil {
		return err
	}
	idx, err := indexDefs(ctx, conn)
	if err != nil {
		return err
	}
	for i := range idx { // the foreign key first: it depends on the key
		if _, err := conn.Exec(ctx, idx[len(idx)-1-i].drop); err != nil {
			return err
		}
	}
	order := "ORDER BY vf" // as a mirror appends versions: in the order they happen
	if shuffled {
		order = "ORDER BY random()"
	}
	// The load is every version of its records at once: the check that a
	// first version in the store has none beside it in its mirror row
	// (deferred, per first version) is the program's, not the load's.
	if _, err := conn.Exec(ctx, `ALTER TABLE time_entries_history_store DISABLE TRIGGER USER`); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf(asofLoadSQL, entries, asofVersions, asofProjects, order)); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	if _, err := conn.Exec(ctx, `ALTER TABLE time_entries_history_store ENABLE TRIGGER USER`); err != nil {
		return err
	}
	// The mirror holds each record's current version, as a mirror would:
	// the as-of functions read it too (a first version still in its row),
	// through its own date index.
	if _, err := conn.Exec(ctx, asofMirrorSQL); err != nil {
		return fmt.Errorf("load the mirror: %w", err)
	}
	for _, d := range idx {
		if _, err := conn.Exec(ctx, d.create); err != nil {
			return fmt.Errorf("%s: %w", d.create, err)
		}
	}
	_, err = conn.Exec(ctx, `VACUUM (ANALYZE) time_entries_history_store, time_entries`)
	return err
}

type indexDef struct{ drop, create string }

// indexDefs reads the declared indexes and constraints of the history
// table, to drop them before the load and build them after.
func indexDefs(ctx context.Context, conn *pgx.Conn) ([]indexDef, error) {
	rows, err := conn.Query(ctx, `
SELECT dr, cr FROM (
SELECT 1 AS o, 'ALTER TABLE time_entries_history_store DROP CONSTRAINT ' || conname AS dr,
       'ALTER TABLE time_entries_history_store ADD CONSTRAINT ' || conname || ' ' || pg_get_constraintdef(oid) AS cr
FROM pg_constraint WHERE conrelid = 'time_entries_history_store'::regclass AND contype IN ('p', 'x')
UNION ALL
SELECT 2, 'DROP INDEX ' || indexrelid::regclass::text, pg_get_indexdef(indexrelid)
FROM pg_index WHERE indrelid = 'time_entries_history_store'::regclass
  AND indexrelid NOT IN (SELECT conindid FROM pg_constraint WHERE conrelid = 'time_entries_history_store'::regclass)
UNION ALL
SELECT 3, 'ALTER TABLE time_entries_history_store DROP CONSTRAINT ' || conname,
       'ALTER TABLE time_entries_history_store ADD CONSTRAINT ' || conname || ' ' || pg_get_constraintdef(oid)
FROM pg_constraint WHERE conrelid = 'time_entries_history_store'::regclass AND contype = 'f') d ORDER BY o`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (indexDef, error) {
		var d indexDef
		return d, r.Scan(&d.drop, &d.create)
	})
}

const asofLoadSQL = `
INSERT INTO time_entries_history_store (source, id, seq, prev_seq, spent_date, hours, notes, user_id, project_id, task_id, client_id,
  billable, is_locked, is_closed, is_billed, is_running, updated_at, fetched_at, content_hash,
  change, valid_from, valid_to, recorded_from, recorded_to, run_id)
OVERRIDING SYSTEM VALUE
SELECT 'bench', e::text, (e - 1) * %[2]d + k, CASE WHEN k > 1 THEN (e - 1) * %[2]d + k - 1 END, d, (1 + k * 0.25)::numeric, 'Worked on the thing, rev ' || k, 'u' || (e %% 40),
  'p' || (e %% %[3]d), 't' || (e %% 12), 'c' || (e %% 17), true, false, false, false, false,
  vf, vf, sha256((e || '/' || k)::bytea),
  CASE WHEN k = 1 THEN 'created' ELSE 'updated' END,
  vf, CASE WHEN k = %[2]d THEN 'infinity' ELSE vf + interval '3 days' END,
  vf, CASE WHEN k = %[2]d THEN 'infinity' ELSE vf + interval '3 days' END, 'bench'
FROM generate_series(1, %[1]d) AS e,
  LATERAL (SELECT date '2025-11-01' + (e %% 400) AS d) AS day,
  generate_series(1, %[2]d) AS k,
  LATERAL (SELECT (d + (k - 1) * 3)::timestamptz + interval '18 hours' AS vf) AS v
%[4]s`

const asofMirrorSQL = `
INSERT INTO time_entries (source, id, spent_date, hours, notes, user_id, project_id, task_id, client_id,
  billable, is_locked, is_closed, is_billed, is_running, updated_at, fetched_at, content_hash, raw)
SELECT source, id, spent_date, hours, notes, user_id, project_id, task_id, client_id,
  billable, is_locked, is_closed, is_billed, is_running, updated_at, fetched_at, content_hash,
  jsonb_build_object('id', id, 'notes', notes, 'hours', hours)
FROM time_entries_history_store WHERE source = 'bench' AND valid_to = 'infinity' ORDER BY valid_from`

// timeQuery runs sql once to warm the cache, then asofRuns times, and
// returns the median and the plan of one more run.
func timeQuery(ctx context.Context, conn *pgx.Conn, sql string) (time.Duration, string, error) {
	run := func() error {
		rows, err := conn.Query(ctx, sql)
		if err != nil {
			return err
		}
		for rows.Next() {
		}
		return rows.Err()
	}
	if err := run(); err != nil {
		return 0, "", err
	}
	var ds []time.Duration
	for range asofRuns {
		start := time.Now()
		if err := run(); err != nil {
			return 0, "", err
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	rows, err := conn.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+sql)
	if err != nil {
		return 0, "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return ds[len(ds)/2], strings.Join(lines, "\n"), err
}
