package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemarkhq/tidemark/clients/toggl/toggltest"
)

// historySnap is one instant of the run: the mirror as read at an instant
// of the database clock, and the fake's live entries at an instant of its
// own.
type historySnap struct {
	dbAt   time.Time
	mirror map[string]string // id → content hash
	fakeAt time.Time
	fake   map[string]entryState
}

// TestE2EHistoryThroughTheDaemon (issue 31): the built binary mirrors a
// churning Toggl fake with `history: [time_entries]`, slowly enough that
// every version is seen by a pass. At 20 instants the test reads the mirror
// (with no write in flight) and the fake. Afterwards the recorded-time query
// at each instant returns that mirror row for row, and the valid-time query
// at each of the fake's instants returns the fake's entries then.
func TestE2EHistoryThroughTheDaemon(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tg, ch := e.toggl(t, toggltest.Options{}, 131, 20)
	cfg := e.writeProviderConfig(fmt.Sprintf(`  - name: tg
    kind: toggl
    base_url: %s
    workspace_id: "%d"
    token: ${TG_TOKEN}
    schedule: "@every 1s"
    overlap: 5s
    rate_limit: {requests: 1000, per: 1s}
    resources: [projects, time_entries]
    history: [time_entries]
`, tg.URL(), tg.WorkspaceID()))
	fs := &fakeSource{kind: "toggl", src: "tg", cfg: cfg}
	togglViews(fs, tg)
	d := e.daemon(cfg)
	e.waitProvider(fs, 90*time.Second, false)
	var snaps []historySnap
	for range 20 {
		// The next changes' `at` (whole seconds) come after the last
		// instant read.
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1100 * time.Millisecond)))
		ch.Step(3)
		e.waitProvider(fs, 90*time.Second, false)
		s := readMirrorAt(t, e, "tg")
		s.fakeAt, s.fake = tg.Now(), fs.entries()
		snaps = append(snaps, s)
	}
	d.requireRunning(t)
	for i, s := range snaps {
		got := hashesOf(t, e, `SELECT id, content_hash FROM time_entries_known_at('tg', $1)`, s.dbAt)
		if !maps.Equal(got, s.mirror) {
			t.Errorf("known at instant %d (%v): %d entries, the mirror then held %d (%s)", i, s.dbAt, len(got), len(s.mirror), firstDiff(got, s.mirror))
		}
		valid := statesOf(t, e, s.fakeAt)
		if !maps.Equal(valid, s.fake) {
			t.Errorf("as of instant %d (%v): %d entries, the fake then had %d", i, s.fakeAt, len(valid), len(s.fake))
		}
	}
	var versions, changed int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE change <> 'created') FROM time_entries_history WHERE source = 'tg'`).Scan(&versions, &changed); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d versions kept, %d of them changes of a known entry; churn %+v", versions, changed, ch.Counts())
	if changed == 0 {
		t.Fatal("no version after the first: the churn changed nothing the history kept")
	}
}

// readMirrorAt reads the live entries' hashes and the database clock while
// no write is in flight: a SHARE lock waits for the writers and holds new
// ones off until it ends.
func readMirrorAt(t *testing.T, e *env, src string) historySnap {
	t.Helper()
	var s historySnap
	err := pgx.BeginFunc(context.Background(), e.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(context.Background(), `LOCK TABLE time_entries IN SHARE MODE`); err != nil {
			return err
		}
		if err := tx.QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&s.dbAt); err != nil {
			return err
		}
		rows, err := tx.Query(context.Background(), `SELECT id, content_hash FROM time_entries WHERE source = $1 AND deleted_at IS NULL`, src)
		if err != nil {
			return err
		}
		s.mirror, err = collectHashes(rows)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func collectHashes(rows pgx.Rows) (map[string]string, error) {
	out := map[string]string{}
	var id string
	var h []byte
	_, err := pgx.ForEachRow(rows, []any{&id, &h}, func() error { out[id] = hex.EncodeToString(h); return nil })
	return out, err
}

func hashesOf(t *testing.T, e *env, sql string, args ...any) map[string]string {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := collectHashes(rows)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// statesOf reads the entries valid at the instant at, as the fake's views
// describe them.
func statesOf(t *testing.T, e *env, at time.Time) map[string]entryState {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT id, notes, spent_date FROM time_entries_as_of('tg', $1)`, at)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]entryState{}
	for rows.Next() {
		var id string
		var notes *string
		var day time.Time
		if err := rows.Scan(&id, &notes, &day); err != nil {
			t.Fatal(err)
		}
		out[id] = entryState{notes: deref(notes), spentDate: day.Format(time.DateOnly)}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func firstDiff(a, b map[string]string) string {
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return fmt.Sprintf("entry %s: %q here, %q there", k, v, w)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			return fmt.Sprintf("entry %s missing", k)
		}
	}
	return "same"
}
