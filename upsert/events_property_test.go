package upsert

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"pgregory.net/rapid"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/events"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
)

// feedEvent is one row of the change feed, as the properties compare them.
type feedEvent struct {
	Record string
	ID     [16]byte
	Kind   string
	Ver    time.Time
}

func readFeed(t testing.TB, pool *pgxpool.Pool) []feedEvent {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT record_id, event_id, kind, version FROM events ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (feedEvent, error) {
		var e feedEvent
		var id pgtype.UUID
		err := r.Scan(&e.Record, &id, &e.Kind, &e.Ver)
		e.ID = id.Bytes
		return e, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// expectedChanges replays a record's history in order under the write rule,
// written out plainly, and returns the ids of the changes it makes: the
// feed a mirror that sees every fetch in order must hold.
func expectedChanges(t testing.TB, h []clients.Record) [][16]byte {
	var ids [][16]byte
	reached := map[[16]byte]int{} // times each (version, content) was reached
	var have bool
	var ver, fetched time.Time
	var hash []byte
	for _, rec := range h {
		v, f, hs := rec.Version.Truncate(time.Microsecond), rec.FetchedAt.Truncate(time.Microsecond), hashOf(t, rec)
		switch {
		case have && bytes.Equal(hs, hash):
			ver = maxTime(ver, v)
			continue
		case have && (v.Before(ver) || v.Equal(ver) && !f.After(fetched)):
			continue
		}
		ch := events.Change{Source: testSource, Resource: clients.TimeEntries, RecordID: rec.ID, Version: v}
		copy(ch.Hash[:], hs)
		id := ch.ID()
		if n := reached[id]; n > 0 {
			id = ch.NthID(n)
		}
		reached[ch.ID()]++
		ids = append(ids, id)
		have, ver, fetched, hash = true, v, f, hs
	}
	return ids
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// directPages counts the pages applyEvents committed.
var directPages atomic.Int64

// applyEvents applies one page with events on and commits it, or rolls it
// back after the write (a crash mid-page: nothing of it survives). A page
// that commits goes through the pool itself every other time (Apply's own
// transaction).
func applyEvents(ctx context.Context, db DB, page []clients.Record, crash bool) (Counts, error) {
	if !crash && directPages.Add(1)%2 == 0 {
		return Apply(ctx, db, testSource, clients.TimeEntries, page, WithEvents(true))
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return Counts{}, err
	}
	defer tx.Rollback(ctx)
	c, err := Apply(ctx, tx, testSource, clients.TimeEntries, page, WithEvents(true))
	if err != nil || crash {
		return Counts{}, err
	}
	return c, tx.Commit(ctx)
}

// schedule is one deliverer's pages: each page holds, per record it names,
// a fetch of the record's history the deliverer has reached (an earlier one:
// a re-delivery), and the deliverer moves forward through each history in
// order. A page may crash (roll back). Every schedule ends with a page of
// every record's last fetch, committed.
func schedule(rt *rapid.T, label string, hs [][]clients.Record) [][]clients.Record {
	reached := make([]int, len(hs))
	var pages [][]clients.Record
	for range rapid.IntRange(0, 8).Draw(rt, label+" pages") {
		var page []clients.Record
		for r, h := range hs {
			if !rapid.Bool().Draw(rt, label+" in page") {
				continue
			}
			if reached[r] < len(h)-1 && rapid.Bool().Draw(rt, label+" forward") {
				reached[r]++
			}
			page = append(page, h[rapid.IntRange(0, reached[r]).Draw(rt, label+" fetch")])
		}
		if len(page) > 0 {
			pages = append(pages, page)
		}
	}
	var last []clients.Record
	for _, h := range hs {
		last = append(last, h[len(h)-1])
	}
	return append(pages, last)
}

// TestEventsOnePerRealChange: records' histories (edits, same-second ties,
// deletions and records brought back) delivered by two concurrent replicas
// and a backfill, each page re-delivering earlier fetches at random, some
// pages crashing after their writes, yield a feed where every event is a
// change the in-order history makes (same id), no id twice, a record's
// events in version order, each record's last event its last change, and
// exactly one event per write Apply counted.
func TestEventsOnePerRealChange(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	ctx := context.Background()
	checkFeedProperty(t, pool, func(rt *rapid.T, hs [][]clients.Record, want map[string][][16]byte) {
		work := [][][]clients.Record{schedule(rt, "replica a", hs), schedule(rt, "replica b", hs), schedule(rt, "backfill", hs)}
		crashes := make([][]bool, len(work))
		for a := range work {
			for range work[a] {
				crashes[a] = append(crashes[a], rapid.IntRange(0, 4).Draw(rt, "crash") == 0)
			}
			crashes[a][len(work[a])-1] = false
		}
		var mu sync.Mutex
		var written int64
		var wg sync.WaitGroup
		errs := make([]error, len(work))
		for a := range work {
			wg.Go(func() {
				for p, page := range work[a] {
					c, err := applyEvents(ctx, pool, page, crashes[a][p])
					if err != nil {
						errs[a] = err
						return
					}
					mu.Lock()
					written += c.Inserted + c.Updated
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		for a, err := range errs {
			if err != nil {
				rt.Fatalf("deliverer %d: %v", a, err)
			}
		}
		checkFeed(rt, readFeed(t, pool), want, written, false)
	})
}

// checkFeedProperty runs prop on an emptied mirror and feed with 1 to 6
// records' histories and each record's in-order changes.
func checkFeedProperty(t *testing.T, pool *pgxpool.Pool, prop func(rt *rapid.T, hs [][]clients.Record, want map[string][][16]byte)) {
	t.Helper()
	rapid.Check(t, func(rt *rapid.T) {
		if _, err := pool.Exec(context.Background(), `TRUNCATE time_entries, events, event_states`); err != nil {
			rt.Fatal(err)
		}
		hs := make([][]clients.Record, rapid.IntRange(1, 6).Draw(rt, "ids"))
		want := map[string][][16]byte{}
		for i := range hs {
			hs[i] = history(rt, int64(i+1))
			want[hs[i][0].ID] = expectedChanges(t, hs[i])
		}
		prop(rt, hs, want)
	})
}

// TestEventsSameIDsInEveryOrderedInterleaving: when the fetches of each
// record are delivered in order (one poller, its overlaps and retries,
// crashes mid-page and a later backfill that re-delivers everything), every
// interleaving yields exactly the in-order history's events: the same ids.
func TestEventsSameIDsInEveryOrderedInterleaving(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	ctx := context.Background()
	checkFeedProperty(t, pool, func(rt *rapid.T, hs [][]clients.Record, want map[string][][16]byte) {
		nIDs := len(hs)
		// Every fetch of every record once, in order per record, mixed into
		// pages; each page re-sent (an overlap or a retry) or crashed at random.
		next := make([]int, nIDs)
		var pages [][]clients.Record
		for left := true; left; {
			left = false
			var page []clients.Record
			for r := range hs {
				if next[r] < len(hs[r]) && rapid.Bool().Draw(rt, "in page") {
					page = append(page, hs[r][next[r]])
					next[r]++
				}
				left = left || next[r] < len(hs[r])
			}
			if len(page) > 0 {
				pages = append(pages, page)
			}
		}
		var written int64
		for _, page := range pages {
			for rapid.IntRange(0, 3).Draw(rt, "crash") == 0 {
				if _, err := applyEvents(ctx, pool, page, true); err != nil {
					rt.Fatal(err)
				}
			}
			for n := rapid.IntRange(1, 2).Draw(rt, "sends"); n > 0; n-- {
				c, err := applyEvents(ctx, pool, page, false)
				if err != nil {
					rt.Fatal(err)
				}
				written += c.Inserted + c.Updated
			}
		}
		// A backfill later re-delivers every fetch, in order: nothing new.
		for _, h := range hs {
			for _, rec := range h {
				c, err := applyEvents(ctx, pool, []clients.Record{rec}, false)
				if err != nil {
					rt.Fatal(err)
				}
				written += c.Inserted + c.Updated
			}
		}
		checkFeed(rt, readFeed(t, pool), want, written, true)
	})
}

// checkFeed checks a feed against each record's in-order changes: exact
// (every change, in order) or, with replicas racing, a subsequence that
// ends with the last change.
func checkFeed(rt *rapid.T, feed []feedEvent, want map[string][][16]byte, written int64, exact bool) {
	if int64(len(feed)) != written {
		rt.Fatalf("%d events for %d rows written", len(feed), written)
	}
	seen := map[[16]byte]bool{}
	got := map[string][][16]byte{}
	for _, e := range feed {
		if seen[e.ID] {
			rt.Fatalf("event id %s twice", events.FormatID(e.ID))
		}
		seen[e.ID] = true
		if g := got[e.Record]; len(g) > 0 {
			prev := slices.Index(want[e.Record], g[len(g)-1])
			if slices.Index(want[e.Record], e.ID) <= prev {
				rt.Fatalf("record %s: event %s out of version order", e.Record, events.FormatID(e.ID))
			}
		}
		got[e.Record] = append(got[e.Record], e.ID)
	}
	for rec, w := range want {
		g := got[rec]
		for _, id := range g {
			if !slices.Contains(w, id) {
				rt.Fatalf("record %s: event %s is no change of its history %s (feed %s)", rec, events.FormatID(id), fmtIDs(w), fmtIDs(g))
			}
		}
		if exact && !slices.Equal(g, w) {
			rt.Fatalf("record %s: events %s, want %s", rec, fmtIDs(g), fmtIDs(w))
		}
		if len(g) == 0 || g[len(g)-1] != w[len(w)-1] {
			rt.Fatalf("record %s: last event %s, want its last change %s", rec, fmtIDs(g), fmtIDs(w[len(w)-1:]))
		}
	}
}

func fmtIDs(ids [][16]byte) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = events.FormatID(id)
	}
	return fmt.Sprint(s)
}

// TestEventsTombstoneAndReturn: a wrong tombstone and the record's return
// (same version, same content, fetched after the mark) are two changes with
// ids of their own; the return does not reuse the creation's id. With events
// off nothing is appended; a re-delivery appends nothing.
func TestEventsTombstoneAndReturn(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	ctx := context.Background()
	rec := entry(1, t0, t0.Add(time.Minute), "a")
	other := entry(2, t0, t0.Add(time.Minute), "a")
	if _, err := applyEvents(ctx, pool, []clients.Record{other}, false); err != nil {
		t.Fatal(err)
	}
	applyTx(t, pool, []clients.Record{rec}) // events off: nothing appended
	if n := len(readFeed(t, pool)); n != 1 {
		t.Fatalf("%d events after one change with events on and one with events off", n)
	}
	rec2 := entry(3, t0, t0.Add(time.Minute), "a")
	for range 3 { // created once, then re-deliveries
		if _, err := applyEvents(ctx, pool, []clients.Record{rec2}, false); err != nil {
			t.Fatal(err)
		}
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := TombstoneMissing(ctx, tx, TombstoneParams{Source: testSource, Resource: clients.TimeEntries,
			Seen: []string{"1", "2"}, AsOf: t0.Add(time.Hour), Events: true})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	back := rec2
	back.FetchedAt = time.Now()
	if _, err := applyEvents(ctx, pool, []clients.Record{back}, false); err != nil {
		t.Fatal(err)
	}
	feed := readFeed(t, pool)
	var kinds []string
	for _, e := range feed {
		kinds = append(kinds, e.Record+":"+e.Kind)
	}
	if want := []string{"2:created", "3:created", "3:deleted", "3:updated"}; !slices.Equal(kinds, want) {
		t.Fatalf("feed %v, want %v", kinds, want)
	}
	ch := events.Change{Source: testSource, Resource: clients.TimeEntries, RecordID: "3", Version: t0}
	copy(ch.Hash[:], hashOf(t, rec2))
	if feed[1].ID != ch.ID() || feed[3].ID != ch.NthID(1) {
		t.Fatalf("ids %s, want the creation's and its next occurrence's", fmtIDs([][16]byte{feed[1].ID, feed[3].ID}))
	}
}

// TestEventsIDOutlivesRetention (issue 23, item 1): after retention deleted
// a record's creation, a wrong tombstone and the record's return at the same
// version and content get ids of their own: the return does not get the
// creation's id again, which a consumer deduplicating by webhook-id would
// drop.
func TestEventsIDOutlivesRetention(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	ctx := context.Background()
	rec := entry(1, t0, t0.Add(time.Minute), "a")
	if _, err := applyEvents(ctx, pool, []clients.Record{rec}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(ctx, pool, testSource, clients.TimeEntries, []clients.Record{rec}, WithEvents(true)); err != nil {
		t.Fatal(err)
	}
	delivered := readFeed(t, pool)
	if n, err := events.Prune(ctx, pool, time.Microsecond); err != nil || n != 1 {
		t.Fatalf("prune: %d events, %v", n, err)
	}
	tombstoneAll(t, pool)
	back := rec
	back.FetchedAt = time.Now()
	if _, err := Apply(ctx, pool, testSource, clients.TimeEntries, []clients.Record{back}, WithEvents(true)); err != nil {
		t.Fatal(err)
	}
	delivered = append(delivered, readFeed(t, pool)...)
	var kinds []string
	for _, e := range delivered {
		kinds = append(kinds, e.Kind)
	}
	if want := []string{"created", "deleted", "updated"}; !slices.Equal(kinds, want) {
		t.Fatalf("feed %v, want %v", kinds, want)
	}
	ch := events.Change{Source: testSource, Resource: clients.TimeEntries, RecordID: "1", Version: t0}
	copy(ch.Hash[:], hashOf(t, rec))
	if delivered[0].ID != ch.ID() || delivered[2].ID != ch.NthID(1) {
		t.Fatalf("ids %s, want the creation's and its next occurrence's (%s)", fmtIDs([][16]byte{delivered[0].ID, delivered[2].ID}),
			fmtIDs([][16]byte{ch.ID(), ch.NthID(1)}))
	}
}

// tombstoneAll marks every live time entry of testSource deleted, with
// events: a reconcile whose listing wrongly came back empty.
func tombstoneAll(t testing.TB, pool *pgxpool.Pool) int64 {
	t.Helper()
	var n int64
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		var err error
		n, err = TombstoneMissing(context.Background(), tx, TombstoneParams{Source: testSource, Resource: clients.TimeEntries,
			AsOf: t0.Add(24 * time.Hour), Events: true})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestEventsIDsUniqueAcrossRetention: records' histories applied in order,
// mixed with wrong tombstones, returns at the same version and content, and
// retention deleting the oldest events (some of a version, or all): over
// everything the feed ever held, no id twice and one event per write.
func TestEventsIDsUniqueAcrossRetention(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		if _, err := pool.Exec(ctx, `TRUNCATE time_entries, events, event_states`); err != nil {
			rt.Fatal(err)
		}
		hs := make([][]clients.Record, rapid.IntRange(1, 3).Draw(rt, "ids"))
		for i := range hs {
			hs[i] = history(rt, int64(i+1))
		}
		next := make([]int, len(hs))
		var delivered []feedEvent
		var written int64
		for range rapid.IntRange(1, 24).Draw(rt, "steps") {
			switch rapid.IntRange(0, 3).Draw(rt, "action") {
			case 0: // the next fetch of a record
				r := rapid.IntRange(0, len(hs)-1).Draw(rt, "record")
				if next[r] == len(hs[r]) {
					continue
				}
				c, err := Apply(ctx, pool, testSource, clients.TimeEntries, hs[r][next[r]:next[r]+1], WithEvents(true))
				if err != nil {
					rt.Fatal(err)
				}
				next[r]++
				written += c.Inserted + c.Updated
			case 1: // a wrong tombstone of every live row
				written += tombstoneAll(t, pool)
			case 2: // every record fetched again now: the tombstoned ones return
				var page []clients.Record
				for r := range hs {
					if next[r] > 0 {
						rec := hs[r][next[r]-1]
						rec.FetchedAt = time.Now()
						page = append(page, rec)
					}
				}
				if len(page) == 0 {
					continue
				}
				c, err := Apply(ctx, pool, testSource, clients.TimeEntries, page, WithEvents(true))
				if err != nil {
					rt.Fatal(err)
				}
				written += c.Inserted + c.Updated
			case 3: // retention deletes the oldest events, up to all of them
				feed := readFeed(t, pool)
				k := rapid.IntRange(0, len(feed)).Draw(rt, "pruned")
				delivered = append(delivered, feed[:k]...)
				if n := pruneOldest(t, pool, k); n != int64(k) {
					rt.Fatalf("pruned %d events, want %d", n, k)
				}
			}
		}
		delivered = append(delivered, readFeed(t, pool)...)
		if int64(len(delivered)) != written {
			rt.Fatalf("%d events for %d writes", len(delivered), written)
		}
		seen := map[[16]byte]bool{}
		for _, e := range delivered {
			if seen[e.ID] {
				rt.Fatalf("event id %s twice (feed %v)", events.FormatID(e.ID), delivered)
			}
			seen[e.ID] = true
		}
	})
}

// pruneOldest ages the feed's k oldest events past retention and prunes:
// what retention does to a prefix of the feed.
func pruneOldest(t testing.TB, pool *pgxpool.Pool, k int) int64 {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `UPDATE events SET recorded_at = recorded_at - interval '1 day'
WHERE seq IN (SELECT seq FROM events ORDER BY seq LIMIT $1)`, k); err != nil {
		t.Fatal(err)
	}
	n, err := events.Prune(ctx, pool, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestEventsCreatedAgainAfterTheMirrorWasEmptied: an operator empties a
// mirror table by hand; the record created again at the same version and
// content is a change of its own with the next id, not its creation's.
func TestEventsCreatedAgainAfterTheMirrorWasEmptied(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	ctx := context.Background()
	rec, other := entry(1, t0, t0.Add(time.Minute), "a"), entry(2, t0, t0.Add(time.Minute), "a")
	for range 2 {
		if _, err := Apply(ctx, pool, testSource, clients.TimeEntries, []clients.Record{rec, other}, WithEvents(true)); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `TRUNCATE time_entries`); err != nil {
			t.Fatal(err)
		}
	}
	feed := readFeed(t, pool)
	ch := events.Change{Source: testSource, Resource: clients.TimeEntries, RecordID: "1", Version: t0}
	copy(ch.Hash[:], hashOf(t, rec))
	if len(feed) != 4 || feed[0].ID != ch.ID() || feed[2].ID != ch.NthID(1) || feed[2].Kind != "created" {
		t.Fatalf("feed %v: want record 1 created twice, the second time under its next id", feed)
	}
}

// TestEventsCreatedAgainAfterRetentionAndAnEmptiedMirror: a record created,
// wrongly tombstoned, its events deleted by retention, then its table
// emptied by hand: created again at the same version and content, it gets
// its next occurrence's id, not its creation's (which a consumer that last
// saw it deleted would drop).
func TestEventsCreatedAgainAfterRetentionAndAnEmptiedMirror(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	ctx := context.Background()
	rec := entry(1, t0, t0.Add(time.Minute), "a")
	if _, err := Apply(ctx, pool, testSource, clients.TimeEntries, []clients.Record{rec}, WithEvents(true)); err != nil {
		t.Fatal(err)
	}
	tombstoneAll(t, pool)
	if n := pruneOldest(t, pool, 2); n != 2 {
		t.Fatalf("pruned %d events, want 2", n)
	}
	if _, err := pool.Exec(ctx, `TRUNCATE time_entries`); err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(ctx, pool, testSource, clients.TimeEntries, []clients.Record{rec}, WithEvents(true)); err != nil {
		t.Fatal(err)
	}
	ch := events.Change{Source: testSource, Resource: clients.TimeEntries, RecordID: "1", Version: t0}
	copy(ch.Hash[:], hashOf(t, rec))
	if feed := readFeed(t, pool); len(feed) != 1 || feed[0].Kind != "created" || feed[0].ID != ch.NthID(1) {
		t.Fatalf("feed %v: want record 1 created again under its next id %s", feed, events.FormatID(ch.NthID(1)))
	}
}

// TestEventsAppendsWriteNoState: the changes of every kind (created, newer,
// a wrong tombstone and the return at the same version) write nothing but
// their events; event_states is written by retention only, one row per
// record whose events it deleted, and the next return still gets a new id.
func TestEventsAppendsWriteNoState(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	ctx := context.Background()
	states := func() int {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM event_states`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	a, b := entry(1, t0, t0.Add(time.Minute), "a"), entry(2, t0, t0.Add(time.Minute), "a")
	a2 := entry(1, t0.Add(time.Second), t0.Add(2*time.Minute), "b")
	for _, page := range [][]clients.Record{{a, b}, {a2}} {
		if _, err := Apply(ctx, pool, testSource, clients.TimeEntries, page, WithEvents(true)); err != nil {
			t.Fatal(err)
		}
	}
	if n := tombstoneAll(t, pool); n != 2 {
		t.Fatalf("%d tombstoned, want 2", n)
	}
	back := []clients.Record{a2, b}
	for i := range back {
		back[i].FetchedAt = time.Now()
	}
	if _, err := Apply(ctx, pool, testSource, clients.TimeEntries, back, WithEvents(true)); err != nil {
		t.Fatal(err)
	}
	if n := len(readFeed(t, pool)); n != 7 || states() != 0 {
		t.Fatalf("%d events and %d event_states rows, want 7 and none", n, states())
	}
	if n := pruneOldest(t, pool, 7); n != 7 || states() != 2 {
		t.Fatalf("pruned %d events into %d event_states rows, want 7 into 2", n, states())
	}
	tombstoneAll(t, pool)
	for i := range back {
		back[i].FetchedAt = time.Now()
	}
	if _, err := Apply(ctx, pool, testSource, clients.TimeEntries, back, WithEvents(true)); err != nil {
		t.Fatal(err)
	}
	ch := events.Change{Source: testSource, Resource: clients.TimeEntries, RecordID: "2", Version: t0}
	copy(ch.Hash[:], hashOf(t, b))
	feed := readFeed(t, pool)
	if len(feed) != 4 || feed[3].Record != "2" || feed[3].ID != ch.NthID(2) {
		t.Fatalf("feed %v: want record 2 back a third time under its third return's id", feed)
	}
}
