package cursor_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/cursor"
)

var (
	jan1  = clients.Date{Year: 2026, Month: 1, Day: 1}
	jan31 = clients.Date{Year: 2026, Month: 1, Day: 31}
)

func startBackfill(t *testing.T, s *cursor.Store, p cursor.BackfillParams) cursor.Backfill {
	t.Helper()
	b, err := s.StartBackfill(t.Context(), p)
	if err != nil {
		t.Fatalf("StartBackfill(%+v): %v", p, err)
	}
	return b
}

func progress(t *testing.T, db cursor.DB, id int64, next clients.Date, n int64) {
	t.Helper()
	if err := cursor.BackfillProgress(t.Context(), db, id, next, n); err != nil {
		t.Fatalf("BackfillProgress(%d, %s): %v", id, next, err)
	}
}

func backfillByID(t *testing.T, s *cursor.Store, id int64) cursor.Backfill {
	t.Helper()
	list, err := s.Backfills(t.Context(), "")
	return findOne(t, list, err, fmt.Sprintf("backfill %d", id), func(b cursor.Backfill) bool { return b.ID == id })
}

// findOne returns the element of a listing that match accepts, and fails
// the test when the listing failed or holds none.
func findOne[T any](t *testing.T, list []T, err error, what string, match func(T) bool) T {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range list {
		if match(v) {
			return v
		}
	}
	t.Fatalf("%s not found", what)
	var zero T
	return zero
}

func TestStartBackfillWindowsTotal(t *testing.T) {
	ctx, _, s := setup(t)
	for _, tc := range []struct {
		from, to clients.Date
		window   int
		total    int
	}{
		{jan1, jan31, 7, 5}, // 31 days
		{jan1, jan31, 31, 1},
		{jan1, jan31, 30, 2},
		{jan1, jan1, 1, 1},
		{jan1, jan31, 1, 31},
		{jan1, jan31, 365, 1},
		{clients.Date{Year: 2024, Month: 2, Day: 28}, clients.Date{Year: 2024, Month: 3, Day: 1}, 1, 3}, // leap day
	} {
		// One source per case: the same range would resume the first.
		src := fmt.Sprintf("s%d-%s-%s", tc.window, tc.from, tc.to)
		b, err := s.StartBackfill(ctx, cursor.BackfillParams{Source: src, Resource: "time_entries", From: tc.from, To: tc.to, WindowDays: tc.window})
		if err != nil {
			t.Fatal(err)
		}
		if b.WindowsTotal != tc.total {
			t.Errorf("%s..%s by %d days: %d windows, want %d", tc.from, tc.to, tc.window, b.WindowsTotal, tc.total)
		}
	}

	for _, p := range []cursor.BackfillParams{
		{Source: "acme", Resource: "time_entries", From: jan31, To: jan1, WindowDays: 7},
		{Source: "acme", Resource: "time_entries", From: jan1, To: jan31, WindowDays: 0},
		{Source: "acme", Resource: "time_entries", To: jan31, WindowDays: 7},
	} {
		if _, err := s.StartBackfill(ctx, p); err == nil {
			t.Errorf("StartBackfill(%+v) accepted", p)
		}
	}
}

func TestBackfillResume(t *testing.T) {
	ctx, db, s := setup(t)
	p := cursor.BackfillParams{Source: "acme", Resource: "time_entries", From: jan1, To: jan31, WindowDays: 7}

	b := startBackfill(t, s, p)
	if b.ID == 0 || b.Next != jan1 || b.From != jan1 || b.To != jan31 || b.WindowDays != 7 ||
		b.Status != cursor.StatusRunning || b.WindowsDone != 0 || b.Records != 0 || b.FinishedAt != nil || b.Done() {
		t.Fatalf("new backfill: %+v", b)
	}

	// Two windows applied, then the process is killed (no FinishBackfill).
	progress(t, db, b.ID, jan1.AddDays(7), 10)
	tx := inTx(t, db)
	progress(t, tx, b.ID, jan1.AddDays(14), 5)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// A third window's transaction is rolled back by the kill.
	tx = inTx(t, db)
	progress(t, tx, b.ID, jan1.AddDays(21), 99)
	_ = tx.Rollback(ctx)

	// Asked again, even with another window size: the same row, at Next.
	r := startBackfill(t, s, cursor.BackfillParams{Source: "acme", Resource: "time_entries", From: jan1, To: jan31, WindowDays: 3})
	if r.ID != b.ID || r.Next != jan1.AddDays(14) || r.WindowsDone != 2 || r.Records != 15 ||
		r.WindowDays != 7 || r.WindowsTotal != 5 || r.Status != cursor.StatusRunning {
		t.Fatalf("resumed backfill: %+v, want id %d at %s", r, b.ID, jan1.AddDays(14))
	}

	// A failed backfill resumes too, with its error cleared.
	if err := s.FinishBackfill(ctx, b.ID, cursor.StatusFailed, "page 2: bad JSON"); err != nil {
		t.Fatal(err)
	}
	if f := backfillByID(t, s, b.ID); f.Status != cursor.StatusFailed || f.Error != "page 2: bad JSON" || f.FinishedAt == nil {
		t.Fatalf("failed backfill: %+v", f)
	}
	r = startBackfill(t, s, p)
	if r.ID != b.ID || r.Status != cursor.StatusRunning || r.Error != "" || r.FinishedAt != nil || r.Next != jan1.AddDays(14) {
		t.Fatalf("resumed failed backfill: %+v", r)
	}

	// A different range is a different backfill.
	if o := startBackfill(t, s, cursor.BackfillParams{Source: "acme", Resource: "time_entries", From: jan1, To: jan31.AddDays(1), WindowDays: 7}); o.ID == b.ID {
		t.Fatal("another range resumed the same backfill")
	}
	if o := startBackfill(t, s, cursor.BackfillParams{Source: "acme", Resource: "projects", From: jan1, To: jan31, WindowDays: 7}); o.ID == b.ID {
		t.Fatal("another resource resumed the same backfill")
	}

	// Done: the same range then starts afresh.
	progress(t, db, b.ID, jan31.AddDays(1), 1)
	if d := backfillByID(t, s, b.ID); !d.Done() {
		t.Fatalf("backfill past its last day not Done: %+v", d)
	}
	if err := s.FinishBackfill(ctx, b.ID, cursor.BackfillDone, ""); err != nil {
		t.Fatal(err)
	}
	n := startBackfill(t, s, p)
	if n.ID == b.ID || n.Next != jan1 || n.WindowsDone != 0 || n.Records != 0 {
		t.Fatalf("after done, same range: %+v, want a new backfill from %s", n, jan1)
	}
	if d := backfillByID(t, s, b.ID); d.Status != cursor.BackfillDone || d.FinishedAt == nil || d.Records != 16 {
		t.Fatalf("done backfill: %+v", d)
	}
}

func TestStartBackfillConcurrent(t *testing.T) {
	ctx, db, s := setup(t)
	p := cursor.BackfillParams{Source: "acme", Resource: "time_entries", From: jan1, To: jan31, WindowDays: 7}
	const n = 16
	ids := make([]int64, n)
	errs := make([]error, n)
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for i := range n {
		wg.Go(func() {
			<-start
			b, err := s.StartBackfill(ctx, p)
			ids[i], errs[i] = b.ID, err
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("concurrent StartBackfill returned ids %v", ids)
		}
	}
	if c := count(t, db, `SELECT count(*) FROM backfills`); c != 1 {
		t.Fatalf("%d backfill rows, want 1", c)
	}
}

func TestBackfillProgressNeverBackward(t *testing.T) {
	ctx, db, s := setup(t)
	b := startBackfill(t, s, cursor.BackfillParams{Source: "acme", Resource: "time_entries", From: jan1, To: jan31, WindowDays: 7})
	progress(t, db, b.ID, jan1.AddDays(14), 10)
	progress(t, db, b.ID, jan1.AddDays(7), 3)  // backward
	progress(t, db, b.ID, jan1.AddDays(14), 2) // same
	got := backfillByID(t, s, b.ID)
	if got.Next != jan1.AddDays(14) || got.WindowsDone != 1 || got.Records != 15 {
		t.Fatalf("after backward progress: %+v, want next %s, 1 window, 15 records", got, jan1.AddDays(14))
	}
	if !got.UpdatedAt.After(b.UpdatedAt) && !got.UpdatedAt.Equal(b.UpdatedAt) {
		t.Fatalf("updated_at went back: %v < %v", got.UpdatedAt, b.UpdatedAt)
	}

	if err := cursor.BackfillProgress(ctx, db, b.ID+1000, jan31, 1); !errors.Is(err, cursor.ErrNotFound) {
		t.Fatalf("progress of a missing backfill: %v", err)
	}
	if err := s.FinishBackfill(ctx, b.ID+1000, cursor.BackfillDone, ""); !errors.Is(err, cursor.ErrNotFound) {
		t.Fatalf("finish of a missing backfill: %v", err)
	}
	if err := s.FinishBackfill(ctx, b.ID, cursor.StatusRunning, ""); err == nil {
		t.Fatal("FinishBackfill accepted status running")
	}
}

func TestBackfills(t *testing.T) {
	ctx, _, s := setup(t)
	a1 := startBackfill(t, s, cursor.BackfillParams{Source: "acme", Resource: "time_entries", From: jan1, To: jan31, WindowDays: 7})
	b1 := startBackfill(t, s, cursor.BackfillParams{Source: "beta", Resource: "time_entries", From: jan1, To: jan31, WindowDays: 7})
	a2 := startBackfill(t, s, cursor.BackfillParams{Source: "acme", Resource: "projects", From: jan1, To: jan31, WindowDays: 7})

	all, err := s.Backfills(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all[0].ID != a2.ID || all[1].ID != b1.ID || all[2].ID != a1.ID {
		t.Fatalf("Backfills(\"\"): %+v, want newest first", all)
	}
	acme, err := s.Backfills(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if len(acme) != 2 || acme[0].ID != a2.ID || acme[1].ID != a1.ID {
		t.Fatalf("Backfills(acme): %+v", acme)
	}
	if acme[1] != a1 {
		t.Fatalf("listed backfill %+v differs from started %+v", acme[1], a1)
	}
}
