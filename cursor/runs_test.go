package cursor_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/cursor"
)

func startRun(t *testing.T, s *cursor.Store, id, source, resource, kind string) {
	t.Helper()
	if err := s.StartRun(t.Context(), cursor.StartRunParams{RunID: id, Source: source, Resource: resource, Kind: kind}); err != nil {
		t.Fatalf("StartRun %s: %v", id, err)
	}
}

func finishRun(t *testing.T, db cursor.DB, id, status string) {
	t.Helper()
	if err := cursor.FinishRun(t.Context(), db, cursor.FinishRunParams{RunID: id, Status: status}); err != nil {
		t.Fatalf("FinishRun %s: %v", id, err)
	}
}

func runIDs(runs []cursor.Run) []string {
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.RunID
	}
	return ids
}

func TestRunRoundTrip(t *testing.T) {
	ctx, db, s := setup(t)
	since, hwBefore, hwAfter := t0.Add(-10*time.Minute), t0, t0.Add(time.Hour)
	from, to := clients.Date{Year: 2026, Month: 1, Day: 1}, clients.Date{Year: 2026, Month: 1, Day: 31}

	err := s.StartRun(ctx, cursor.StartRunParams{
		RunID: "r1", Source: "acme", Resource: "time_entries", Kind: cursor.KindIncremental,
		WindowSince: &since, HighWaterBefore: &hwBefore,
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.StartRun(ctx, cursor.StartRunParams{
		RunID: "r2", Source: "acme", Resource: "time_entries", Kind: cursor.KindBackfill,
		WindowFrom: from, WindowTo: to,
	})
	if err != nil {
		t.Fatal(err)
	}

	runs, err := s.Runs(ctx, cursor.RunsParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 {
		t.Fatalf("runs: %v", runIDs(runs))
	}
	r2, r1 := runs[0], runs[1]
	if r1.Status != cursor.StatusRunning || r1.FinishedAt != nil || r1.Kind != "incremental" ||
		r1.WindowSince == nil || !r1.WindowSince.Equal(since) || !r1.WindowFrom.IsZero() ||
		r1.HighWaterBefore == nil || !r1.HighWaterBefore.Equal(hwBefore) || r1.HighWaterAfter != nil ||
		r1.StartedAt.IsZero() || r1.StartedAt.Location() != time.UTC {
		t.Fatalf("running incremental run: %+v", r1)
	}
	if r2.WindowFrom != from || r2.WindowTo != to || r2.WindowSince != nil || r2.HighWaterBefore != nil {
		t.Fatalf("running backfill run: %+v", r2)
	}

	counts := cursor.Counts{Fetched: 100, Inserted: 40, Updated: 30, Unchanged: 20, Stale: 5, Ties: 3, Tombstoned: 2}
	tx := inTx(t, db)
	err = cursor.FinishRun(ctx, tx, cursor.FinishRunParams{RunID: "r1", Status: cursor.StatusOK, Pages: 7, Counts: counts, HighWaterAfter: &hwAfter})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	err = cursor.FinishRun(ctx, db, cursor.FinishRunParams{RunID: "r2", Status: cursor.StatusFailed, Error: "page 3 of acme/time_entries: bad JSON", Pages: 2, Counts: cursor.Counts{Fetched: 200}})
	if err != nil {
		t.Fatal(err)
	}

	runs, err = s.Runs(ctx, cursor.RunsParams{})
	if err != nil {
		t.Fatal(err)
	}
	r2, r1 = runs[0], runs[1]
	if r1.Status != cursor.StatusOK || r1.FinishedAt == nil || r1.FinishedAt.Before(r1.StartedAt) ||
		r1.Pages != 7 || r1.Counts != counts || r1.Error != "" ||
		r1.HighWaterAfter == nil || !r1.HighWaterAfter.Equal(hwAfter) {
		t.Fatalf("finished ok run: %+v", r1)
	}
	if r2.Status != cursor.StatusFailed || r2.Error != "page 3 of acme/time_entries: bad JSON" ||
		r2.Pages != 2 || r2.Counts != (cursor.Counts{Fetched: 200}) || r2.HighWaterAfter != nil {
		t.Fatalf("finished failed run: %+v", r2)
	}
}

func TestRunErrors(t *testing.T) {
	ctx, db, s := setup(t)
	startRun(t, s, "r1", "acme", "time_entries", cursor.KindIncremental)

	err := s.StartRun(ctx, cursor.StartRunParams{RunID: "r1", Source: "acme", Resource: "projects", Kind: cursor.KindIncremental})
	if !errors.Is(err, cursor.ErrRunExists) {
		t.Fatalf("StartRun with a used id: %v, want ErrRunExists", err)
	}
	if err := s.StartRun(ctx, cursor.StartRunParams{RunID: "r2", Source: "acme", Resource: "projects", Kind: "cursor_set"}); err == nil {
		t.Fatal("StartRun accepted kind cursor_set")
	}
	if err := cursor.FinishRun(ctx, db, cursor.FinishRunParams{RunID: "nope", Status: cursor.StatusOK}); !errors.Is(err, cursor.ErrNotFound) {
		t.Fatalf("FinishRun of an unknown run: %v, want ErrNotFound", err)
	}
	if err := cursor.FinishRun(ctx, db, cursor.FinishRunParams{RunID: "r1", Status: cursor.StatusRunning}); err == nil {
		t.Fatal("FinishRun accepted status running")
	}

	// FinishRun in a rolled-back transaction leaves the run running.
	tx := inTx(t, db)
	finishRun(t, tx, "r1", cursor.StatusOK)
	_ = tx.Rollback(ctx)
	runs, err := s.Runs(ctx, cursor.RunsParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Status != cursor.StatusRunning {
		t.Fatalf("after rolled-back FinishRun: %+v", runs)
	}
}

func TestRunsOrderFiltersLimit(t *testing.T) {
	ctx, _, s := setup(t)
	// Started one after the other: r1 oldest, r6 newest.
	startRun(t, s, "r1", "acme", "time_entries", cursor.KindIncremental)
	startRun(t, s, "r2", "acme", "projects", cursor.KindIncremental)
	startRun(t, s, "r3", "beta", "time_entries", cursor.KindBackfill)
	startRun(t, s, "r4", "acme", "time_entries", cursor.KindReconcile)
	if _, err := s.Set(ctx, cursor.SetParams{Source: "acme", Resource: "time_entries", To: t0, Actor: "a@h"}); err != nil {
		t.Fatal(err)
	}
	startRun(t, s, "r6", "beta", "projects", cursor.KindIncremental)

	for _, tc := range []struct {
		p    cursor.RunsParams
		want string
	}{
		{cursor.RunsParams{}, "[r6 cursor_set r4 r3 r2 r1]"},
		{cursor.RunsParams{Limit: 2}, "[r6 cursor_set]"},
		{cursor.RunsParams{Source: "acme"}, "[cursor_set r4 r2 r1]"},
		{cursor.RunsParams{Resource: "time_entries"}, "[cursor_set r4 r3 r1]"},
		{cursor.RunsParams{Source: "acme", Resource: "time_entries", Limit: 2}, "[cursor_set r4]"},
		{cursor.RunsParams{Source: "gamma"}, "[]"},
	} {
		runs, err := s.Runs(ctx, tc.p)
		if err != nil {
			t.Fatal(err)
		}
		ids := runIDs(runs)
		for i, r := range runs {
			if r.Kind == cursor.KindCursorSet {
				ids[i] = "cursor_set"
				if r.Actor != "a@h" || r.Status != cursor.StatusOK {
					t.Fatalf("operator run in Runs: %+v", r)
				}
			}
		}
		if got := fmt.Sprint(ids); got != tc.want {
			t.Errorf("Runs(%+v) = %s, want %s", tc.p, got, tc.want)
		}
	}
}

func TestRunsDefaultLimit(t *testing.T) {
	ctx, _, s := setup(t)
	for i := range cursor.DefaultRunsLimit + 3 {
		startRun(t, s, fmt.Sprintf("r%03d", i), "acme", "time_entries", cursor.KindIncremental)
	}
	runs, err := s.Runs(ctx, cursor.RunsParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != cursor.DefaultRunsLimit || runs[0].RunID != fmt.Sprintf("r%03d", cursor.DefaultRunsLimit+2) {
		t.Fatalf("default limit: %d runs, first %s", len(runs), runs[0].RunID)
	}
}

func TestAbandonRuns(t *testing.T) {
	ctx, db, s := setup(t)
	startRun(t, s, "old1", "acme", "time_entries", cursor.KindIncremental)
	startRun(t, s, "old2", "acme", "projects", cursor.KindBackfill)
	startRun(t, s, "done", "acme", "users", cursor.KindIncremental)
	finishRun(t, db, "done", cursor.StatusOK)
	startRun(t, s, "other", "beta", "time_entries", cursor.KindIncremental)
	var before time.Time
	if err := db.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	startRun(t, s, "new", "acme", "time_entries", cursor.KindIncremental)

	n, err := s.AbandonRuns(ctx, "acme", before)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("AbandonRuns = %d, want 2", n)
	}
	runs, err := s.Runs(ctx, cursor.RunsParams{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]cursor.Run{}
	for _, r := range runs {
		got[r.RunID] = r
	}
	for _, id := range []string{"old1", "old2"} {
		r := got[id]
		if r.Status != cursor.StatusFailed || r.Error != "abandoned (process ended)" || r.FinishedAt == nil {
			t.Errorf("%s after AbandonRuns: %+v", id, r)
		}
	}
	for id, status := range map[string]string{"done": cursor.StatusOK, "other": cursor.StatusRunning, "new": cursor.StatusRunning} {
		if r := got[id]; r.Status != status || r.Error != "" {
			t.Errorf("%s after AbandonRuns: %+v, want untouched %s", id, r, status)
		}
	}
	// Idempotent.
	if n, err := s.AbandonRuns(ctx, "acme", before); err != nil || n != 0 {
		t.Fatalf("second AbandonRuns = %d, %v", n, err)
	}
}
