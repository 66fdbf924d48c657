package cursor_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/cursor"
	"github.com/tidemarkhq/tidemark/lease"
	"github.com/tidemarkhq/tidemark/upsert"
)

var retention = cursor.Retention{Keep: 720 * time.Hour, KeepIdle: 24 * time.Hour}

// run is an incremental run that ended ago before now, written as the
// poller writes it; busy runs inserted a row.
type run struct {
	id, resource, status string
	ago                  time.Duration
	busy                 bool
	moved                bool // the cursor moved (nothing applied)
}

func record(t *testing.T, db cursor.DB, runs ...run) {
	t.Helper()
	hw := t0
	var recs []cursor.RunRecord
	for _, r := range runs {
		rec := cursor.RunRecord{RunID: r.id, Source: "acme", Resource: r.resource, Status: r.status,
			Started: time.Now().Add(-r.ago - time.Second), HighWaterBefore: &hw, HighWaterAfter: &hw}
		if r.status != cursor.StatusRunning {
			rec.Finished = time.Now().Add(-r.ago)
		}
		if r.busy {
			rec.Counts = cursor.Counts{Fetched: 1, Counts: upsert.Counts{Inserted: 1}}
		}
		if r.moved {
			after := hw.Add(time.Minute)
			rec.HighWaterAfter = &after
		}
		recs = append(recs, rec)
	}
	if err := cursor.RecordRuns(t.Context(), db, recs); err != nil {
		t.Fatal(err)
	}
}

// backdate moves an (operator) record's times ago into the past.
func backdate(t *testing.T, db cursor.DB, kind string, ago time.Duration) {
	t.Helper()
	if _, err := db.Exec(t.Context(), `UPDATE sync_runs SET started_at = now() - $2::interval, finished_at = now() - $2::interval WHERE kind = $1`, kind, ago); err != nil {
		t.Fatal(err)
	}
}

func allRunIDs(t *testing.T, s *cursor.Store) []string {
	t.Helper()
	runs, err := s.Runs(t.Context(), cursor.RunsParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	ids := runIDs(runs)
	slices.Sort(ids)
	return ids
}

func TestPruneRuns(t *testing.T) {
	ctx, db, s := setup(t)
	const day = 24 * time.Hour
	record(t, db,
		// time_entries: idle runs go after a day, the others after keep.
		run{id: "te-ancient-busy", resource: "time_entries", status: cursor.StatusOK, ago: 40 * day, busy: true},
		run{id: "te-ancient-failed", resource: "time_entries", status: cursor.StatusFailed, ago: 35 * day},
		run{id: "te-idle-2d", resource: "time_entries", status: cursor.StatusOK, ago: 2 * day},
		run{id: "te-busy-2d", resource: "time_entries", status: cursor.StatusOK, ago: 2 * day, busy: true},
		run{id: "te-moved-2d", resource: "time_entries", status: cursor.StatusOK, ago: 2 * day, moved: true},
		run{id: "te-failed-2d", resource: "time_entries", status: cursor.StatusFailed, ago: 2 * day},
		run{id: "te-cancelled-2d", resource: "time_entries", status: cursor.StatusCancelled, ago: 2 * day},
		run{id: "te-idle-1h", resource: "time_entries", status: cursor.StatusOK, ago: time.Hour},
		// projects (a paused source): only old idle runs; the newest stays.
		run{id: "pr-idle-9d", resource: "projects", status: cursor.StatusOK, ago: 9 * day},
		run{id: "pr-idle-8d", resource: "projects", status: cursor.StatusOK, ago: 8 * day},
		// users: failing for longer than keep; the newest run and the
		// newest successful one (the "last ok") stay.
		run{id: "us-ok-60d", resource: "users", status: cursor.StatusOK, ago: 60 * day},
		run{id: "us-ok-50d", resource: "users", status: cursor.StatusOK, ago: 50 * day, busy: true},
		run{id: "us-failed-45d", resource: "users", status: cursor.StatusFailed, ago: 45 * day},
		run{id: "us-failed-40d", resource: "users", status: cursor.StatusFailed, ago: 40 * day},
		// clients: a pass that has lasted for ages is never deleted.
		run{id: "cl-running", resource: "clients", status: cursor.StatusRunning, ago: 50 * day},
		run{id: "cl-idle-2d", resource: "clients", status: cursor.StatusOK, ago: 2 * day},
		run{id: "cl-idle-1d1h", resource: "clients", status: cursor.StatusOK, ago: day + time.Hour},
	)
	// A reconcile of time_entries: another kind, so its newest stays too.
	startRun(t, s, "te-reconcile", "acme", "time_entries", cursor.KindReconcile)
	finishRun(t, db, "te-reconcile", cursor.StatusOK)
	backdate(t, db, cursor.KindReconcile, 3*day)
	// Operator records are never idle: two old sets, the older goes.
	for _, to := range []time.Time{t0, t0.Add(time.Hour)} {
		if _, err := s.Set(ctx, cursor.SetParams{Source: "acme", Resource: "projects", To: to, Actor: "alice@host"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(ctx, `UPDATE sync_runs SET started_at = now() - interval '50 days' - make_interval(hours => id::int), finished_at = now() - interval '50 days' WHERE kind = 'cursor_set'`); err != nil {
		t.Fatal(err)
	}
	sets := allRunIDs(t, s)
	sets = slices.DeleteFunc(sets, func(id string) bool { return !strings.HasPrefix(id, "cursor_set") })
	var newestSet string
	if err := db.QueryRow(ctx, `SELECT run_id FROM sync_runs WHERE kind = 'cursor_set' ORDER BY started_at DESC LIMIT 1`).Scan(&newestSet); err != nil || len(sets) != 2 {
		t.Fatalf("cursor sets %v: %v", sets, err)
	}

	got, err := cursor.PruneRuns(ctx, db, retention, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Idle: te-idle-2d, pr-idle-9d, us-ok-60d, cl-idle-2d; expired:
	// te-ancient-busy, te-ancient-failed, us-failed-45d, the older set.
	want := cursor.Pruned{Idle: 4, Expired: 4}
	if got != want {
		t.Errorf("pruned %+v, want %+v", got, want)
	}
	kept := []string{"te-busy-2d", "te-moved-2d", "te-failed-2d", "te-cancelled-2d", "te-idle-1h", "te-reconcile",
		"pr-idle-8d", "us-ok-50d", "us-failed-40d", "cl-running", "cl-idle-1d1h", newestSet}
	slices.Sort(kept)
	if ids := allRunIDs(t, s); !slices.Equal(ids, kept) {
		t.Errorf("kept %v\nwant %v", ids, kept)
	}

	// Again: nothing more is old enough.
	if got, err := cursor.PruneRuns(ctx, db, retention, 0); err != nil || got != (cursor.Pruned{}) {
		t.Errorf("second prune %+v, %v", got, err)
	}

	// `tidemark cursors` still shows a last run, and the last ok, of each.
	list, err := s.List(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]string{}
	for _, st := range list {
		if st.LastRun == nil || (st.Resource == "users" && st.LastOK == nil) {
			t.Fatalf("%s: last run %v, last ok %v", st.Resource, st.LastRun, st.LastOK)
		}
		last[st.Resource] = st.LastRun.RunID
	}
	wantLast := map[string]string{"time_entries": "te-idle-1h", "projects": "pr-idle-8d", "users": "us-failed-40d", "clients": "cl-idle-1d1h"}
	for r, id := range wantLast {
		if last[r] != id {
			t.Errorf("%s: last run %q, want %q", r, last[r], id)
		}
	}
}

func TestPruneRunsBatches(t *testing.T) {
	ctx, db, s := setup(t)
	// 1,050 idle runs of two resources, two days old, and one busy run
	// past keep: eleven batches of 100 and then some.
	if _, err := db.Exec(ctx, `
INSERT INTO sync_runs (run_id, source, resource, kind, status, started_at, finished_at, inserted)
SELECT 'r' || i, 'acme', CASE WHEN i % 2 = 0 THEN 'time_entries' ELSE 'projects' END, 'incremental', 'ok',
       now() - interval '2 days' - make_interval(secs => 1050 - i), now() - interval '2 days' - make_interval(secs => 1050 - i), 0
FROM generate_series(1, 1050) i`); err != nil {
		t.Fatal(err)
	}
	got, err := cursor.PruneRuns(ctx, db, retention, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got != (cursor.Pruned{Idle: 1048}) {
		t.Fatalf("pruned %+v, want 1048 idle", got)
	}
	if ids := allRunIDs(t, s); !slices.Equal(ids, []string{"r1049", "r1050"}) {
		t.Fatalf("kept %v, want the newest of each resource", ids)
	}
}

func TestPruneRunsRefusesBadRetention(t *testing.T) {
	ctx, db, _ := setup(t)
	for _, r := range []cursor.Retention{{}, {Keep: time.Hour, KeepIdle: 2 * time.Hour}, {Keep: time.Hour}} {
		if _, err := cursor.PruneRuns(ctx, db, r, 0); err == nil || !strings.Contains(err.Error(), "keep_idle") {
			t.Errorf("%+v: error %v", r, err)
		}
	}
}

// TestPruneRunsUsesIndex: each delete ranges over its partial index
// (migration 00014) by finished_at: the idle predicate in cursor and in the
// migration agree.
func TestPruneRunsUsesIndex(t *testing.T) {
	ctx, db, _ := setup(t)
	conn, err := db.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(context.Background(), `RESET enable_seqscan`)
	for name, sql := range map[string]string{"idle": cursor.SQLPruneIdle, "busy": cursor.SQLPruneExpired} {
		rows, err := conn.Query(ctx, "EXPLAIN "+sql, time.Hour, 10)
		if err != nil {
			t.Fatal(err)
		}
		var plan strings.Builder
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(line + "\n")
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		want := "sync_runs_" + name + "_expiry"
		if !strings.Contains(plan.String(), want) || !strings.Contains(plan.String(), "Index Cond: (finished_at < ") {
			t.Errorf("%s delete does not range over sync_runs_%s_expiry:\n%s", name, name, plan.String())
		}
	}
}

// TestRunsPrunerTakesTheLease: while another replica holds the lease, a
// round prunes nothing; then it prunes and reports what it deleted.
func TestRunsPrunerTakesTheLease(t *testing.T) {
	ctx, db, s := setup(t)
	record(t, db,
		run{id: "old", resource: "time_entries", status: cursor.StatusOK, ago: 48 * time.Hour},
		run{id: "new", resource: "time_entries", status: cursor.StatusOK, ago: time.Minute})
	other := lease.New(db.Config().ConnString())
	defer other.Close()
	held, err := other.TryAcquire(ctx, cursor.RunsLease)
	if err != nil {
		t.Fatal(err)
	}
	var reported []cursor.Pruned
	p := &cursor.RunsPruner{Pool: db, Retention: retention, Log: zerolog.Nop(), Deleted: func(n cursor.Pruned) { reported = append(reported, n) }}
	defer p.Stop(context.Background())
	p.Once(ctx)
	if ids := allRunIDs(t, s); len(ids) != 2 || len(reported) != 0 {
		t.Fatalf("pruned while another replica holds the lease: %v, reported %v", ids, reported)
	}
	held.Release()
	p.Once(ctx)
	if ids := allRunIDs(t, s); !slices.Equal(ids, []string{"new"}) || len(reported) != 1 || reported[0].Idle != 1 {
		t.Fatalf("kept %v, reported %v", ids, reported)
	}
}

// TestAbandonRunsReadsOnlyRunningRows: a new owner's clean-up reads the
// running rows (migration 00015), not every run the sources kept.
func TestAbandonRunsReadsOnlyRunningRows(t *testing.T) {
	ctx, db, _ := setup(t)
	runs := []run{{id: "r", resource: "time_entries", status: cursor.StatusRunning, ago: time.Minute}}
	for i := range 3000 {
		runs = append(runs, run{id: fmt.Sprint(i), resource: "time_entries", status: cursor.StatusOK, ago: time.Duration(i) * time.Minute})
	}
	record(t, db, runs...)
	if _, err := db.Exec(ctx, `ANALYZE sync_runs`); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(ctx, "EXPLAIN "+cursor.SQLAbandonRuns, []string{"acme", "globex"}, time.Now(), "x")
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if plan := strings.Join(lines, "\n"); !strings.Contains(plan, "sync_runs_running") {
		t.Errorf("the abandon does not read sync_runs_running:\n%s", plan)
	}
}
