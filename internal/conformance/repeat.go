package conformance

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
)

// RepeatedPageRequests bounds the requests of one listing of a few pages
// against a server that serves its first page for ever: a listing must
// end capped (clients.ErrCapped) well within it, whatever it walks.
const RepeatedPageRequests = 40

// repeatedPageSize and repeatedRecords make every paged listing several
// pages long.
const repeatedPageSize, repeatedRecords = 2, 5

// testRepeatedPages runs every listing of every served resource, in every
// scope, against a server that ignores its paging (each way of
// fakeapi.Repeats): each must end within RepeatedPageRequests, either
// capped or complete (one page held every record).
func testRepeatedPages(t *testing.T, h Harness, caps Capabilities, served []clients.Resource) {
	scopes := caps.Scopes
	if len(scopes) == 0 {
		scopes = []string{""}
	}
	for _, scope := range scopes {
		for _, m := range fakeapi.Repeats {
			for _, r := range served {
				name := m.String() + "/" + string(r)
				if scope != "" {
					name = scope + "/" + name
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					repeatedListings(t, h, r, m, scope)
				})
			}
		}
	}
}

// repeatedListings checks each listing of r (whole, incremental, by date,
// a confirmation by id) against a fake repeating its first page as m says.
// A listing that ends well must have served what it serves from a fake
// that pages as it should.
func repeatedListings(t *testing.T, h Harness, r clients.Resource, m fakeapi.Repeat, scope string) {
	var n atomic.Int64
	f := h.New(t, Options{PageSize: repeatedPageSize, Scope: scope, OnResponse: func(int, time.Duration) { n.Add(1) }})
	for id := range int64(repeatedRecords) {
		f.Put(r, id+1, "word")
	}
	f.Tick(time.Second)
	var oldest time.Time
	for _, v := range f.Versions(r) {
		if oldest.IsZero() || v.Before(oldest) {
			oldest = v
		}
	}
	day := clients.DateOf(oldest.UTC())
	listings := map[string]func(context.Context, func(context.Context, clients.Page) error) error{
		"whole": func(ctx context.Context, fn func(context.Context, clients.Page) error) error {
			return f.Source().List(ctx, r, clients.Window{}, fn)
		},
		"incremental": func(ctx context.Context, fn func(context.Context, clients.Page) error) error {
			return f.Source().List(ctx, r, clients.Window{UpdatedSince: oldest.Add(-time.Hour), Overlap: Overlap}, fn)
		},
		"by_date": func(ctx context.Context, fn func(context.Context, clients.Page) error) error {
			return f.Source().List(ctx, r, clients.Window{From: day.AddDays(-7), To: day.AddDays(1)}, fn)
		},
	}
	if c, ok := clients.As[clients.Confirmer](f.Source()); ok {
		listings["confirm"] = func(ctx context.Context, fn func(context.Context, clients.Page) error) error {
			return c.Confirm(ctx, r, clients.Window{From: day.AddDays(-7), To: day.AddDays(1)}, []string{"424242"}, fn)
		}
	}
	// What each listing serves while the fake pages as it should.
	want := map[string]map[string]bool{}
	for what, list := range listings {
		want[what], _ = repeatedListing(t, &n, list)
	}
	f.Repeat(m)
	for what, list := range listings {
		n.Store(0)
		served, err := repeatedListing(t, &n, list)
		switch {
		case errors.Is(err, clients.ErrUnsupported):
		case errors.Is(err, context.Canceled):
			t.Errorf("%s listing of %s: still listing after %d requests of a %d-record listing (%v): a repeated page must end it capped",
				what, r, n.Load(), repeatedRecords, m)
		case errors.Is(err, clients.ErrCapped):
			if got := n.Load(); got > RepeatedPageRequests {
				t.Errorf("%s listing of %s: capped after %d requests, want at most %d", what, r, got, RepeatedPageRequests)
			}
		case err != nil:
			t.Errorf("%s listing of %s: %v, want an error wrapping clients.ErrCapped (or a complete listing)", what, r, err)
		default:
			for id := range want[what] {
				if !served[id] {
					t.Errorf("%s listing of %s ended well after %d requests but never served %s: a repeated page was taken as the rest of the listing",
						what, r, n.Load(), id)
				}
			}
		}
	}
}

// repeatedListing runs list until it ends, cancelling it past a generous
// multiple of RepeatedPageRequests (it then returns context.Canceled), and
// returns the ids it served.
func repeatedListing(t *testing.T, n *atomic.Int64, list func(context.Context, func(context.Context, clients.Page) error) error) (map[string]bool, error) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	served := map[string]bool{}
	done := make(chan error, 1)
	go func() {
		done <- list(ctx, func(_ context.Context, p clients.Page) error {
			for _, rec := range p.Records {
				served[rec.ID] = true
			}
			return nil
		})
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil && errors.Is(err, context.Canceled) && t.Context().Err() == nil && n.Load() <= 5*RepeatedPageRequests {
				return served, errors.Join(err, errors.New("cancelled early"))
			}
			return served, err
		case <-tick.C:
			if n.Load() > 5*RepeatedPageRequests {
				cancel()
			}
		}
	}
}
