// Package pagewalk is the one defence every page-numbered listing shares.
//
// A listing paged by number over a live list skips records for good: when a
// record on an already served page leaves the list (deleted, or moved out of
// the filter) every later record moves up one place, and the first record of
// the next page is never served. A Walker watches each page of a walk and
// says whether to go on, stop, or walk again from the first page:
//
//   - A walk that followed only cursor (keyset) links cannot skip: it is
//     taken as it is.
//   - A walk of one page is one atomic response: it is taken as it is, so an
//     idle pass still costs one request.
//   - A walk with an envelope total is taken when nothing says it shifted:
//     the total did not change, no id came twice, no page before the last
//     was short, no record changed after the walk began, and the ids served
//     add up to the total.
//   - A walk of several pages without a total (bare arrays) cannot show a
//     deletion, so it is taken only when a second walk serves the very same
//     ids in the same order.
//
// Otherwise it walks again, at most MaxWalks times in all, logging at Info
// on the context's logger; a listing that would not hold still, or that the
// provider cut short (fewer pages than its envelope promised, more than
// MaxPages), ends in an error wrapping clients.ErrCapped. Records served by
// every walk are handed on as they arrive: re-delivery is harmless, because
// the write is version-guarded.
package pagewalk

import (
	"context"
	"fmt"
	"hash/maphash"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
)

// DefaultMaxWalks bounds the walks of one listing: a shifted walk, its
// re-walk and one more.
const DefaultMaxWalks = 3

// Page describes one response of a walk.
type Page struct {
	// IDs are the ids served, in order.
	IDs []string
	// Total and TotalPages are the envelope's counts for the whole listing,
	// -1 when the provider sends none.
	Total, TotalPages int
	// Size is the page size asked for (0: unknown).
	Size int
	// More says that the listing goes on: a next link, or a full page of a
	// list that ends at a short one.
	More bool
	// Keyset says that the next page is addressed by a cursor, not a number.
	Keyset bool
	// Clock is the source's clock when it served the page, and Newest the
	// newest version on it, both optional. Set Newest only when versions
	// are the source's own stamps on the same clock: a record changed after
	// the walk began may have moved within the list.
	Clock, Newest time.Time
}

// Step is what to do after a page.
type Step int

const (
	// Next asks for the next page of this walk.
	Next Step = iota + 1
	// Done: the listing is complete, this page was its last.
	Done
	// Again: walk again from the first page.
	Again
)

// Walker follows the walks of one listing. It is not safe for concurrent use.
type Walker struct {
	// What names the listing in logs and errors.
	What string
	// MaxWalks defaults to DefaultMaxWalks.
	MaxWalks int
	// MaxPages, when above 0, caps the pages of one walk: a listing that
	// needs more fails with ErrCapped.
	MaxPages int

	seed  maphash.Seed
	walks int
	cur   walk
	// prev is the fingerprint of the last whole walk without a total.
	prev *print
	// changed is the newest version that already made a walk start again:
	// seen again on the next walk (same second), it is not a new change.
	changed time.Time
}

type print struct {
	sum uint64
	n   int
}

type walk struct {
	pages, served     int
	total, totalPages int // from the first page
	totalChanged      bool
	numbered          bool // a page-number link was followed
	start             time.Time
	seq               maphash.Hash
	last, this        map[uint64]struct{} // id hashes of the previous and current page
	reason            string
}

// New returns a Walker for the listing named what.
func New(what string) *Walker { return &Walker{What: what} }

// Walks returns how many walks have begun.
func (w *Walker) Walks() int { return w.walks }

func (w *Walker) begin() {
	if w.walks == 0 {
		w.seed = maphash.MakeSeed()
	}
	w.walks++
	last, this := w.cur.last, w.cur.this
	w.cur = walk{total: -1, totalPages: -1, last: last, this: this}
	w.cur.seq.SetSeed(w.seed)
	if w.cur.last == nil {
		w.cur.last, w.cur.this = map[uint64]struct{}{}, map[uint64]struct{}{}
	}
	clear(w.cur.last)
}

func (c *walk) flag(format string, args ...any) {
	if c.reason == "" {
		c.reason = fmt.Sprintf(format, args...)
	}
}

// Page records a page just served (and already handed on) and says what to
// do next. A non-nil error wraps clients.ErrCapped: the listing ends there.
func (w *Walker) Page(ctx context.Context, p Page) (Step, error) {
	if w.walks == 0 {
		w.begin()
	}
	c := &w.cur
	c.pages++
	c.served += len(p.IDs)
	clear(c.this)
	for _, id := range p.IDs {
		k := maphash.String(w.seed, id)
		if _, dup := c.last[k]; dup {
			c.flag("id %s served on two pages", id)
		} else if _, dup := c.this[k]; dup {
			c.flag("id %s served twice on one page", id)
		}
		c.this[k] = struct{}{}
		c.seq.WriteString(id)
		c.seq.WriteByte(0)
	}
	c.last, c.this = c.this, c.last
	if c.pages == 1 {
		c.total, c.totalPages, c.start = p.Total, p.TotalPages, p.Clock
	} else if p.Total != c.total {
		c.totalChanged = true
		c.flag("the total went from %d to %d", c.total, p.Total)
		c.total, c.totalPages = p.Total, p.TotalPages
	}
	// Page 1 shows what changed before it; from page 2 on, a change in the
	// same second as page 1 may already be a change made during the walk.
	if c.pages > 1 && !c.start.IsZero() && !p.Newest.Before(c.start) && p.Newest.After(w.changed) {
		if c.reason == "" {
			w.changed = p.Newest
		}
		c.flag("a record changed after the walk began (version %s)", p.Newest.UTC().Format(time.RFC3339))
	}
	if p.More {
		if !p.Keyset {
			c.numbered = true
			if p.Size > 0 && len(p.IDs) < p.Size {
				c.flag("page %d held %d of %d records but was not the last", c.pages, len(p.IDs), p.Size)
			}
		}
		if w.MaxPages > 0 && c.pages >= w.MaxPages {
			return 0, fmt.Errorf("%s: %w: more than %d pages", w.What, clients.ErrCapped, w.MaxPages)
		}
		if c.reason != "" && c.numbered {
			return w.again(ctx, c.reason, true)
		}
		return Next, nil
	}

	// The walk ended here.
	if c.total >= 0 && !c.totalChanged && c.totalPages > c.pages {
		return 0, fmt.Errorf("%s: %w: the provider stopped at page %d of the %d its envelope announced", w.What, clients.ErrCapped, c.pages, c.totalPages)
	}
	if !c.numbered {
		return Done, nil // one page, or cursors only: nothing can have been skipped
	}
	if c.total >= 0 {
		if c.served != c.total {
			c.flag("%d records served, the total says %d", c.served, c.total)
		}
		if c.reason != "" {
			return w.again(ctx, c.reason, true)
		}
		return Done, nil
	}
	if c.reason != "" {
		return w.again(ctx, c.reason, true)
	}
	fp := &print{sum: c.seq.Sum64(), n: c.served}
	if w.prev != nil && *w.prev == *fp {
		return Done, nil
	}
	shifted := w.prev != nil
	w.prev = fp
	if shifted {
		return w.again(ctx, "the ids served differ from the previous walk's", true)
	}
	// A deletion would leave no trace in one walk: confirm with another.
	return w.again(ctx, "several pages and no total: confirming with a second walk", false)
}

// again starts the next walk, or ends the listing when the walks are spent.
func (w *Walker) again(ctx context.Context, reason string, shifted bool) (Step, error) {
	max := w.MaxWalks
	if max <= 0 {
		max = DefaultMaxWalks
	}
	if w.walks >= max {
		return 0, fmt.Errorf("%s: %w: still shifting after %d walks (%s)", w.What, clients.ErrCapped, w.walks, reason)
	}
	log := zerolog.Ctx(ctx)
	ev := log.Debug()
	msg := "listing has several pages and no total; walking it again to confirm it held still"
	if shifted {
		ev, msg = log.Info(), "listing shifted while walking; walking it again"
	}
	ev.Str("listing", w.What).Int("walk", w.walks+1).Str("reason", reason).Msg(msg)
	w.begin()
	return Again, nil
}

// Numbered walks a page-numbered listing from page first until the Walker
// is done with it. get fetches page n, hands its records on, and describes
// the page.
func (w *Walker) Numbered(ctx context.Context, first int, get func(ctx context.Context, n int) (Page, error)) error {
	for n := first; ; n++ {
		p, err := get(ctx, n)
		if err != nil {
			return err
		}
		step, err := w.Page(ctx, p)
		switch {
		case err != nil:
			return err
		case step == Done:
			return nil
		case step == Again:
			n = first - 1
		}
	}
}
