package listing_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/provider/listing"
)

// pages fetches n pages (numbered from 1), the last marked, and counts the
// fetches that were still running when ReadAhead returned.
func pages(n int, running *atomic.Int32) func(context.Context, func(listing.Fetched) bool) {
	return func(ctx context.Context, send func(listing.Fetched) bool) {
		running.Add(1)
		defer running.Add(-1)
		for i := 1; i <= n; i++ {
			if !send(listing.Fetched{Page: clients.Page{Number: i}, Last: i == n}) {
				return
			}
		}
	}
}

func TestReadAheadAppliesEveryPageInOrder(t *testing.T) {
	for _, n := range []int{1, 2, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var running atomic.Int32
			var got []int
			err := listing.ReadAhead(context.Background(), func(_ context.Context, p clients.Page) error {
				got = append(got, p.Number)
				return nil
			}, pages(n, &running))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != n || got[0] != 1 || got[n-1] != n {
				t.Fatalf("applied %v, want 1..%d", got, n)
			}
			if running.Load() != 0 {
				t.Fatal("a fetch outlived ReadAhead")
			}
		})
	}
}

// goid is the calling goroutine's number, from its stack's header.
func goid() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	return strings.Fields(string(b))[1]
}

// An idle pass lists one page: the fetch and the page's write both run on
// the caller's goroutine, with no goroutine and no hand-off between them.
// A longer listing fetches on the caller's goroutine too.
func TestReadAheadOfOnePageStaysOnTheCallersGoroutine(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			caller := goid()
			var fetcher, applier string
			var running atomic.Int32
			err := listing.ReadAhead(context.Background(), func(context.Context, clients.Page) error {
				applier = goid()
				return nil
			}, func(ctx context.Context, send func(listing.Fetched) bool) {
				fetcher = goid()
				pages(n, &running)(ctx, send)
			})
			if err != nil {
				t.Fatal(err)
			}
			if fetcher != caller || (n == 1) != (applier == caller) {
				t.Fatalf("caller %s, fetch %s, page write %s", caller, fetcher, applier)
			}
		})
	}
}

func TestReadAheadStopsAtTheFirstFailure(t *testing.T) {
	boom := errors.New("boom")
	for _, n := range []int{1, 2, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var running atomic.Int32
			applied := 0
			err := listing.ReadAhead(context.Background(), func(_ context.Context, p clients.Page) error {
				applied++
				if p.Number == 1 {
					return boom
				}
				return nil
			}, pages(n, &running))
			if !errors.Is(err, boom) || applied != 1 || running.Load() != 0 {
				t.Fatalf("err %v after %d pages applied (%d fetches running), want boom after 1", err, applied, running.Load())
			}
		})
	}
}

// The fetcher's error comes after the pages before it, in order.
func TestReadAheadReturnsTheFetchersErrorInOrder(t *testing.T) {
	gone := errors.New("503")
	for _, before := range []int{0, 1, 3} {
		t.Run(fmt.Sprint(before), func(t *testing.T) {
			applied := 0
			err := listing.ReadAhead(context.Background(), func(context.Context, clients.Page) error {
				applied++
				return nil
			}, func(_ context.Context, send func(listing.Fetched) bool) {
				for i := 1; i <= before; i++ {
					send(listing.Fetched{Page: clients.Page{Number: i}})
				}
				send(listing.Fetched{Err: gone})
			})
			if !errors.Is(err, gone) || applied != before {
				t.Fatalf("err %v after %d pages, want 503 after %d", err, applied, before)
			}
		})
	}
}

func TestReadAheadEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	err := listing.ReadAhead(ctx, func(_ context.Context, p clients.Page) error {
		if p.Number == 2 {
			cancel()
		}
		return nil
	}, func(ctx context.Context, send func(listing.Fetched) bool) {
		for i := 1; ; i++ {
			if !send(listing.Fetched{Page: clients.Page{Number: i}}) {
				return
			}
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}

// A panic in the fetcher (a decoder) fails the listing; a panic in fn
// reaches the caller's goroutine, where the pass recovers it, whichever
// goroutine applied the page.
func TestReadAheadPanics(t *testing.T) {
	var running atomic.Int32
	err := listing.ReadAhead(context.Background(), func(context.Context, clients.Page) error { return nil },
		func(context.Context, func(listing.Fetched) bool) { panic("decoder") })
	if pe, ok := errors.AsType[*clients.PanicError](err); !ok || !strings.Contains(fmt.Sprint(pe.Value), "decoder") {
		t.Fatalf("fetch panic: %v, want a PanicError", err)
	}
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			defer func() {
				if v := recover(); v == nil || !strings.Contains(fmt.Sprint(v), "apply") {
					t.Fatalf("recovered %v, want the page write's panic", v)
				}
				if running.Load() != 0 {
					t.Fatal("a fetch outlived ReadAhead")
				}
			}()
			_ = listing.ReadAhead(context.Background(), func(_ context.Context, p clients.Page) error {
				if p.Number == n {
					panic("apply")
				}
				return nil
			}, pages(n, &running))
			t.Fatal("no panic")
		})
	}
}
