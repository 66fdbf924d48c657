package cursor_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidemarkhq/tidemark/cursor"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
)

// BenchmarkRunWrite: what migration 00014's indexes cost the hot path, one
// source's idle pass of 5 resources written by RecordRuns, against the same
// write into a database without them, interleaved so both see the same
// load. Reports µs per write of each and the ratio.
func BenchmarkRunWrite(b *testing.B) {
	ctx := context.Background()
	with, without := pgtest.DB(b), pgtest.DB(b)
	if _, err := without.Exec(ctx, `DROP INDEX sync_runs_idle_expiry; DROP INDEX sync_runs_busy_expiry`); err != nil {
		b.Fatal(err)
	}
	hw := t0
	batch := func(i int) []cursor.RunRecord {
		recs := make([]cursor.RunRecord, 5)
		for j := range recs {
			now := time.Now()
			recs[j] = cursor.RunRecord{RunID: fmt.Sprintf("r%d-%d", i, j), Source: fmt.Sprintf("s%d", i%1000),
				Resource: fmt.Sprintf("res%d", j), Status: cursor.StatusOK, Started: now.Add(-time.Second), Finished: now,
				HighWaterBefore: &hw, HighWaterAfter: &hw}
		}
		return recs
	}
	var took [2]time.Duration
	for i := 0; b.Loop(); i++ {
		for k, db := range []*pgxpool.Pool{with, without} {
			start := time.Now()
			if err := cursor.RecordRuns(ctx, db, batch(i)); err != nil {
				b.Fatal(err)
			}
			took[k] += time.Since(start)
		}
	}
	with_, without_ := took[0].Seconds()*1e6/float64(b.N), took[1].Seconds()*1e6/float64(b.N)
	b.ReportMetric(with_, "µs/write_indexed")
	b.ReportMetric(without_, "µs/write_unindexed")
	b.ReportMetric(with_/without_, "ratio")
}

// timedDB records how long each statement took.
type timedDB struct {
	cursor.DB
	took []time.Duration
}

func (d *timedDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	start := time.Now()
	tag, err := d.DB.Exec(ctx, sql, args...)
	d.took = append(d.took, time.Since(start))
	return tag, err
}

// BenchmarkPruneRuns: 1,000 (source, resource) with 100 idle runs two days
// old each, plus a newer one: PruneRuns in batches of 5,000 against one
// DELETE of them all (the baseline), on fresh copies of the same rows.
// Reports rows/s and the longest statement, which is the longest
// transaction and so the longest any lock is held.
func BenchmarkPruneRuns(b *testing.B) {
	ctx := context.Background()
	db := pgtest.DB(b)
	const seed = `
TRUNCATE sync_runs;
INSERT INTO sync_runs (run_id, source, resource, kind, status, started_at, finished_at)
SELECT 'r' || k || '-' || i, 's' || k, 'time_entries', 'incremental', 'ok',
       now() - make_interval(days => CASE WHEN i = 0 THEN 0 ELSE 2 END, secs => i),
       now() - make_interval(days => CASE WHEN i = 0 THEN 0 ELSE 2 END, secs => i)
FROM generate_series(1, 1000) k, generate_series(0, 100) i;
ANALYZE sync_runs`
	oneDelete := `DELETE FROM sync_runs r WHERE ` + cursor.IdleRun + ` AND r.finished_at < now() - $1::interval
  AND EXISTS (SELECT 1 FROM sync_runs n WHERE n.source = r.source AND n.resource = r.resource AND n.kind = r.kind
              AND n.started_at >= r.started_at AND (n.started_at > r.started_at OR n.id > r.id))`
	var rows [2]float64
	var took [2]time.Duration
	var longest [2][]time.Duration
	for b.Loop() {
		for k := range 2 {
			b.StopTimer()
			if _, err := db.Exec(ctx, seed); err != nil {
				b.Fatal(err)
			}
			t := &timedDB{DB: db}
			b.StartTimer()
			start := time.Now()
			if k == 0 {
				n, err := cursor.PruneRuns(ctx, t, retention, 0)
				if err != nil {
					b.Fatal(err)
				}
				rows[k] += float64(n.Idle)
			} else {
				tag, err := t.Exec(ctx, oneDelete, retention.KeepIdle)
				if err != nil {
					b.Fatal(err)
				}
				rows[k] += float64(tag.RowsAffected())
			}
			took[k] += time.Since(start)
			longest[k] = append(longest[k], slices.Max(t.took))
		}
	}
	for k, name := range []string{"batched", "one_delete"} {
		b.ReportMetric(rows[k]/took[k].Seconds(), "rows/s_"+name)
		slices.Sort(longest[k])
		b.ReportMetric(float64(longest[k][len(longest[k])/2].Milliseconds()), "ms_longest_tx_"+name)
	}
}
