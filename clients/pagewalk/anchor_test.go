package pagewalk

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"pgregory.net/rapid"

	"github.com/tidemarkhq/tidemark/clients"
)

// dated is a record of a live list ordered by date (newest first, then id
// descending), as Harvest lists time entries.
type dated struct {
	id               int
	day              clients.Date
	version, created time.Time
}

// datedList is a live dated list served by page number with an envelope
// total, under a clock that moves one second a request.
type datedList struct {
	recs  map[int]dated
	size  int
	clock time.Time
	next  int
	reqs  int
	// touched are the records changed (or created) since the walk began:
	// the churn changes each at most once (see TestAnchoredWalkFinishes…).
	touched map[int]bool
}

var today = clients.Date{Year: 2026, Month: 3, Day: 10}

func newDatedList(n, days, size int, spread func(i int) int) *datedList {
	l := &datedList{recs: map[int]dated{}, touched: map[int]bool{}, size: size, clock: today.Time().Add(12 * time.Hour)}
	old := l.clock.Add(-48 * time.Hour)
	for i := range n {
		l.next++
		l.recs[l.next] = dated{id: l.next, day: today.AddDays(-spread(i) % days), version: old, created: old}
	}
	return l
}

func (l *datedList) query(q Query) KeyedPage {
	l.reqs++
	l.clock = l.clock.Add(time.Second)
	var in []dated
	for _, r := range l.recs {
		if (!q.From.IsZero() && r.day.Before(q.From)) || (!q.To.IsZero() && r.day.After(q.To)) {
			continue
		}
		in = append(in, r)
	}
	slices.SortFunc(in, func(a, b dated) int {
		if c := b.day.Time().Compare(a.day.Time()); c != 0 {
			return c
		}
		return cmp.Compare(b.id, a.id)
	})
	pages := max((len(in)+l.size-1)/l.size, 1)
	lo := min((q.Page-1)*l.size, len(in))
	hi := min(lo+l.size, len(in))
	p := KeyedPage{Total: len(in), TotalPages: pages, Size: l.size, More: q.Page < pages, Clock: l.clock}
	for _, r := range in[lo:hi] {
		p.IDs = append(p.IDs, strconv.Itoa(r.id))
		p.Keys = append(p.Keys, r.day)
		p.Versions = append(p.Versions, r.version)
		p.Created = append(p.Created, r.created)
	}
	return p
}

// churn applies n random changes, stamped with the next request's second:
// creations (today's, or back-dated), moves to another day, edits in
// place and deletions.
func (l *datedList) churn(t *rapid.T, n, days int) {
	at := l.clock.Add(time.Second)
	for range n {
		live := slices.Sorted(func(yield func(int) bool) {
			for id := range l.recs {
				if l.touched[id] {
					continue
				}
				if !yield(id) {
					return
				}
			}
		})
		kind := rapid.IntRange(0, 4).Draw(t, "kind")
		if len(live) == 0 {
			kind = 0
		}
		switch kind {
		case 0, 1: // creation: today's, or back-dated
			day := today
			if kind == 1 {
				day = today.AddDays(-rapid.IntRange(0, days-1).Draw(t, "day"))
			}
			l.next++
			l.recs[l.next] = dated{id: l.next, day: day, version: at, created: at}
			l.touched[l.next] = true
		case 2: // a move to another day
			r := l.recs[rapid.SampledFrom(live).Draw(t, "moved")]
			r.day, r.version = today.AddDays(-rapid.IntRange(0, days-1).Draw(t, "to")), at
			l.recs[r.id] = r
			l.touched[r.id] = true
			if testing.Verbose() {
				t.Logf("move %d to %s", r.id, r.day)
			}
		case 3: // an edit in place
			r := l.recs[rapid.SampledFrom(live).Draw(t, "edited")]
			r.version = at
			l.recs[r.id] = r
			l.touched[r.id] = true
		case 4:
			id := rapid.SampledFrom(live).Draw(t, "deleted")
			if testing.Verbose() {
				t.Logf("delete %d (%s)", id, l.recs[id].day)
			}
			delete(l.recs, id)
			l.touched[id] = true
		}
	}
}

// Whatever arrives between two page requests (creations, moves, edits,
// deletions, several a page), a first sync, a backfill and a reconcile
// walk finish, and every record live at the end that was not changed while
// they walked was served in its final state (what changed meanwhile is newer
// than the walk's start: the next incremental pass takes it). Only a day
// that alone holds more than a page may end capped. Each record changes at
// most once during a walk: a record that hides another (moved down, or
// created below while one above is deleted) and changes again out of sight
// before the walk reaches it leaves no trace any listing by page number
// can see (the package doc says so).
func TestAnchoredWalkFinishesAndMissesNothingUnderChurn(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		size := rapid.IntRange(5, 40).Draw(t, "size")
		days := rapid.IntRange(2, 30).Draw(t, "days")
		n := rapid.IntRange(0, 400).Draw(t, "records")
		rate := rapid.IntRange(0, 4).Draw(t, "changes per page")
		kind := rapid.SampledFrom([]string{"first sync", "backfill"}).Draw(t, "kind")
		l := newDatedList(n, days, size, func(i int) int { return i * 7 })
		var from, to clients.Date
		if kind == "backfill" {
			from, to = today.AddDays(-rapid.IntRange(0, days).Draw(t, "from")), today
		}
		spans := []Span{{From: from, To: to}}
		start := l.clock.Add(time.Second)
		served := map[string]time.Time{}
		a := &Anchored{What: "entries", Head: today.AddDays(-1)}
		ctx := context.Background()
		if testing.Verbose() {
			ctx = zerolog.New(zerolog.NewTestWriter(t)).WithContext(ctx)
		}
		err := a.Walk(ctx, spans, func(_ context.Context, q Query) (KeyedPage, error) {
			if l.reqs > 0 {
				l.churn(t, rapid.IntRange(0, rate).Draw(t, "changes"), days)
			}
			if l.reqs > 100*(n/size+3) {
				return KeyedPage{}, fmt.Errorf("%d requests: the walk does not end", l.reqs)
			}
			p := l.query(q)
			if testing.Verbose() {
				t.Logf("q %+v total %d ids %v keys %v", q, p.Total, p.IDs, p.Keys)
			}
			for i, id := range p.IDs {
				served[id] = p.Versions[i]
			}
			return p, nil
		})
		if err != nil && !errors.Is(err, clients.ErrCapped) {
			t.Fatal(err)
		}
		perDay := map[clients.Date]int{}
		for _, r := range l.recs {
			perDay[r.day]++
		}
		for _, r := range l.recs {
			if r.version.Before(start) && (from.IsZero() || !r.day.Before(from)) && (to.IsZero() || !r.day.After(to)) {
				if v, ok := served[strconv.Itoa(r.id)]; !ok || !v.Equal(r.version) {
					if err != nil && perDay[r.day] > size {
						continue // its day was capped
					}
					t.Fatalf("record %d (dated %s, unchanged since the walk began) was never served; err = %v", r.id, r.day, err)
				}
			}
		}
		if err != nil {
			big := false
			for _, c := range perDay {
				big = big || c > size
			}
			if !big {
				t.Fatalf("capped although no day holds more than a page: %v", err)
			}
		}
	})
}

// A clean walk costs exactly its pages; a listing of one page, one request.
func TestAnchoredCleanWalkCostsItsPages(t *testing.T) {
	for _, c := range []struct{ n, want int }{{1000, 10}, {80, 1}} {
		l := newDatedList(c.n, 365, 100, func(i int) int { return i*7 + 1 })
		a := &Anchored{What: "entries", Head: today.AddDays(-1)}
		err := a.Walk(t.Context(), []Span{{}}, func(_ context.Context, q Query) (KeyedPage, error) {
			return l.query(q), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if l.reqs != c.want || a.Reanchors != 0 {
			t.Errorf("%d records: %d requests, %d re-anchors; want %d, 0", c.n, l.reqs, a.Reanchors, c.want)
		}
	}
}

// A day (or boundary) read on its own is filtered by date: a record moved
// into it from another day on a page not yet read arrives as a creation
// does, and masks a deletion above (the total unchanged), although its
// creation stamp is old. Found by the property test (seed
// 13632260493292101293): a day's page boundary stayed open across boundary
// reads nested in it, while one record of the day was deleted and another
// moved in below.
func TestAnchoredDayCatchesAMoveInMaskingADeletion(t *testing.T) {
	for _, read := range []string{"day", "boundary"} {
		t.Run(read, func(t *testing.T) {
			d := today.AddDays(-3)
			l := &datedList{recs: map[int]dated{}, touched: map[int]bool{}, size: 3, clock: today.Time().Add(12 * time.Hour)}
			old := l.clock.Add(-48 * time.Hour)
			for id := 10; id <= 17; id++ {
				l.recs[id] = dated{id: id, day: d, version: old, created: old}
			}
			l.recs[5] = dated{id: 5, day: d.AddDays(-1), version: old, created: old}
			got := map[string]bool{}
			a := &Anchored{What: "entries", served: map[string]served{}, changed: map[string]time.Time{}}
			get := func(_ context.Context, q Query) (KeyedPage, error) {
				if l.reqs == 1 {
					// Between pages 1 and 2: 17 (served) leaves, 5 moves in
					// below; 14 moves up to page 1, already read.
					delete(l.recs, 17)
					r := l.recs[5]
					r.day, r.version = d, l.clock.Add(time.Second)
					l.recs[5] = r
				}
				p := l.query(q)
				for _, id := range p.IDs {
					got[id] = true
				}
				return p, nil
			}
			var err error
			if read == "day" {
				err = a.day(t.Context(), d, get)
			} else {
				a.hist = []mark{{last: d}, {first: d, last: d.AddDays(-1)}}
				err = a.boundary(t.Context(), 1, get)
			}
			if err != nil || a.capped != nil {
				t.Fatal(err, a.capped)
			}
			for id := 10; id <= 16; id++ {
				if !got[strconv.Itoa(id)] {
					t.Errorf("record %d (unchanged) was never served", id)
				}
			}
		})
	}
}

// An edit in place of a record already served at that date, during a day
// read, moves nothing: the day costs its pages, not a walk again.
func TestAnchoredDayEditInPlaceCostsNothing(t *testing.T) {
	d := today.AddDays(-3)
	l := &datedList{recs: map[int]dated{}, touched: map[int]bool{}, size: 3, clock: today.Time().Add(12 * time.Hour)}
	old := l.clock.Add(-48 * time.Hour)
	a := &Anchored{What: "entries", served: map[string]served{}, changed: map[string]time.Time{}}
	for id := 10; id <= 17; id++ {
		l.recs[id] = dated{id: id, day: d, version: old, created: old}
		a.served[strconv.Itoa(id)] = served{key: d, clock: l.clock}
	}
	err := a.day(t.Context(), d, func(_ context.Context, q Query) (KeyedPage, error) {
		if l.reqs == 1 {
			r := l.recs[11] // on page 2, not read yet
			r.version = l.clock.Add(time.Second)
			l.recs[11] = r
		}
		return l.query(q), nil
	})
	if err != nil || l.reqs != 3 {
		t.Errorf("%d requests (err %v); want 3", l.reqs, err)
	}
}

// A listing that ignores the page asked for (a caching proxy, a next link
// that does not move) serves its first page for ever: the walk ends capped
// within a few requests, whatever the head, the bounds or the paging
// (numbers or a cursor). Before issue 30 a "next" page identical to the
// one before counted as contiguous and the walk never ended.
func TestAnchoredRepeatedPageEndsCapped(t *testing.T) {
	for _, c := range []struct {
		name   string
		head   bool
		span   Span
		keyset bool
	}{
		{"open", false, Span{}, false},
		{"head", true, Span{}, false},
		{"bounded", true, Span{From: today.AddDays(-30), To: today}, false},
		{"keyset", false, Span{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newDatedList(4, 3, 2, func(i int) int { return i })
			a := &Anchored{What: "entries"}
			if c.head {
				a.Head = today.AddDays(-1)
			}
			const giveUp = 1000
			err := a.Walk(t.Context(), []Span{c.span}, func(_ context.Context, q Query) (KeyedPage, error) {
				if l.reqs >= giveUp {
					return KeyedPage{}, fmt.Errorf("still walking after %d requests", l.reqs)
				}
				q.Page = 1 // the page asked for is ignored
				p := l.query(q)
				p.More, p.Keyset = true, c.keyset
				return p, nil
			})
			if !errors.Is(err, clients.ErrCapped) {
				t.Fatalf("after %d requests: %v, want ErrCapped", l.reqs, err)
			}
			// A cursor's repeat reads as a record served again: the walk
			// re-anchors date by date, each date's page capped on its own
			// (a few requests a record at most).
			if l.reqs > 20 {
				t.Errorf("capped after %d requests of a 4-record listing, want at most 20", l.reqs)
			}
			if len(a.hist) > l.reqs {
				t.Errorf("%d marks for %d requests", len(a.hist), l.reqs)
			}
		})
	}
}
