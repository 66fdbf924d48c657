// Package listing owns the ways a provider walks its listings, written once
// for every provider: the read-ahead lister (the next page is requested
// while the caller writes the current one), the page-numbered walk of bare
// arrays that ends at a short page, under the page-walk defence
// (clients/pagewalk), and the checks every listing makes before it starts.
// Following links.next is Harvest's own loop, run by ReadAhead.
package listing

import (
	"context"
	"fmt"
	"slices"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/pagewalk"
)

// Check refuses what a source cannot list: a resource it is not configured
// for, and a spent-date window for anything but time entries.
func Check(source string, configured []clients.Resource, r clients.Resource, w clients.Window) error {
	if !slices.Contains(configured, r) {
		return fmt.Errorf("%s: resource %s not configured: %w", source, r, clients.ErrUnsupported)
	}
	if w.ByDate() && r != clients.TimeEntries {
		return fmt.Errorf("%s: %s by spent date: %w", source, r, clients.ErrUnsupported)
	}
	return nil
}

// Fetched is one page read ahead, or the error that ended the listing.
type Fetched struct {
	Page clients.Page
	// Last says the listing is complete with this page.
	Last bool
	Err  error
}

// ReadAhead hands fn the pages fetch produces, in order, while fetch
// already requests and decodes the next one, so that the database write
// and the HTTP round trip overlap. At most two pages are in memory. fetch
// runs on the caller's goroutine and hands each page to send (from that
// goroutine only), which reports false once the listing is abandoned (fn
// failed, or ctx ended); the page in flight then is cancelled and
// dropped. fn runs on a goroutine of its own from the first page that is
// not the last, so a listing of one page (every idle pass) costs no
// goroutine and no hand-off; a panic in fn there panics again on the
// caller's goroutine. No request outlives ReadAhead.
func ReadAhead(ctx context.Context, fn func(context.Context, clients.Page) error, fetch func(ctx context.Context, send func(Fetched) bool)) error {
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		ap     *applier
		ended  bool    // a last page or an error came with no applier running
		single Fetched // that page, applied once fetch has returned
	)
	send := func(f Fetched) bool {
		if ended || fctx.Err() != nil {
			return false
		}
		if ap == nil {
			if f.Err != nil || f.Last {
				ended, single = true, f
				return f.Err == nil
			}
			ap = startApplier(ctx, cancel, fn)
		}
		select {
		case ap.pages <- f:
			return true
		case <-ap.done:
			return false
		case <-fctx.Done():
			return false
		}
	}
	// A panic in the fetcher (a decoder, a page walk) ends this listing as
	// failed, not the process.
	ferr := func() (err error) {
		defer func() { err = clients.Recovered("fetch", recover()) }()
		fetch(fctx, send)
		return nil
	}()
	if ap != nil {
		close(ap.pages)
		<-ap.done
		if ap.panicked != nil {
			panic(ap.panicked)
		}
		switch {
		case ap.err != nil:
			return ap.err
		case ap.last:
			return nil
		case ferr != nil:
			return ferr
		}
		// The fetcher stopped without a last page: the context ended.
		return ctx.Err()
	}
	switch {
	case ferr != nil:
		return ferr
	case !ended:
		return ctx.Err()
	case single.Err != nil:
		return single.Err
	}
	return fn(ctx, single.Page)
}

// applier applies the pages of a listing of more than one page beside the
// fetcher.
type applier struct {
	pages    chan Fetched // unbuffered: the fetcher holds at most one page while fn has another
	done     chan struct{}
	err      error // fn's, or the fetcher's in order
	last     bool  // the last page was applied
	panicked error // a panic in fn, to panic with again on the caller's goroutine
}

func startApplier(ctx context.Context, cancel context.CancelFunc, fn func(context.Context, clients.Page) error) *applier {
	ap := &applier{pages: make(chan Fetched), done: make(chan struct{})}
	go func() {
		defer close(ap.done)
		defer func() {
			if perr := clients.Recovered("apply", recover()); perr != nil {
				ap.panicked = perr
				cancel()
			}
		}()
		for f := range ap.pages {
			if f.Err != nil {
				ap.err = f.Err
				return
			}
			if err := fn(ctx, f.Page); err != nil {
				ap.err = err
				cancel() // the page in flight is dropped
				return
			}
			if f.Last {
				ap.last = true
				return
			}
		}
	}()
	return ap
}

// UntilShort walks a page-numbered listing of bare arrays (no total) from
// page first until a page shorter than size, under pagewalk: a walk of
// several pages is confirmed by a second one and walked again if it
// shifted. get fetches page n, hands its records on, and returns their ids
// and how many elements the page held. maxPages caps one walk (0: none).
func UntilShort(ctx context.Context, what string, first, size, maxPages int, get func(ctx context.Context, page int) ([]string, int, error)) error {
	w := pagewalk.New(what)
	w.MaxPages = maxPages
	return w.Numbered(ctx, first, func(ctx context.Context, page int) (pagewalk.Page, error) {
		ids, n, err := get(ctx, page)
		if err != nil {
			return pagewalk.Page{}, err
		}
		return pagewalk.Page{IDs: ids, Total: -1, TotalPages: -1, Size: size, More: n >= size}, nil
	})
}

// IDs are the ids of recs, in order: what a page walk compares.
func IDs(recs []clients.Record) []string {
	ids := make([]string, len(recs))
	for i := range recs {
		ids[i] = recs[i].ID
	}
	return ids
}
