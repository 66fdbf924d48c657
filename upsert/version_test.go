package upsert

import (
	"bytes"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"pgregory.net/rapid"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/schema"
)

// unstamped builds a Clockify-shaped time entry whose raw carries no version
// stamp: the version comes from outside the record (the page's Date header),
// so the same content can arrive under a newer version. rev sets the content.
func unstamped(id int64, version, fetched time.Time, rev string) clients.Record {
	notes := "Worked on the thing, rev " + rev
	raw := fmt.Appendf(nil, `{"id":"%d","description":%q,"userId":"5a0ab5acb07987125438b60f","billable":true,"projectId":"5b641568b07987035750505e","taskId":null,"workspaceId":"5a0ab5acb07987125438b60e","timeInterval":{"start":"2026-02-27T09:00:00Z","end":"2026-02-27T10:15:00Z","duration":"PT1H15M"},"isLocked":false,"type":"REGULAR","kioskId":null}`, id, notes)
	return clients.Record{
		ID: strconv.FormatInt(id, 10), Version: version, FetchedAt: fetched, Raw: raw,
		Row: schema.TimeEntries.Row(schema.Values{
			"spent_date": clients.Date{Year: 2026, Month: 2, Day: 27}, "hours": clients.Decimal("1.25"), "notes": notes,
			"user_id": "5a0ab5acb07987125438b60f", "project_id": "5b641568b07987035750505e", "billable": true,
		}),
	}
}

// unstampedDeletion is the deletion of an unstamped entry: its raw is the
// deletion (so it differs from every live content), and it carries no
// version either.
func unstampedDeletion(rec clients.Record, typed bool) clients.Record {
	return markDeleted(rec, typed, `,"deleted":true}`)
}

// TestSameContentNewerVersion is issue 9, finding 7: A@v1, then A@v3 (the
// same content under a newer version), then B@v2. The stored version must
// have moved to v3 with A, so that B@v2 is refused; the mirror ends at A.
// A second delivery of A@v3 writes nothing at all.
func TestSameContentNewerVersion(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	v1, v2, v3 := t0, t0.Add(time.Second), t0.Add(2*time.Second)
	f1, f2, f3 := t0.Add(time.Minute), t0.Add(2*time.Minute), t0.Add(3*time.Minute)
	a1, b2, a3 := unstamped(1, v1, f1, "a"), unstamped(1, v2, f2, "b"), unstamped(1, v3, f3, "a")

	applyTx(t, pool, []clients.Record{a1})
	first, _ := readRow(t, pool, "1")
	if c := applyTx(t, pool, []clients.Record{a3}); c != (Counts{Unchanged: 1}) {
		t.Fatalf("same content, newer version: counts %+v, want unchanged", c)
	}
	r, _ := readRow(t, pool, "1")
	if !r.UpdatedAt.Equal(v3) || !r.FetchedAt.Equal(f3) {
		t.Fatalf("after A@v3: (updated_at, fetched_at) = (%v, %v), want (%v, %v)", r.UpdatedAt, r.FetchedAt, v3, f3)
	}
	if !bytes.Equal(r.Hash, first.Hash) || *r.Notes != notes(a1) || !r.FirstSeenAt.Equal(first.FirstSeenAt) {
		t.Fatalf("after A@v3: content or first_seen_at changed: %+v", r)
	}

	// The re-delivery of A@v3: no write, no row lock.
	if c := applyTx(t, pool, []clients.Record{a3}); c != (Counts{Unchanged: 1}) {
		t.Fatalf("re-delivery: counts %+v", c)
	}
	again, _ := readRow(t, pool, "1")
	if again.Xmin != r.Xmin || again.Xmax != r.Xmax {
		t.Fatalf("re-delivery wrote or locked the row (xmin %d -> %d, xmax %d -> %d)", r.Xmin, again.Xmin, r.Xmax, again.Xmax)
	}

	if c := applyTx(t, pool, []clients.Record{b2}); c != (Counts{Stale: 1}) {
		t.Fatalf("B@v2 after A@v3: counts %+v, want stale", c)
	}
	r, _ = readRow(t, pool, "1")
	if !r.UpdatedAt.Equal(v3) || *r.Notes != notes(a3) {
		t.Fatalf("mirror ends at (%v, %q), want A at %v", r.UpdatedAt, *r.Notes, v3)
	}
}

// TestSameContentNewerVersionTombstones: a deletion delivered again under a
// newer version moves the tombstone's version forward and keeps it deleted,
// so that a live version older than the newest deletion stays refused. A
// row TombstoneMissing marked is not "the same content" as its live record
// (the mark changes the hash): the live record under a newer version brings
// it back.
func TestSameContentNewerVersionTombstones(t *testing.T) {
	t.Parallel()
	v1, v2, v3 := t0, t0.Add(time.Second), t0.Add(2*time.Second)
	for _, typed := range []bool{true, false} {
		t.Run(map[bool]string{true: "deletion with fields", false: "deletion without fields"}[typed], func(t *testing.T) {
			t.Parallel()
			pool := pgtest.DB(t)
			applyTx(t, pool, []clients.Record{unstamped(1, t0.Add(-time.Second), t0, "a")})
			del2 := unstampedDeletion(unstamped(1, v1, v1.Add(time.Minute), "a"), typed)
			del3 := unstampedDeletion(unstamped(1, v3, v3.Add(time.Minute), "a"), typed)
			if c := applyTx(t, pool, []clients.Record{del2}); c != (Counts{Updated: 1, Tombstoned: 1}) {
				t.Fatalf("deletion: %+v", c)
			}
			if c := applyTx(t, pool, []clients.Record{del3}); c != (Counts{Unchanged: 1}) {
				t.Fatalf("deletion again under a newer version: %+v", c)
			}
			r, _ := readRow(t, pool, "1")
			if r.DeletedAt == nil || !r.UpdatedAt.Equal(v3) {
				t.Fatalf("tombstone at (%v, deleted %v), want version %v, deleted", r.UpdatedAt, r.DeletedAt, v3)
			}
			if !r.DeletedAt.Equal(v1) {
				t.Errorf("deleted_at = %v, want the first deletion's %v", r.DeletedAt, v1)
			}
			// A live version between the two deletions is older than the
			// newest state: refused.
			if c := applyTx(t, pool, []clients.Record{unstamped(1, v2, v2.Add(time.Minute), "b")}); c != (Counts{Stale: 1}) {
				t.Fatalf("live version older than the newest deletion: %+v", c)
			}
			if r, _ := readRow(t, pool, "1"); r.DeletedAt == nil {
				t.Fatal("an older live version brought the row back")
			}
		})
	}

	t.Run("reconcile tombstone", func(t *testing.T) {
		t.Parallel()
		pool := pgtest.DB(t)
		applyTx(t, pool, []clients.Record{unstamped(1, v1, v1.Add(time.Minute), "a")})
		if n, err := tombstone(t, pool, TombstoneParams{Source: testSource, Resource: clients.TimeEntries, AsOf: v2}); err != nil || n != 1 {
			t.Fatalf("TombstoneMissing = %d, %v", n, err)
		}
		later := time.Now().Add(time.Hour)
		if c := applyTx(t, pool, []clients.Record{unstamped(1, v3, later, "a")}); c != (Counts{Updated: 1}) {
			t.Fatalf("live content under a newer version after a reconcile mark: %+v", c)
		}
		r, _ := readRow(t, pool, "1")
		if r.DeletedAt != nil || !r.UpdatedAt.Equal(v3) {
			t.Fatalf("row at (%v, deleted %v), want live at %v", r.UpdatedAt, r.DeletedAt, v3)
		}
	})
}

// delivery is one state of an id as a poller fetched it.
type delivery struct {
	content int // 0, 1, …; which state; negative: a deletion
	version time.Time
	fetched time.Time
	typed   bool // a deletion with fields
}

func (d delivery) record(id int64) clients.Record {
	if d.content < 0 {
		return unstampedDeletion(unstamped(id, d.version, d.fetched, strconv.Itoa(-d.content)), d.typed)
	}
	return unstamped(id, d.version, d.fetched, strconv.Itoa(d.content))
}

// unstampedHistory draws the fetches of one id from a source whose records
// carry no version stamp: each fetch returns the state at that time, under a
// version that never goes back. Often the version moves on and the content
// stays (the same content under a newer version), or goes back to an earlier
// content (A, B, A). Within one version the content only moves on to a new
// state: a state returning within the same version cannot be told from a
// re-delivery, which the write rule ignores by design.
func unstampedHistory(rt *rapid.T) []delivery {
	n := rapid.IntRange(1, 8).Draw(rt, "fetches")
	version := t0.Add(time.Duration(rapid.IntRange(0, 3).Draw(rt, "v0")) * time.Second)
	fetched := t0.Add(time.Hour)
	next := 1
	cur := delivery{content: 0}
	seen := []int{0}
	var out []delivery
	for j := range n {
		if j > 0 {
			newVersion := rapid.IntRange(0, 3).Draw(rt, "new version") > 0
			if newVersion {
				version = version.Add(time.Duration(rapid.IntRange(1, 2).Draw(rt, "dv")) * time.Second)
			}
			switch k := rapid.IntRange(0, 5).Draw(rt, "change"); {
			case k <= 2: // same content
			case k == 3 && newVersion && len(seen) > 1: // back to an earlier state
				cur.content = rapid.SampledFrom(seen).Draw(rt, "earlier")
			default: // a new state, sometimes a deletion
				cur.content = next
				if rapid.IntRange(0, 3).Draw(rt, "deleted") == 0 {
					cur.content = -next
					cur.typed = rapid.Bool().Draw(rt, "typed")
				}
				next++
				seen = append(seen, cur.content)
			}
		}
		fetched = fetched.Add(time.Duration(rapid.IntRange(1, 1000).Draw(rt, "dt")) * time.Millisecond)
		cur.version, cur.fetched = version, fetched
		out = append(out, cur)
	}
	return out
}

// TestVersionOrderConverges: random unstamped histories (the same content
// under newer versions drawn often), with duplicates, shuffled and applied
// in random pages by 1–3 concurrent appliers, end with each row at the
// content and version of its greatest (version, fetched_at) delivery,
// deleted exactly when that one is a deletion. A sampler sees no row go back
// to an older (updated_at, fetched_at).
func TestVersionOrderConverges(t *testing.T) {
	t.Parallel()
	checkOnEmptyTable(t, func(rt *rapid.T, pool *pgxpool.Pool) {
		all, last, nIDs := drawHistories(rt, 8, func(id int64) []clients.Record {
			var recs []clients.Record
			for _, d := range unstampedHistory(rt) {
				recs = append(recs, d.record(id))
			}
			return recs
		})
		all = redeliverShuffled(rt, all)
		appliers := rapid.IntRange(1, 3).Draw(rt, "appliers")
		total := applyConcurrently(rt, pool, deal(rt, all, appliers, 4), false)
		if total.Total() != int64(len(all)) || total.Inserted != int64(nIDs) {
			rt.Fatalf("counts %+v for %d records of %d ids", total, len(all), nIDs)
		}
		checkConverged(rt, pool, last, nIDs)
	})
}
