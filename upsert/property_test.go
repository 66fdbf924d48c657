package upsert

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"pgregory.net/rapid"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
)

// history draws what a poller can receive for one id: fetches at increasing
// times, each returning the source's state at that time. States move forward
// (a version may repeat: an edit in the same second, a tie) and sometimes are
// deletions, with or without fields. The last fetch is the truth.
func history(rt *rapid.T, id int64) []clients.Record {
	nFetches := rapid.IntRange(1, 6).Draw(rt, "fetches")
	version := t0.Add(time.Duration(rapid.IntRange(0, 3).Draw(rt, "v0")) * time.Second)
	fetched := t0.Add(time.Hour)
	state := 0
	var recs []clients.Record
	for j := range nFetches {
		if j > 0 && rapid.Bool().Draw(rt, "edited") {
			state++
			if rapid.Bool().Draw(rt, "new second") {
				version = version.Add(time.Second)
			}
		}
		fetched = fetched.Add(time.Duration(rapid.IntRange(1, 1000).Draw(rt, "dt")) * time.Millisecond)
		rec := entry(id, version, fetched, strconv.Itoa(state))
		if state%4 == 3 { // every fourth state is a deletion
			rec = deletion(rec, state%8 == 3)
		}
		recs = append(recs, rec)
	}
	return recs
}

// TestConcurrentAppliersConverge: random histories, applied in random order,
// duplicated and cut into random pages by 2–4 concurrent appliers, each
// page in its own transaction, always end with each row at its latest
// (version, fetched_at) content, first_seen_at never changed, exactly one
// insert per id and counts that add up. A sampler reads all rows throughout
// and never sees a row go back to an older (updated_at, fetched_at).
func TestConcurrentAppliersConverge(t *testing.T) {
	t.Parallel()
	checkOnEmptyTable(t, func(rt *rapid.T, pool *pgxpool.Pool) {
		all, last, nIDs := drawHistories(rt, 12, func(id int64) []clients.Record { return history(rt, id) })
		all = redeliverShuffled(rt, all)
		appliers := rapid.IntRange(2, 4).Draw(rt, "appliers")
		total := applyConcurrently(rt, pool, deal(rt, all, appliers, len(all)), true)
		if total.Total() != int64(len(all)) || total.Inserted != int64(nIDs) || total.Ties > total.Updated {
			rt.Fatalf("counts %+v for %d records of %d ids", total, len(all), nIDs)
		}
		checkConverged(rt, pool, last, nIDs)
	})
}

// drawHistories draws 1 to maxIDs ids and the deliveries of each (ids from
// 1), and returns all their records and each id's greatest by (version,
// fetched_at): the delivery its row must end at.
func drawHistories(rt *rapid.T, maxIDs int, history func(id int64) []clients.Record) (all []clients.Record, last map[string]clients.Record, nIDs int) {
	nIDs = rapid.IntRange(1, maxIDs).Draw(rt, "ids")
	last = map[string]clients.Record{}
	for id := range int64(nIDs) {
		for _, rec := range history(id + 1) {
			all = append(all, rec)
			if l, ok := last[rec.ID]; !ok || rec.Version.After(l.Version) || (rec.Version.Equal(l.Version) && rec.FetchedAt.After(l.FetchedAt)) {
				last[rec.ID] = rec
			}
		}
	}
	return all, last, nIDs
}

// checkOnEmptyTable runs a rapid property against one database whose
// time_entries is emptied before each draw.
func checkOnEmptyTable(t *testing.T, prop func(rt *rapid.T, pool *pgxpool.Pool)) {
	t.Helper()
	pool := pgtest.DB(t)
	rapid.Check(t, func(rt *rapid.T) {
		if _, err := pool.Exec(context.Background(), `TRUNCATE time_entries`); err != nil {
			rt.Fatal(err)
		}
		prop(rt, pool)
	})
}

// redeliverShuffled returns all with random re-deliveries added, in random
// order.
func redeliverShuffled(rt *rapid.T, all []clients.Record) []clients.Record {
	for _, i := range rapid.SliceOfN(rapid.IntRange(0, len(all)-1), 0, len(all)).Draw(rt, "duplicates") {
		all = append(all, all[i])
	}
	order := make([]int, len(all))
	for i := range order {
		order[i] = i
	}
	shuffled := make([]clients.Record, len(all))
	for i, j := range rapid.Permutation(order).Draw(rt, "order") {
		shuffled[i] = all[j]
	}
	return shuffled
}

// deal cuts recs into pages of at most maxPage records and hands each to a
// random one of appliers.
func deal(rt *rapid.T, recs []clients.Record, appliers, maxPage int) [][][]clients.Record {
	work := make([][][]clients.Record, appliers)
	for rest := recs; len(rest) > 0; {
		n := rapid.IntRange(1, min(len(rest), maxPage)).Draw(rt, "page")
		a := rapid.IntRange(0, appliers-1).Draw(rt, "applier")
		work[a] = append(work[a], rest[:n])
		rest = rest[n:]
	}
	return work
}

// applyConcurrently runs one goroutine per applier, each page in its own
// transaction, while a sampler watches every row go only forward, and
// returns the summed counts. With holdConn each applier keeps one
// connection for all its pages. Some appliers (drawn) hand Apply the pool
// or connection itself, which then opens a transaction only for a page with
// something to write; the others hand it a transaction of theirs.
func applyConcurrently(rt *rapid.T, pool *pgxpool.Pool, work [][][]clients.Record, holdConn bool) Counts {
	ctx := context.Background()
	direct := rapid.SliceOfN(rapid.Bool(), len(work), len(work)).Draw(rt, "direct")
	stop := make(chan struct{})
	sampled := make(chan error, 1)
	go func() { sampled <- sample(ctx, pool, stop) }()
	var wg sync.WaitGroup
	counts := make([]Counts, len(work))
	errs := make([]error, len(work))
	for a := range work {
		wg.Go(func() {
			var db DB = pool
			if holdConn {
				conn, err := pool.Acquire(ctx)
				if err != nil {
					errs[a] = err
					return
				}
				defer conn.Release()
				db = conn
			}
			for _, page := range work[a] {
				apply := func(db DB) error {
					c, err := Apply(ctx, db, testSource, clients.TimeEntries, page)
					if err == nil && c.Total() != int64(len(page)) {
						err = fmt.Errorf("page of %d counted %+v", len(page), c)
					}
					counts[a].Add(c)
					return err
				}
				var err error
				if direct[a] {
					err = apply(db)
				} else {
					err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error { return apply(tx) })
				}
				if err != nil {
					errs[a] = err
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	if err := <-sampled; err != nil {
		rt.Fatal(err)
	}
	var total Counts
	for a := range work {
		if errs[a] != nil {
			rt.Fatalf("applier %d: %v", a, errs[a])
		}
		total.Add(counts[a])
	}
	return total
}

// checkConverged: exactly nIDs rows, each at the version, content and
// deletion of last's record for its id.
func checkConverged(rt *rapid.T, pool *pgxpool.Pool, last map[string]clients.Record, nIDs int) {
	rows, err := pool.Query(context.Background(), `SELECT id, updated_at, content_hash, deleted_at FROM time_entries`)
	if err != nil {
		rt.Fatal(err)
	}
	n := 0
	var id string
	var v time.Time
	var h []byte
	var del *time.Time
	_, err = pgx.ForEachRow(rows, []any{&id, &v, &h, &del}, func() error {
		n++
		want := last[id]
		wh, _ := ContentHash(want.Raw)
		if !v.Equal(want.Version) || !bytes.Equal(h, wh[:]) || (del == nil) != (want.DeletedAt == nil) {
			return fmt.Errorf("id %s at version %v deleted %v, want version %v deleted %v (%s)", id, v, del, want.Version, want.DeletedAt, want.Raw)
		}
		return nil
	})
	if err != nil {
		rt.Fatal(err)
	}
	if n != nIDs {
		rt.Fatalf("%d rows, want %d", n, nIDs)
	}
}

type seen struct{ v, f, first time.Time }

// sample reads all rows until stop and reports a row that went back to an
// older (updated_at, fetched_at) or whose first_seen_at changed.
func sample(ctx context.Context, pool *pgxpool.Pool, stop <-chan struct{}) error {
	prev := map[string]seen{}
	for {
		rows, err := pool.Query(ctx, `SELECT id, updated_at, fetched_at, first_seen_at FROM time_entries`)
		if err != nil {
			return err
		}
		var id string
		var s seen
		_, err = pgx.ForEachRow(rows, []any{&id, &s.v, &s.f, &s.first}, func() error {
			if p, ok := prev[id]; ok {
				if s.v.Before(p.v) || (s.v.Equal(p.v) && s.f.Before(p.f)) {
					return fmt.Errorf("id %s went back from (%v, %v) to (%v, %v)", id, p.v, p.f, s.v, s.f)
				}
				if !s.first.Equal(p.first) {
					return fmt.Errorf("id %s: first_seen_at changed from %v to %v", id, p.first, s.first)
				}
			}
			prev[id] = s
			return nil
		})
		if err != nil {
			return err
		}
		select {
		case <-stop:
			return nil
		default:
		}
	}
}
