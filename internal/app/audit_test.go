package app_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/fakeapi/harvestfake"
	"github.com/tidemarkhq/tidemark/poller"
)

// lateEdit is one row of time_entry_late_edits as the test compares them.
type lateEdit struct {
	ID, Change, Reasons, HoursChange, AmountChange string
}

// TestLateEditsThroughTheApp (issue 32): a Harvest fake edits entries
// before and after invoicing, approval and locking, at known instants, with
// a pass after each step through app.Open; a reconcile finds a locked entry
// deleted and another, invoiced, falsely missing (healed by the next
// reconcile). time_entry_late_edits lists exactly the edits after the
// fact, with their hours and amounts (billable_rate 100), and nothing else:
// not the edits before, not the invoicing itself (of a new or an approved
// entry: a change of status is no edit), not a re-delivery, not a healed
// false deletion.
func TestLateEditsThroughTheApp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newHarvestEnv(t, 0, harvestfake.Options{NoRateLimit: true})
	day := clients.DateOf(time.Now().UTC()) // every edit is before its month closes
	at := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	step := 0
	last := map[int64]time.Time{} // each entry's version
	put := func(id int64, hours string, f func(*harvestfake.TimeEntry)) {
		step++
		te := harvestfake.TimeEntry{ID: id, SpentDate: day, Hours: hours, UserID: 7, ProjectID: 8, TaskID: 9, ClientID: 10,
			Billable: true, CreatedAt: at, UpdatedAt: at.Add(time.Duration(step) * time.Minute)}
		if f != nil {
			f(&te)
		}
		last[id] = te.UpdatedAt
		e.fake.PutTimeEntry(te)
	}
	_, p := e.open(t, "", "    history: [time_entries]\n")
	pass := func() {
		t.Helper()
		if _, err := p.Incremental(ctx, "acme", clients.TimeEntries); err != nil {
			t.Fatal(err)
		}
	}
	reconcile := func() {
		t.Helper()
		if _, err := p.Reconcile(ctx, "acme", clients.TimeEntries); err != nil {
			t.Fatal(err)
		}
	}
	invoiced := func(te *harvestfake.TimeEntry) { te.IsBilled, te.InvoiceID = true, 55 }
	approved := func(te *harvestfake.TimeEntry) { te.IsClosed = true }
	locked := func(te *harvestfake.TimeEntry) { te.IsLocked = true }
	for id := int64(1); id <= 4; id++ {
		put(id, "1.0", nil)
	}
	pass()
	put(1, "1.5", nil) // before invoicing: no late edit
	pass()
	put(1, "1.5", invoiced) // the invoicing itself
	put(2, "3.0", approved)
	put(3, "2.0", locked)
	put(4, "1.0", invoiced)
	pass()
	pass()                  // a re-delivery of the overlap: nothing
	put(1, "2.0", invoiced) // after invoicing: +0.5 h, +50
	put(2, "2.5", approved) // after approval: -0.5 h, -50
	pass()
	put(2, "2.5", func(te *harvestfake.TimeEntry) { approved(te); invoiced(te); locked(te) }) // invoicing: a status, no edit
	pass()
	e.fake.Delete(clients.TimeEntries, 3) // after locking: -2 h, -200
	// Entry 4 missing from one listing (a false deletion), back in the next
	// under the version it had.
	e.fake.Delete(clients.TimeEntries, 4)
	reconcile()
	was := last[4]
	put(4, "1.0", func(te *harvestfake.TimeEntry) { invoiced(te); te.UpdatedAt = was })
	reconcile()
	pass()

	rows, err := e.pool.Query(ctx, `SELECT id, change, array_to_string(reasons, ','), hours_change::text, coalesce(amount_change::text, 'null')
		FROM time_entry_late_edits WHERE source = 'acme' ORDER BY id, seq`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[lateEdit])
	if err != nil {
		t.Fatal(err)
	}
	want := []lateEdit{
		{"1", "updated", "invoiced", "0.5", "50.0"},
		{"2", "updated", "approved", "-0.5", "-50.0"},
		{"3", "deleted", "locked", "-2.0", "-200.0"},
	}
	norm := func(es []lateEdit) string {
		var b strings.Builder
		for _, x := range es {
			fmt.Fprintf(&b, "%s %s %s %s %s\n", x.ID, x.Change, x.Reasons, trimZeros(x.HoursChange), trimZeros(x.AmountChange))
		}
		return b.String()
	}
	if norm(got) != norm(want) {
		t.Fatalf("late edits:\n%swant:\n%s", norm(got), norm(want))
	}
	// The healed false deletion is in the history, marked by its runs.
	var changes []string
	rows, _ = e.pool.Query(ctx, `SELECT change FROM time_entries_versions('acme', '4')`)
	if changes, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(changes, []string{"created", "updated", "deleted", "restored"}) {
		t.Errorf("entry 4's versions: %v", changes)
	}
}

// trimZeros writes a decimal without trailing zeros ("0.50" → "0.5").
func trimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// TestHistoryTurnedOffAndOnThroughTheApp (issue 31): history turned on for
// entries already mirrored records them as first seen; turned off, what was
// recorded stays and changes go unrecorded; on again, the entries changed
// meanwhile are first seen again, the others keep their version.
func TestHistoryTurnedOffAndOnThroughTheApp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newHarvestEnv(t, 3, harvestfake.Options{NoRateLimit: true})
	_, p := e.open(t, "", "")
	if _, err := p.Incremental(ctx, "acme", clients.TimeEntries); err != nil {
		t.Fatal(err)
	}
	changes := func() string {
		t.Helper()
		var s string
		err := e.pool.QueryRow(ctx, `SELECT string_agg(id || ':' || change, ' ' ORDER BY id, seq) FROM time_entries_history`).Scan(&s)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	const on = "    history: [time_entries]\n"
	_, p = e.open(t, "", on)
	if got := changes(); got != "1:first_seen 2:first_seen 3:first_seen" {
		t.Fatalf("turned on: %s", got)
	}
	// Off: the daemon's history loop marks it off.
	a, p := e.open(t, "", "")
	stop := a.StartHistoryRetention(ctx)
	deadline := time.Now().Add(time.Minute)
	for {
		var n int
		if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM history_sources`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("history still marked on a minute after the daemon's loop started with it off")
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	te, _ := e.fake.TimeEntry(2)
	te.Hours, te.UpdatedAt = "4.0", time.Now().UTC().Truncate(time.Second)
	e.fake.PutTimeEntry(te)
	if _, err := p.Incremental(ctx, "acme", clients.TimeEntries); err != nil {
		t.Fatal(err)
	}
	if got := changes(); got != "1:first_seen 2:first_seen 3:first_seen" {
		t.Fatalf("off: %s", got)
	}
	e.open(t, "", on)
	if got := changes(); got != "1:first_seen 2:first_seen 2:first_seen 3:first_seen" {
		t.Fatalf("on again: %s", got)
	}
}

// TestFirstVersionsThroughTheApp (issue 31): through app.Open, a new
// entry's first version is kept in its mirror row (none in the store) and
// read through the history like any other; a replica with history off that
// changes it keeps that version (moved to the store); and a history from
// before the store, a table named time_entries_history, is upgraded by the
// next app with history on, every version kept.
func TestFirstVersionsThroughTheApp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newHarvestEnv(t, 3, harvestfake.Options{NoRateLimit: true})
	const on = "    history: [time_entries]\n"
	pass := func(p *poller.Poller) {
		t.Helper()
		if _, err := p.Incremental(ctx, "acme", clients.TimeEntries); err != nil {
			t.Fatal(err)
		}
	}
	counts := func() (stored, inRows int, versions string) {
		t.Helper()
		err := e.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM time_entries_history_store),
			(SELECT count(*) FROM time_entries WHERE history_valid_from IS NOT NULL),
			(SELECT string_agg(id || ':' || change, ' ' ORDER BY id, seq) FROM time_entries_history)`).Scan(&stored, &inRows, &versions)
		if err != nil {
			t.Fatal(err)
		}
		return stored, inRows, versions
	}
	_, p := e.open(t, "", on)
	pass(p)
	if s, r, v := counts(); s != 0 || r != 3 || v != "1:created 2:created 3:created" {
		t.Fatalf("after the first pass: %d in the store, %d in rows, %q", s, r, v)
	}
	// A replica with history off changes entry 1: its first version stays.
	_, off := e.open(t, "", "")
	te, _ := e.fake.TimeEntry(1)
	te.Hours, te.UpdatedAt = "4.0", time.Now().UTC().Truncate(time.Second)
	e.fake.PutTimeEntry(te)
	pass(off)
	if s, r, v := counts(); s != 1 || r != 2 || v != "1:created 2:created 3:created" {
		t.Fatalf("after a change with history off: %d in the store, %d in rows, %q", s, r, v)
	}
	// The layout before the store: every version in time_entries_history.
	if _, err := e.pool.Exec(ctx, `UPDATE time_entries SET history_valid_from = NULL WHERE history_valid_from IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `DROP VIEW time_entries_history CASCADE;
			ALTER TABLE time_entries_history_store RENAME TO time_entries_history;
			DROP TRIGGER time_entries_history_refuse_beside ON time_entries;
			ALTER TABLE time_entries DROP COLUMN history_seq CASCADE, DROP COLUMN history_valid_from CASCADE,
			  DROP COLUMN history_recorded_from CASCADE, DROP COLUMN history_run_id CASCADE`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	_, p = e.open(t, "", on)
	te, _ = e.fake.TimeEntry(2)
	te.Hours, te.UpdatedAt = "5.0", time.Now().UTC().Truncate(time.Second)
	e.fake.PutTimeEntry(te)
	pass(p)
	// Entry 1's change by the replica with history off left no version
	// (README: replicas must agree on history); its first one stays.
	if s, r, v := counts(); s != 4 || r != 0 || v != "1:created 2:created 2:updated 3:created" {
		t.Fatalf("after the upgrade and a change: %d in the store, %d in rows, %q", s, r, v)
	}
}
