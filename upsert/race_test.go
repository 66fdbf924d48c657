package upsert

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
)

// TestInsertedMeanwhile: a row that another applier inserts between our
// lookup and our write is counted once, as what it was for us (an update or
// unchanged), never as a second insert, and its first_seen_at is the first
// applier's.
func TestInsertedMeanwhile(t *testing.T) {
	t.Parallel()
	f := t0.Add(time.Minute)
	cases := []struct {
		name string
		ours clients.Record
		want Counts
	}{
		{"ours newer", entry(1, t0.Add(time.Second), f, "b"), Counts{Updated: 1}},
		{"ours the same", entry(1, t0, f, "a"), Counts{Unchanged: 1}},
		{"ours older", entry(1, t0.Add(-time.Second), f, "z"), Counts{Stale: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := pgtest.DB(t)
			ctx := context.Background()
			first, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer first.Rollback(ctx)
			if c, err := Apply(ctx, first, testSource, clients.TimeEntries, []clients.Record{entry(1, t0, f, "a"), entry(2, t0, f, "a")}); err != nil || c.Inserted != 2 {
				t.Fatalf("first applier: %+v, %v", c, err)
			}
			type result struct {
				c   Counts
				err error
			}
			done := make(chan result)
			go func() {
				var c Counts
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					var err error
					c, err = Apply(ctx, tx, testSource, clients.TimeEntries, []clients.Record{tc.ours, entry(3, t0, f, "a")})
					return err
				})
				done <- result{c, err}
			}()
			time.Sleep(300 * time.Millisecond) // the second applier now waits on row 1
			var firstSeen time.Time
			if err := first.QueryRow(ctx, `SELECT first_seen_at FROM time_entries WHERE id = '1'`).Scan(&firstSeen); err != nil {
				t.Fatal(err)
			}
			if err := first.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			r := <-done
			want := tc.want
			want.Inserted++ // row 3
			if r.err != nil || r.c != want {
				t.Fatalf("second applier: %+v, %v; want %+v", r.c, r.err, want)
			}
			row, _ := readRow(t, pool, "1")
			if !row.FirstSeenAt.Equal(firstSeen) {
				t.Errorf("first_seen_at %v, want the first applier's %v", row.FirstSeenAt, firstSeen)
			}
			wantV := t0
			if tc.want.Updated == 1 {
				wantV = tc.ours.Version
			}
			if !row.UpdatedAt.Equal(wantV) {
				t.Errorf("row at version %v, want %v", row.UpdatedAt, wantV)
			}
			if n := countRows(t, pool); n != 3 {
				t.Errorf("%d rows, want 3", n)
			}
		})
	}
}

// TestStagingAfterRollback: a rolled-back transaction takes the session's
// staging table with it (it was created inside); the next Apply on the same
// connection creates it again, and statements cached against the old one
// still work.
func TestStagingAfterRollback(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	f := t0.Add(time.Minute)
	applyOn := func(commit bool, recs ...clients.Record) Counts {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		c, err := Apply(ctx, tx, testSource, clients.TimeEntries, recs)
		if err != nil {
			t.Fatal(err)
		}
		if commit {
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	applyOn(true, entry(1, t0, f, "a"))
	for i := range 3 {
		// Each rolled-back transaction creates and drops the staging table.
		v := t0.Add(time.Duration(i+1) * time.Second)
		if c := applyOn(false, entry(1, v, f, "b")); c != (Counts{Updated: 1}) {
			t.Fatalf("round %d: %+v", i, c)
		}
	}
	if c := applyOn(true, entry(1, t0.Add(time.Minute), f, "c")); c != (Counts{Updated: 1}) {
		t.Fatalf("after rollbacks: %+v", c)
	}
}
