package pagewalk

import (
	"context"
	"errors"
	"fmt"
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
	// A deletion before page 2 on every walk: capped after three walks.
	w = New("x")
	_, reqs, err := walkAll(t, w, func(n int) Page {
		if n == 2 {
			l.ids = l.ids[1:]
		}
		return page(n)
	})
	if !errors.Is(err, clients.ErrCapped) || w.Walks() != 3 || reqs != 6 {
		t.Fatalf("err %v, %d walks, %d requests", err, w.Walks(), reqs)
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
