package upsert

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
)

func TestDeletionRecord(t *testing.T) {
	t.Parallel()
	for _, typed := range []bool{true, false} {
		t.Run(map[bool]string{true: "with fields", false: "without fields"}[typed], func(t *testing.T) {
			t.Parallel()
			pool := pgtest.DB(t)
			v1, v2, v3 := t0, t0.Add(time.Second), t0.Add(2*time.Second)
			live := entry(1, v1, v1, "a")
			applyTx(t, pool, []clients.Record{live})
			before, _ := readRow(t, pool, "1")

			del := deletion(entry(1, v2, v2, "a"), typed)
			if c := applyTx(t, pool, []clients.Record{del}); c != (Counts{Updated: 1, Tombstoned: 1}) {
				t.Fatalf("deletion counts = %+v", c)
			}
			r, _ := readRow(t, pool, "1")
			if r.DeletedAt == nil || !r.DeletedAt.Equal(v2) || !r.UpdatedAt.Equal(v2) {
				t.Fatalf("after deletion: deleted_at %v updated_at %v, want both %v", r.DeletedAt, r.UpdatedAt, v2)
			}
			if r.Hours != "1.25" || r.UserID != "1782959" || *r.Notes != notes(live) || !r.FirstSeenAt.Equal(before.FirstSeenAt) {
				t.Errorf("typed columns or first_seen_at not kept: %+v", r)
			}
			// Re-delivered deletion: unchanged. The older live version: stale.
			if c := applyTx(t, pool, []clients.Record{del, live}); c != (Counts{Unchanged: 1, Stale: 1}) {
				t.Fatalf("re-delivery counts = %+v", c)
			}
			// A later live version brings the row back.
			back := entry(1, v3, v3, "b")
			if c := applyTx(t, pool, []clients.Record{back}); c != (Counts{Updated: 1}) {
				t.Fatalf("resurrection counts = %+v", c)
			}
			if r, _ := readRow(t, pool, "1"); r.DeletedAt != nil || *r.Notes != notes(back) {
				t.Errorf("after a newer live version: deleted_at %v notes %q", r.DeletedAt, *r.Notes)
			}
		})
	}
}

// TestDeletionOfUnknownID: a deletion seen before any live version is
// stored, so that an older live version delivered later cannot resurrect it.
func TestDeletionOfUnknownID(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	del := deletion(entry(9, t0.Add(time.Second), t0.Add(time.Second), "a"), false)
	if c := applyTx(t, pool, []clients.Record{del}); c != (Counts{Inserted: 1, Tombstoned: 1}) {
		t.Fatalf("counts = %+v", c)
	}
	if c := applyTx(t, pool, []clients.Record{entry(9, t0, t0, "a")}); c != (Counts{Stale: 1}) {
		t.Fatalf("older live version: counts = %+v", c)
	}
	r, ok := readRow(t, pool, "9")
	if !ok || r.DeletedAt == nil || r.Hours != "0" || r.Notes != nil {
		t.Fatalf("row = %+v, want a tombstone with neutral typed columns", r)
	}
}

// tombstoneCase is one TombstoneMissing call on freshly seeded rows.
type tombstoneCase struct {
	name    string
	params  TombstoneParams
	n       int64
	deleted string   // ids marked, in order
	refused []string // when set: ErrTooManyTombstones, whose message holds each
}

func runTombstoneCases(t *testing.T, seed []clients.Record, cases []tombstoneCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := pgtest.DB(t)
			applyTx(t, pool, seed)
			missing, err := MissingIDs(context.Background(), pool, tc.params)
			if err != nil {
				t.Fatal(err)
			}
			n, err := tombstone(t, pool, tc.params)
			if tc.refused == nil && strings.Join(missing, ",") != tc.deleted {
				t.Errorf("MissingIDs = %v, want what TombstoneMissing marks: %s", missing, tc.deleted)
			}
			if tc.refused != nil {
				if !errors.Is(err, ErrTooManyTombstones) || n != 0 {
					t.Fatalf("TombstoneMissing = %d, %v; want ErrTooManyTombstones", n, err)
				}
				for _, want := range tc.refused {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
			} else if err != nil || n != tc.n {
				t.Fatalf("TombstoneMissing = %d, %v; want %d", n, err, tc.n)
			}
			if got := deletedIDs(t, pool); got != tc.deleted {
				t.Fatalf("deleted ids = %q, want %q", got, tc.deleted)
			}
		})
	}
}

func TestTombstoneMissing(t *testing.T) {
	t.Parallel()
	asOf := t0.Add(time.Hour)
	f := t0.Add(time.Minute)
	seed := []clients.Record{
		onDay(entry(1, t0, f, "a"), 1),                    // before the range
		onDay(entry(2, t0, f, "a"), 2),                    // in range, seen
		onDay(entry(3, t0, f, "a"), 2),                    // in range, missing
		onDay(entry(4, t0, f, "a"), 3),                    // in range, missing
		onDay(entry(5, asOf.Add(time.Second), f, "a"), 3), // missing, but newer than AsOf
		onDay(entry(6, t0, f, "a"), 4),                    // after the range
	}
	from, to := clients.Date{Year: 2026, Month: 3, Day: 2}, clients.Date{Year: 2026, Month: 3, Day: 3}

	t.Run("range and AsOf guard", func(t *testing.T) {
		t.Parallel()
		pool := pgtest.DB(t)
		applyTx(t, pool, seed)
		missing, err := MissingIDs(context.Background(), pool, TombstoneParams{Source: testSource, Resource: clients.TimeEntries, From: from, To: to, Seen: []string{"2"}, AsOf: asOf})
		if err != nil || !slices.Equal(missing, []string{"3", "4"}) {
			t.Fatalf("MissingIDs = %v, %v; want the ids TombstoneMissing marks, 3 and 4", missing, err)
		}
		n, err := tombstone(t, pool, TombstoneParams{Source: testSource, Resource: clients.TimeEntries, From: from, To: to, Seen: []string{"2"}, AsOf: asOf, Max: 2})
		if err != nil || n != 2 {
			t.Fatalf("TombstoneMissing = %d, %v; want 2", n, err)
		}
		if got := deletedIDs(t, pool); got != "3,4" {
			t.Fatalf("deleted ids = %s, want 3,4", got)
		}
		r, _ := readRow(t, pool, "3")
		if !r.DeletedAt.Equal(asOf) || !r.UpdatedAt.Equal(t0) || !r.FetchedAt.After(asOf) {
			t.Errorf("tombstoned row: deleted_at %v updated_at %v fetched_at %v", r.DeletedAt, r.UpdatedAt, r.FetchedAt)
		}
		// Again: nothing more to mark.
		if n, err := tombstone(t, pool, TombstoneParams{Source: testSource, Resource: clients.TimeEntries, From: from, To: to, Seen: []string{"2"}, AsOf: asOf}); err != nil || n != 0 {
			t.Fatalf("second TombstoneMissing = %d, %v; want 0", n, err)
		}

		// The same version fetched before the mark stays deleted (stale); a
		// newer version resurrects.
		if c := applyTx(t, pool, []clients.Record{onDay(entry(3, t0, f, "a"), 2)}); c != (Counts{Stale: 1}) {
			t.Fatalf("same version fetched before the mark: %+v", c)
		}
		if c := applyTx(t, pool, []clients.Record{onDay(entry(4, t0.Add(time.Second), asOf.Add(time.Minute), "b"), 3)}); c != (Counts{Updated: 1}) {
			t.Fatalf("newer version: %+v", c)
		}
		if got := deletedIDs(t, pool); got != "3" {
			t.Fatalf("deleted ids = %s, want 3 (4 resurrected)", got)
		}
		// A listing fetched after the mark that still returns 3 (a reconcile
		// that missed it): the source says it is live, so it comes back.
		later := time.Now().Add(time.Minute)
		if c := applyTx(t, pool, []clients.Record{onDay(entry(3, t0, later, "a"), 2)}); c != (Counts{Updated: 1, Ties: 1}) {
			t.Fatalf("same version fetched after the mark: %+v", c)
		}
		if got := deletedIDs(t, pool); got != "" {
			t.Fatalf("deleted ids = %s, want none (3 back)", got)
		}
	})

	runTombstoneCases(t, seed, []tombstoneCase{
		{name: "no range", params: TombstoneParams{Source: testSource, Resource: clients.TimeEntries, Seen: []string{"1", "2"}, AsOf: asOf}, n: 3, deleted: "3,4,6"},
		{name: "ceiling refuses and writes nothing", params: TombstoneParams{Source: testSource, Resource: clients.TimeEntries, Seen: nil, AsOf: asOf, Max: 4}, refused: []string{"5 rows", "ceiling is 4"}},
	})

	t.Run("range only for time entries", func(t *testing.T) {
		t.Parallel()
		pool := pgtest.DB(t)
		_, err := tombstone(t, pool, TombstoneParams{Source: testSource, Resource: clients.Projects, From: from, AsOf: asOf})
		if err == nil {
			t.Fatal("a spent-date range on projects was accepted")
		}
		if _, err := tombstone(t, pool, TombstoneParams{Source: testSource, Resource: clients.Projects, Seen: []string{"1"}, AsOf: asOf}); err != nil {
			t.Fatalf("projects without range: %v", err)
		}
		if _, err := MissingIDs(context.Background(), pool, TombstoneParams{Source: testSource, Resource: clients.Projects, Seen: []string{"1"}, AsOf: asOf}); err != nil {
			t.Fatalf("missing projects: %v", err)
		}
	})
}

// The mark is stamped with the clock records are fetched by (the
// process's), at the moment of marking: a page fetched before the mark but
// applied after it stays stale, whatever the database's clock says (here
// its now(), frozen when the marking transaction began, is earlier than the
// page's fetch).
func TestTombstoneMarkUsesTheFetchClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.DB(t)
	live := entry(1, t0, time.Now(), "a")
	applyTx(t, pool, []clients.Record{live})
	var fetchedBefore clients.Record
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT now()"); err != nil { // the transaction's clock starts
			return err
		}
		time.Sleep(20 * time.Millisecond)
		fetchedBefore = entry(1, t0, time.Now(), "a") // a page beside the reconcile
		time.Sleep(20 * time.Millisecond)
		_, err := TombstoneMissing(ctx, tx, TombstoneParams{Source: testSource, Resource: clients.TimeEntries, AsOf: t0.Add(time.Hour)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := applyTx(t, pool, []clients.Record{fetchedBefore}); c != (Counts{Stale: 1}) {
		t.Fatalf("a page fetched before the mark: counts %+v, want stale", c)
	}
	if r, _ := readRow(t, pool, "1"); r.DeletedAt == nil {
		t.Fatal("a page fetched before the mark brought the row back")
	}
}
