package pagewalk

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
)

// list is a live list walked by page number, size records a page.
type list struct {
	ids  []string
	size int
}

func (l *list) page(n int) Page {
	lo := min((n-1)*l.size, len(l.ids))
	hi := min(lo+l.size, len(l.ids))
	return Page{IDs: l.ids[lo:hi], Total: -1, TotalPages: -1, Size: l.size, More: hi-lo == l.size}
}

func ids(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprint(i))
	}
	return out
}

func walkAll(t *testing.T, w *Walker, get func(n int) Page) (map[string]bool, int, error) {
	t.Helper()
	seen := map[string]bool{}
	reqs := 0
	err := w.Numbered(t.Context(), 1, func(_ context.Context, n int) (Page, error) {
		reqs++
		p := get(n)
		for _, id := range p.IDs {
			seen[id] = true
		}
		return p, nil
	})
	return seen, reqs, err
}

func TestOnePageIsOneRequest(t *testing.T) {
	l := &list{ids: ids(5), size: 10}
	_, reqs, err := walkAll(t, New("x"), l.page)
	if err != nil || reqs != 1 {
		t.Fatalf("err %v, %d requests", err, reqs)
	}
}

func TestBareListIsConfirmedBySecondWalk(t *testing.T) {
	l := &list{ids: ids(25), size: 10}
	w := New("x")
	_, reqs, err := walkAll(t, w, l.page)
	if err != nil || reqs != 6 || w.Walks() != 2 {
		t.Fatalf("err %v, %d requests, %d walks", err, reqs, w.Walks())
	}
}

func TestBareListDeletionMidWalkLosesNothing(t *testing.T) {
	l := &list{ids: ids(25), size: 10}
	done := false
	seen, _, err := walkAll(t, New("x"), func(n int) Page {
		if n == 2 && !done {
			done = true
			l.ids = l.ids[1:] // "0" leaves: "10" moves to page 1
		}
		return l.page(n)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range l.ids {
		if !seen[id] {
			t.Errorf("%s lost", id)
		}
	}
}

func TestTotalsShiftIsWalkedAgainAndCappedWhenItNeverStops(t *testing.T) {
	l := &list{ids: ids(25), size: 10}
	page := func(n int) Page {
		p := l.page(n)
		p.Total, p.TotalPages = len(l.ids), (len(l.ids)+9)/10
		p.More = n < p.TotalPages
		return p
	}
	// Stable: one walk.
	w := New("x")
	if _, reqs, err := walkAll(t, w, page); err != nil || reqs != 3 {
		t.Fatalf("err %v, %d requests", err, reqs)
	}
	// A deletion before every request for page 2: each costs a rewind (page
	// 1 and 2 again) until the rewinds are spent (4), then whole walks, and
	// after three walks the listing is capped: 10 + 2 + 2 requests.
	w = New("x")
	_, reqs, err := walkAll(t, w, func(n int) Page {
		if n == 2 {
			l.ids = l.ids[1:]
		}
		return page(n)
	})
	if !errors.Is(err, clients.ErrCapped) || w.Walks() != 3 || w.Rewinds() != 4 || reqs != 14 {
		t.Fatalf("err %v, %d walks, %d rewinds, %d requests", err, w.Walks(), w.Rewinds(), reqs)
	}
}

// A live list sorted newest first, with a total: what a long first sync of a
// busy account sees. Records created at the top while the walk is between
// pages, and records deleted from pages already read, cost two requests
// each (the page before is read again), not a walk; edits in place cost
// nothing when the provider sends creation stamps. Nothing is lost.
func TestChurnDuringALongWalkCostsRewindsNotWalks(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	type rec struct {
		id      string
		created time.Time
	}
	var live []rec // newest first
	for i := 0; i < 200; i++ {
		live = append(live, rec{id: fmt.Sprint(1000 - i), created: start.Add(-time.Hour)})
	}
	next := 2000
	clock := start
	const size = 10
	page := func(n int) Page {
		lo := min((n-1)*size, len(live))
		hi := min(lo+size, len(live))
		p := Page{Total: len(live), TotalPages: (len(live) + size - 1) / size, Size: size,
			More: hi < len(live), Clock: clock, CreatedKnown: true, Newest: clock}
		for _, r := range live[lo:hi] {
			p.IDs = append(p.IDs, r.id)
			p.Versions = append(p.Versions, clock) // every record "edited" now: edits in place cost nothing
			if r.created.After(p.Created) {
				p.Created = r.created
			}
		}
		return p
	}
	w := New("x")
	reqs := 0
	seen := map[string]bool{}
	events := 0
	err := w.Numbered(t.Context(), 1, func(_ context.Context, n int) (Page, error) {
		reqs++
		clock = clock.Add(time.Second)
		switch {
		case reqs%5 == 0: // a new entry at the top
			live = append([]rec{{id: fmt.Sprint(next), created: clock}}, live...)
			next++
			events++
		case reqs%7 == 0 && n > 2: // a deletion on a page already read
			live = append(live[:3], live[4:]...)
			events++
		}
		p := page(n)
		for _, id := range p.IDs {
			seen[id] = true
		}
		return p, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range live {
		// Records created during the walk (at the top, on pages already
		// read) are the next pass's: their versions are after the cap.
		if !seen[r.id] && r.created.Before(start) {
			t.Errorf("%s lost", r.id)
		}
	}
	if w.Walks() != 1 || reqs > 20+2*events+2 {
		t.Fatalf("%d walks, %d requests for 20 pages and %d changes", w.Walks(), reqs, events)
	}
}

func TestKeysetWalkIsTakenAsItIs(t *testing.T) {
	l := &list{ids: ids(25), size: 10}
	w := New("x")
	_, reqs, err := walkAll(t, w, func(n int) Page {
		if n == 2 {
			l.ids = l.ids[1:]
		}
		p := l.page(n)
		p.Total, p.Keyset = len(l.ids), true
		return p
	})
	if err != nil || reqs != 3 || w.Walks() != 1 {
		t.Fatalf("err %v, %d requests, %d walks", err, reqs, w.Walks())
	}
}

func TestRecordChangedDuringWalkIsAShift(t *testing.T) {
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	w := New("x")
	step, _ := w.Page(t.Context(), Page{IDs: []string{"a"}, Total: 2, TotalPages: 2, Size: 1, More: true, Clock: start, Newest: start})
	if step != Next {
		t.Fatalf("page 1: %v", step)
	}
	step, err := w.Page(t.Context(), Page{IDs: []string{"b"}, Total: 2, TotalPages: 2, Size: 1, Clock: start.Add(time.Second), Newest: start})
	if err != nil || step != Again {
		t.Fatalf("page 2: %v %v", step, err)
	}
}

func TestCapsAreErrCapped(t *testing.T) {
	w := New("x")
	if _, err := w.Page(t.Context(), Page{IDs: []string{"a"}, Total: 3, TotalPages: 3, Size: 1}); !errors.Is(err, clients.ErrCapped) {
		t.Errorf("stopped before total_pages: %v", err)
	}
	l := &list{ids: ids(25), size: 10}
	w = New("x")
	w.MaxPages = 2
	if _, _, err := walkAll(t, w, l.page); !errors.Is(err, clients.ErrCapped) {
		t.Errorf("beyond MaxPages: %v", err)
	}
}

// liveList is a list sorted newest first with a total and creation stamps,
// as Harvest serves time entries; change runs before each request.
type liveList struct {
	ids     []string
	created map[string]time.Time
	clock   time.Time
	size    int
}

func newLiveList(n, size int, clock time.Time) *liveList {
	l := &liveList{created: map[string]time.Time{}, clock: clock, size: size}
	for i := range n {
		id := fmt.Sprint(10000 - i)
		l.ids = append(l.ids, id)
		l.created[id] = clock.Add(-time.Hour)
	}
	return l
}

// insert creates id at position at, a second before the next page is
// served (the last was served two seconds before it).
func (l *liveList) insert(at int, id string) {
	l.ids = append(l.ids[:at], append([]string{id}, l.ids[at:]...)...)
	l.created[id] = l.clock.Add(-time.Second)
}

func (l *liveList) page(n int) Page {
	lo := min((n-1)*l.size, len(l.ids))
	hi := min(lo+l.size, len(l.ids))
	p := Page{Total: len(l.ids), TotalPages: (len(l.ids) + l.size - 1) / l.size, Size: l.size,
		More: hi < len(l.ids), Clock: l.clock, CreatedKnown: true}
	for _, id := range l.ids[lo:hi] {
		p.IDs = append(p.IDs, id)
		p.Creations = append(p.Creations, l.created[id])
		if c := l.created[id]; c.After(p.Created) {
			p.Created = c
		}
		p.Versions = append(p.Versions, l.created[id])
	}
	return p
}

// walkLive walks l, calling change before each request (with the count of
// requests so far, from 1), and returns the ids served.
func walkLive(t *testing.T, w *Walker, l *liveList, change func(req, page int)) (map[string]bool, int, error) {
	t.Helper()
	seen := map[string]bool{}
	reqs := 0
	err := w.Numbered(t.Context(), 1, func(_ context.Context, n int) (Page, error) {
		reqs++
		l.clock = l.clock.Add(2 * time.Second)
		change(reqs, n)
		p := l.page(n)
		for _, id := range p.IDs {
			seen[id] = true
		}
		return p, nil
	})
	return seen, reqs, err
}

// Back-dated records created on pages not yet read (a busy account's
// timesheets during a long first sync) only push records down: each costs
// the page before read again, not a walk, and nothing is lost.
func TestBackdatedCreationsCostRewindsNotWalks(t *testing.T) {
	l := newLiveList(200, 10, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	before := append([]string(nil), l.ids...)
	created := 0
	w := New("x")
	seen, reqs, err := walkLive(t, w, l, func(req, _ int) {
		if req%5 == 0 {
			l.insert(len(l.ids)-5, fmt.Sprint(20000+req)) // near the end: a page not read yet
			created++
		}
	})
	if err != nil || w.Walks() != 1 || reqs > 20+2*created+3 {
		t.Fatalf("err %v, %d walks, %d requests for 20 pages and %d creations", err, w.Walks(), reqs, created)
	}
	for _, id := range before {
		if !seen[id] {
			t.Errorf("%s lost", id)
		}
	}
}

// A record created on a page not yet read while one is deleted from a page
// already read leaves the total as it was, and the deletion moved a record
// up past what was read: the walk is walked again, and nothing is lost.
func TestCreationMaskingADeletionIsWalkedAgain(t *testing.T) {
	l := newLiveList(50, 10, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	w := New("x")
	var lost string
	seen, _, err := walkLive(t, w, l, func(req, _ int) {
		if req == 3 { // between pages 2 and 3
			lost = l.ids[20]    // first of page 3: it moves up to page 2
			l.ids = l.ids[1:]   // deleted from page 1
			l.insert(40, "new") // on page 5
		}
	})
	if err != nil || w.Walks() != 2 || !seen[lost] {
		t.Fatalf("err %v, %d walks, %s served: %v", err, w.Walks(), lost, seen[lost])
	}
}

// Issue 22: the filter is sized by the total a provider announces; a huge
// one must not panic in make nor take gigabytes.
func TestBloomSizeIsCapped(t *testing.T) {
	t.Parallel()
	for _, n := range []int{-1, 1e12, 1 << 62, math.MaxInt} {
		if b := newBloom(n); len(b.bits)*8 > 16<<20 {
			t.Fatalf("newBloom(%d): %d bytes", n, len(b.bits)*8)
		}
	}
}

// A listing whose pages repeat (a cursor or page number the provider
// ignores, or two pages served in turn) ends capped within a few requests.
func TestRepeatedPagesEndCapped(t *testing.T) {
	for _, c := range []struct {
		name   string
		keyset bool
		total  int
		cycle  int // distinct pages served in turn
	}{
		{"keyset", true, -1, 1},
		{"keyset_total", true, 6, 1},
		{"keyset_cycle", true, -1, 2},
		{"numbered_cycle", false, -1, 2},
		{"keyset_empty", true, -1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := New("x")
			reqs := 0
			err := w.Numbered(t.Context(), 1, func(_ context.Context, n int) (Page, error) {
				if reqs++; reqs > 1000 {
					return Page{}, fmt.Errorf("still walking after %d requests", reqs)
				}
				p := Page{Total: c.total, TotalPages: -1, Size: 2, More: true, Keyset: c.keyset}
				if c.cycle > 0 {
					k := (n - 1) % c.cycle
					p.IDs = []string{strconv.Itoa(2 * k), strconv.Itoa(2*k + 1)}
				}
				return p, nil
			})
			if !errors.Is(err, clients.ErrCapped) || reqs > 12 {
				t.Fatalf("after %d requests: %v, want ErrCapped within 12", reqs, err)
			}
		})
	}
}
