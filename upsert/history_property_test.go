package upsert

import (
	"context"
	"encoding/hex"
	"maps"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"pgregory.net/rapid"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
)

// modelVersion is one version of the model's history.
type modelVersion struct {
	stamp, validFrom time.Time
	hash             string
	deleted          bool
}

// historyModel replays committed pages under the write rule, written out
// plainly, and keeps the history a mirror must write.
type historyModel struct {
	stored   map[string]modelStored
	versions map[string][]modelVersion
}

type modelStored struct {
	version, fetched time.Time
	hash             string
}

func newHistoryModel() *historyModel {
	return &historyModel{stored: map[string]modelStored{}, versions: map[string][]modelVersion{}}
}

// page applies one committed page: per id its greatest (version, fetched)
// record (the others are stale), then the write rule.
func (m *historyModel) page(t testing.TB, recs []clients.Record) {
	best := map[string]clients.Record{}
	var order []string
	for _, r := range recs {
		b, ok := best[r.ID]
		if !ok {
			order = append(order, r.ID)
		}
		if !ok || r.Version.After(b.Version) || r.Version.Equal(b.Version) && r.FetchedAt.After(b.FetchedAt) {
			best[r.ID] = r
		}
	}
	for _, id := range order {
		m.apply(t, best[id])
	}
}

func (m *historyModel) apply(t testing.TB, r clients.Record) {
	v, f := r.Version.Truncate(time.Microsecond), r.FetchedAt.Truncate(time.Microsecond)
	h := hex.EncodeToString(hashOf(t, r))
	s, ok := m.stored[r.ID]
	switch {
	case ok && s.hash == h:
		if v.After(s.version) {
			s.version, s.fetched = v, f // the version moves forward: no new version
			m.stored[r.ID] = s
		}
		return
	case ok && (v.Before(s.version) || v.Equal(s.version) && !f.After(s.fetched)):
		return // stale
	}
	m.stored[r.ID] = modelStored{v, f, h}
	stamp := v
	if r.DeletedAt != nil && r.DeletedAt.After(stamp) {
		stamp = r.DeletedAt.Truncate(time.Microsecond)
	}
	vf := stamp
	if vs := m.versions[r.ID]; len(vs) > 0 && vs[len(vs)-1].validFrom.After(vf) {
		vf = vs[len(vs)-1].validFrom
	}
	m.versions[r.ID] = append(m.versions[r.ID], modelVersion{stamp: stamp, validFrom: vf, hash: h, deleted: r.DeletedAt != nil})
}

// asOf is the live records' hashes at valid instant at.
func (m *historyModel) asOf(at time.Time) map[string]string {
	out := map[string]string{}
	for id, vs := range m.versions {
		for i, v := range vs {
			end := infinity
			if i+1 < len(vs) {
				end = vs[i+1].validFrom
			}
			if !v.validFrom.After(at) && end.After(at) && !v.deleted {
				out[id] = v.hash
			}
		}
	}
	return out
}

func liveHashes(t tb, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, sql string, args ...any) map[string]string {
	t.Helper()
	rows, err := db.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var id string
	var h []byte
	_, err = pgx.ForEachRow(rows, []any{&id, &h}, func() error { out[id] = hex.EncodeToString(h); return nil })
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// knownSnapshot is the mirror as read at one instant of the database clock.
type knownSnapshot struct {
	at   time.Time
	live map[string]string
}

// snapshot reads the live rows and the clock with no write in flight: a
// SHARE lock waits for the writers and holds new ones off until it ends.
func snapshot(t testing.TB, pool *pgxpool.Pool) knownSnapshot {
	t.Helper()
	var s knownSnapshot
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(context.Background(), `LOCK TABLE time_entries IN SHARE MODE`); err != nil {
			return err
		}
		if err := tx.QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&s.at); err != nil {
			return err
		}
		s.live = liveHashes(t, tx, `SELECT id, content_hash FROM time_entries WHERE deleted_at IS NULL`)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestHistoryProperty: random histories of records (edits, ties within a
// second, deletions and restores), delivered out of order with duplicates,
// cut into random pages, some rolled back as by a crash, across restarts
// (a new pool), write the history the model writes; every instant of valid
// time returns the model's state, and every instant of recorded time the
// mirror as read at that instant.
func TestHistoryProperty(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { pool.Close() }()
		if _, err := pool.Exec(ctx, `DROP TABLE IF EXISTS time_entries_history_store CASCADE; TRUNCATE time_entries`); err != nil {
			rt.Fatal(err)
		}
		if err := EnsureHistory(ctx, pool, testSource, []clients.Resource{clients.TimeEntries}); err != nil {
			rt.Fatal(err)
		}
		all, _, _ := drawHistories(rt, 5, func(id int64) []clients.Record { return history(rt, id) })
		all = redeliverShuffled(rt, all)
		model := newHistoryModel()
		var snaps []knownSnapshot
		var written int64
		for len(all) > 0 {
			n := rapid.IntRange(1, min(len(all), 6)).Draw(rt, "page size")
			page := all[:n]
			all = all[n:]
			if rapid.IntRange(0, 4).Draw(rt, "crash") == 0 {
				applyHistoryPage(rt, pool, page, true)
			}
			if rapid.IntRange(0, 4).Draw(rt, "restart") == 0 {
				pool.Close()
				if pool, err = pgxpool.New(ctx, url); err != nil {
					rt.Fatal(err)
				}
			}
			c := applyHistoryPage(rt, pool, page, false)
			written += c.Inserted + c.Updated
			model.page(t, page)
			snaps = append(snaps, snapshot(t, pool))
		}
		checkHistoryAgainstModel(rt, pool, model, written)
		for i, s := range snaps {
			got := liveHashes(t, pool, `SELECT id, content_hash FROM time_entries_known_at($1, $2)`, testSource, s.at)
			if !maps.Equal(got, s.live) {
				rt.Fatalf("known at snapshot %d (%v): %v, the mirror then: %v", i, s.at, got, s.live)
			}
		}
	})
}

func applyHistoryPage(rt *rapid.T, pool *pgxpool.Pool, page []clients.Record, crash bool) Counts {
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		rt.Fatal(err)
	}
	defer tx.Rollback(ctx)
	c, err := Apply(ctx, tx, testSource, clients.TimeEntries, page, WithHistory(true), WithRun("run"))
	if err != nil {
		rt.Fatal(err)
	}
	if crash {
		return Counts{}
	}
	if err := tx.Commit(ctx); err != nil {
		rt.Fatal(err)
	}
	return c
}

func checkHistoryAgainstModel(rt *rapid.T, pool *pgxpool.Pool, model *historyModel, written int64) {
	var rows int64
	instants := map[time.Time]bool{}
	for id, want := range model.versions {
		got := readHistory(rt, pool, testSource, id)
		rows += int64(len(got))
		if len(got) != len(want) {
			rt.Fatalf("record %s: %d versions, the model has %d: %+v", id, len(got), len(want), got)
		}
		for i := range want {
			g, w := got[i], want[i]
			if !g.ValidFrom.Equal(w.validFrom) || hex.EncodeToString(g.Hash) != w.hash || g.Deleted != w.deleted {
				rt.Fatalf("record %s version %d = %+v, the model's %+v", id, i, g, w)
			}
			instants[w.validFrom] = true
			instants[w.validFrom.Add(-time.Microsecond)] = true
		}
		checkChain(rt, got)
	}
	if rows != written {
		rt.Fatalf("%d history rows for %d rows written", rows, written)
	}
	for at := range instants {
		got := liveHashes(rt, pool, `SELECT id, content_hash FROM time_entries_as_of($1, $2)`, testSource, at)
		if want := model.asOf(at); !maps.Equal(got, want) {
			rt.Fatalf("as of %v: %v, the model's %v", at, got, want)
		}
	}
}
