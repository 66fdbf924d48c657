package upsert

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidemarkhq/tidemark/clients"
)

// storeAndMirror counts the versions of id in the store and says whether
// its mirror row holds one, with that version's seq.
func storeAndMirror(t testing.TB, pool *pgxpool.Pool, id string) (stored int, inRow bool, seq *int64) {
	t.Helper()
	err := pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM time_entries_history_store WHERE source = $1 AND id = $2),
		coalesce((SELECT history_valid_from IS NOT NULL FROM time_entries WHERE source = $1 AND id = $2), false),
		(SELECT history_seq FROM time_entries WHERE source = $1 AND id = $2)`, testSource, id).Scan(&stored, &inRow, &seq)
	if err != nil {
		t.Fatal(err)
	}
	return stored, inRow, seq
}

// TestFirstVersionLivesInItsMirrorRow: a new record's first version costs
// no row in the store: its mirror row holds it, and every reader (the
// view, the versions, the as-of functions) sees it. Its first change moves
// it to the store under the same seq, then chains on it.
func TestFirstVersionLivesInItsMirrorRow(t *testing.T) {
	t.Parallel()
	pool := historyDB(t)
	ctx := context.Background()
	applyH(t, pool, "r1", entry(1, t0, t0, "a"))
	stored, inRow, seq := storeAndMirror(t, pool, "1")
	if stored != 0 || !inRow || seq == nil {
		t.Fatalf("after the insert: %d versions in the store, in its row %v (seq %v); want 0, true, a seq", stored, inRow, seq)
	}
	first := *seq
	vs := readHistory(t, pool, testSource, "1")
	if len(vs) != 1 || vs[0].Change != ChangeCreated || !vs[0].ValidFrom.Equal(t0) || vs[0].Run == nil || *vs[0].Run != "r1" {
		t.Fatalf("versions = %+v, want one created at %v by r1", vs, t0)
	}
	checkChain(t, vs)
	var asOf, before, viewN int
	err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM time_entries_as_of($1, $2)),
		(SELECT count(*) FROM time_entries_as_of($1, $2 - interval '1 microsecond')),
		(SELECT count(*) FROM time_entries_history WHERE source = $1)`, testSource, t0).Scan(&asOf, &before, &viewN)
	if err != nil || asOf != 1 || before != 0 || viewN != 1 {
		t.Fatalf("as of t0: %d, just before: %d, view: %d (%v); want 1, 0, 1", asOf, before, viewN, err)
	}

	applyH(t, pool, "r2", entry(1, t0.Add(time.Hour), t0.Add(time.Hour), "b"))
	stored, inRow, seq = storeAndMirror(t, pool, "1")
	if stored != 2 || inRow || seq != nil {
		t.Fatalf("after a change: %d versions in the store, in its row %v (seq %v); want 2, false, none", stored, inRow, seq)
	}
	vs = readHistory(t, pool, testSource, "1")
	if got := changes(vs); len(got) != 2 || got[0] != ChangeCreated || got[1] != ChangeUpdated {
		t.Fatalf("changes = %v", got)
	}
	checkChain(t, vs)
	var kept int64
	if err := pool.QueryRow(ctx, `SELECT min(seq) FROM time_entries_versions($1, '1')`, testSource).Scan(&kept); err != nil || kept != first {
		t.Fatalf("the first version's seq: %d, was %d (%v)", kept, first, err)
	}
}

// TestFirstVersionKeptByAnyWriter: whoever changes or deletes a mirror row
// that holds a version (a hand-made UPDATE, a DELETE, a writer with history
// off) moves the version to the store first: nothing recorded is lost.
func TestFirstVersionKeptByAnyWriter(t *testing.T) {
	t.Parallel()
	pool := historyDB(t)
	ctx := context.Background()
	applyH(t, pool, "r1", entry(1, t0, t0, "a"), entry(2, t0, t0, "a"), entry(3, t0, t0, "a"))
	if _, err := pool.Exec(ctx, `UPDATE time_entries SET notes = 'by hand' WHERE id = '1'`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM time_entries WHERE id = '2'`); err != nil {
		t.Fatal(err)
	}
	// A writer with history off.
	if _, err := Apply(ctx, pool, testSource, clients.TimeEntries, []clients.Record{entry(3, t0.Add(time.Hour), t0.Add(time.Hour), "b")}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"1", "2", "3"} {
		stored, inRow, _ := storeAndMirror(t, pool, id)
		vs := readHistory(t, pool, testSource, id)
		if stored != 1 || inRow || len(vs) != 1 || vs[0].Notes == nil || *vs[0].Notes != "Worked on the thing, rev a" || vs[0].Change != ChangeCreated {
			t.Errorf("record %s: %d in the store, in its row %v, versions %+v; want its first version, notes a, in the store", id, stored, inRow, vs)
		}
	}
}

// TestFirstVersionBesideAHistoryRefused: Postgres itself refuses a version
// in a mirror row beside a history of the record, from either side, and an
// UPDATE cannot put one there; Apply, meeting a record whose mirror row was
// deleted by hand, chains the new version on its history instead (the
// page is redone without COPY: its other new records' versions go to the
// store).
func TestFirstVersionBesideAHistoryRefused(t *testing.T) {
	t.Parallel()
	pool := historyDB(t)
	ctx := context.Background()
	applyH(t, pool, "r1", entry(1, t0, t0, "a"), entry(2, t0, t0, "a"))
	if _, err := pool.Exec(ctx, `DELETE FROM time_entries WHERE id = '1'`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, sql string }{
		{"a mirror row holding a version beside a history", `CREATE TEMP TABLE again AS SELECT * FROM time_entries WHERE id = '2';
			UPDATE again SET id = '1', history_seq = 1000;
			INSERT INTO time_entries SELECT * FROM again`},
		{"a first version in the store beside one in its mirror row", `INSERT INTO time_entries_history_store
			(source, id, spent_date, hours, user_id, billable, is_locked, is_closed, is_billed, is_running, updated_at, fetched_at, content_hash, change, valid_from)
			SELECT source, id, spent_date, hours, user_id, billable, is_locked, is_closed, is_billed, is_running, updated_at, fetched_at, content_hash, 'created', updated_at
			FROM time_entries WHERE id = '2'`},
	} {
		_, err := pool.Exec(ctx, c.sql)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "23505" {
			t.Errorf("%s: err = %v, want SQLSTATE 23505", c.name, err)
		}
	}
	if _, err := pool.Exec(ctx, `UPDATE time_entries SET history_valid_from = now(), history_seq = 7 WHERE id = '2'`); err != nil {
		t.Fatal(err)
	}
	if stored, inRow, _ := storeAndMirror(t, pool, "2"); stored != 1 || inRow {
		t.Errorf("an UPDATE setting a version: %d in the store, in its row %v; want the old one moved, none in the row", stored, inRow)
	}

	// The record deleted by hand comes back from the provider: its version
	// chains on its history.
	c := applyH(t, pool, "r2", entry(1, t0.Add(time.Hour), t0.Add(time.Hour), "b"), entry(3, t0, t0, "a"))
	if c.Inserted != 2 {
		t.Fatalf("counts = %+v", c)
	}
	vs := readHistory(t, pool, testSource, "1")
	if len(vs) != 2 {
		t.Fatalf("versions of 1 = %+v, want 2", vs)
	}
	checkChain(t, vs)
	if vs := readHistory(t, pool, testSource, "3"); len(vs) != 1 {
		t.Errorf("versions of 3 = %+v", vs)
	}
}

// TestHistoryFromBeforeTheStoreUpgrades: a database whose history is a
// table named as the view is now (before the store) keeps every version:
// the table becomes the store, and the next new record keeps its version
// in its row.
func TestHistoryFromBeforeTheStoreUpgrades(t *testing.T) {
	t.Parallel()
	pool := historyDB(t)
	ctx := context.Background()
	applyH(t, pool, "r1", entry(1, t0, t0, "a"))
	applyH(t, pool, "r2", entry(1, t0.Add(time.Hour), t0.Add(time.Hour), "b"))
	// The layout before: no view, no mirror columns, the table by the
	// history's name.
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `DROP VIEW time_entries_history CASCADE;
			ALTER TABLE time_entries_history_store RENAME TO time_entries_history;
			ALTER TABLE time_entries DROP COLUMN history_seq CASCADE, DROP COLUMN history_valid_from CASCADE,
			  DROP COLUMN history_recorded_from CASCADE, DROP COLUMN history_run_id CASCADE;
			DROP TRIGGER time_entries_history_refuse_beside ON time_entries`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := EnsureHistory(ctx, pool, testSource, []clients.Resource{clients.TimeEntries}); err != nil {
		t.Fatal(err)
	}
	checkChain(t, readHistory(t, pool, testSource, "1"))
	if vs := readHistory(t, pool, testSource, "1"); len(vs) != 2 {
		t.Fatalf("versions after the upgrade = %+v", vs)
	}
	applyH(t, pool, "r3", entry(2, t0, t0, "a"))
	if stored, inRow, _ := storeAndMirror(t, pool, "2"); stored != 0 || !inRow {
		t.Errorf("a new record after the upgrade: %d in the store, in its row %v", stored, inRow)
	}
	var lateEdits int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM time_entry_late_edits`).Scan(&lateEdits); err != nil {
		t.Errorf("the audit view after the upgrade: %v", err)
	}
}

// TestDateIndexCarriesTheFirstVersion: with history declared, the mirror's
// date index ends with history_valid_from, so that the as-of functions find
// the first versions still in mirror rows of a month in the index alone
// (no index more to write per row).
func TestDateIndexCarriesTheFirstVersion(t *testing.T) {
	t.Parallel()
	pool := historyDB(t)
	var def string
	if err := pool.QueryRow(context.Background(), `SELECT pg_get_indexdef('time_entries_spent_date'::regclass)`).Scan(&def); err != nil {
		t.Fatal(err)
	}
	if want := "(source, spent_date, history_valid_from)"; !strings.Contains(def, want) {
		t.Errorf("time_entries_spent_date = %s, want its keys %s", def, want)
	}
	// Declared again: nothing changes.
	if err := EnsureHistory(context.Background(), pool, "other", []clients.Resource{clients.TimeEntries}); err != nil {
		t.Fatal(err)
	}
}

// TestHistoryUnderConcurrentAppliers: replicas applying the same records at
// once (inserts racing into COPY conflicts, first versions moved while
// another applier chains) leave every record one chain, at most one
// version per content delivered, its last version the mirror's row, and no
// record with a version both in its row and in the store.
func TestHistoryUnderConcurrentAppliers(t *testing.T) {
	t.Parallel()
	pool := historyDB(t)
	ctx := context.Background()
	const records, revs, appliers = 40, 3, 4
	var pages [][]clients.Record
	for r := 0; r < revs; r++ {
		var page []clients.Record
		for id := int64(1); id <= records; id++ {
			at := t0.Add(time.Duration(r) * time.Hour)
			page = append(page, entry(id, at, at, string(rune('a'+r))))
		}
		pages = append(pages, page)
	}
	errs := make(chan error, appliers)
	for a := 0; a < appliers; a++ {
		go func() {
			for r := range pages {
				// Each applier in its own order of pages and records.
				page := pages[(r+a)%len(pages)]
				if a%2 == 1 {
					page = append([]clients.Record(nil), page...)
					for i, j := 0, len(page)-1; i < j; i, j = i+1, j-1 {
						page[i], page[j] = page[j], page[i]
					}
				}
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					_, err := Apply(ctx, tx, testSource, clients.TimeEntries, page, WithHistory(true), WithRun("r"))
					return err
				})
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range appliers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for id := 1; id <= records; id++ {
		sid := strconv.Itoa(id)
		vs := readHistory(t, pool, testSource, sid)
		checkChain(t, vs)
		if len(vs) == 0 || len(vs) > revs {
			t.Fatalf("record %s: %d versions, want 1 to %d", sid, len(vs), revs)
		}
		seen := map[string]bool{}
		for _, v := range vs {
			if seen[string(v.Hash)] {
				t.Errorf("record %s: a content recorded twice: %+v", sid, vs)
			}
			seen[string(v.Hash)] = true
		}
		var hash []byte
		if err := pool.QueryRow(ctx, `SELECT content_hash FROM time_entries WHERE source = $1 AND id = $2`, testSource, sid).Scan(&hash); err != nil {
			t.Fatal(err)
		}
		if last := vs[len(vs)-1]; string(last.Hash) != string(hash) {
			t.Errorf("record %s: the last version is not the mirror's row", sid)
		}
		if stored, inRow, _ := storeAndMirror(t, pool, sid); inRow && stored > 0 {
			t.Errorf("record %s: a version in its row and %d in the store", sid, stored)
		}
	}
}
