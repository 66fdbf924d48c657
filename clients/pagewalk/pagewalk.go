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
//   - A walk with an envelope total is watched page by page. When the total
//     changes between two pages (a record was created or deleted while the
//     walk was between them), the page before is read again: whatever a
//     deletion moved up past the boundary is now at its end. That costs two
//     requests, not a walk, so a long first sync of a busy account (new
//     entries arrive at the top all the time) still finishes. The walk is
//     walked again from the first page when a record shows it moved from a
//     page already served to a later one (served again on a later page), or
//     was created during the walk on a page not yet served while the total
//     stood still (a creation only pushes records down, losing nothing, but
//     it may mask a deletion that moved one up; Page.Creations), or changed
//     during the walk when the provider sends no creation stamp, or when the
//     pages do not add up to the total, or a page before the last was short.
//   - A walk of several pages without a total (bare arrays) cannot show a
//     deletion, so it is taken only when a second walk serves the very same
//     ids in the same order.
//
// A fresh page that serves the very ids of a page already served in the
// same walk (a provider that ignores the page or cursor asked for, a next
// link that does not move) ends the listing capped at once.
//
// Otherwise it walks again, at most MaxWalks times in all, logging at Info
// on the context's logger; a listing that would not hold still, or that the
// provider cut short (fewer pages than its envelope promised, more than
// MaxPages), ends in an error wrapping clients.ErrCapped. Records served by
// every walk are handed on as they arrive: re-delivery is harmless, because
// the write is version-guarded. The Walker serves the small listings
// without a date key (projects, clients, users, tasks): a shifted walk
// costs at most MaxWalks walks plus a few pages read again, and a listing
// under steady churn fails that pass only (the next tick lists it anew).
//
// A listing ordered by a date key it can also be filtered on (Harvest time
// entries: spent_date, newest first) is walked by Anchored instead, which
// never walks again from page 1 and never reads the page before again:
//
//   - Pages are read by number while the listing holds still: a clean walk
//     costs exactly its pages, an idle pass one request.
//   - A boundary between two pages is proven when the next page starts with
//     the last record of the one before, unchanged (records created above
//     pushed the rest down): creations cost nothing but the records served
//     twice.
//   - When the total changes without such proof (a departure above moved a
//     record up past the boundary), or a page is short before the last,
//     the walk re-anchors: page 1 of the same query with its upper date
//     bound set to the last date of the last page known complete. Nothing
//     above that date can hide a record below it; the records of that date
//     are served again. Cost: one request, and the records of one date.
//   - A record created during the walk on a page not yet read may mask a
//     departure above (the total unchanged); a record served before and
//     seen again further down moved and left a gap. Either way only the page
//     boundary its stamp falls in can hide a record: the dates around that
//     boundary are read again (one request as a rule).
//   - A walk that has read past the head (today and yesterday, where new
//     records land) and saw records created there re-anchors below it once,
//     so that later creations never change the total of what is left.
//   - Pages that serve no record new to the walk, three in a row, end it
//     capped: a provider that ignores the page asked for would otherwise be
//     walked for ever, holding its pass, its lease and the source's budget.
//   - A date that alone fills the pages before a shift is paged on its own
//     under the Walker's defence; only such a day may end capped, and the
//     rest of the listing goes on first. Re-anchors above the walk's position
//     are bounded (maxUps).
//
// Not seen by either: a record that changes twice while a walk is running,
// first hiding another (moved down, or created below while one above is
// deleted) and then out of sight before the walk reaches it. The hidden
// record is read by the next listing of its dates (reconcile, backfill).
// Memory is bounded by what was served, never by a provider's count.
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
	// Created is the newest creation stamp on the page, and CreatedKnown
	// says every record on it had one. With it, a record edited in place
	// during the walk (which moves nothing) is told from one created during
	// it, and only the latter makes the walk start again.
	Created      time.Time
	CreatedKnown bool
	// Creations, when set with CreatedKnown and a Total, are the records'
	// creation stamps, in the order of IDs: a record created during the
	// walk then costs a new walk only when the total did not change while
	// it was created (see createdUnseen).
	Creations []time.Time
	// Versions, when set, are the records' versions, in the order of IDs:
	// a record changed during the walk that was served on an earlier page
	// moved down past what was read.
	Versions []time.Time
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
	// Back: read page BackTo() again and go on from there.
	Back
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
	// MaxRewinds, when above 0, caps the pages read again after a change of
	// the total (default: the listing's pages, at least 4).
	MaxRewinds int

	seed  maphash.Seed
	walks int
	// rewinds counts the pages read again after a change of the total.
	rewinds int
	cur     walk
	// prev is the fingerprint of the last whole walk without a total.
	prev *print
	// changed is the newest version that already made a walk start again:
	// seen again on the next walk (same second), it is not a new change.
	changed time.Time
}

// tick is when a page was served and the total it said.
type tick struct {
	clock time.Time
	total int
}

type print struct {
	sum uint64
	n   int
}

type walk struct {
	pages, served     int
	pos, maxPos       int   // page number of the latest page, and the furthest reached
	sizes             []int // records on each page number, as last read
	backTo            int   // set by a rewind: the page number read next
	total, totalPages int   // from the first page
	totalChanged      bool
	numbered          bool // a page-number link was followed
	start             time.Time
	ticks             []tick // each page's clock and total, in the order served
	seq               maphash.Hash
	last, this        map[uint64]struct{} // id hashes of the previous and current page
	bloom             bloom               // ids served on every page read so far (walks with a total)
	prints            map[uint64]int      // each fresh page's ids (fingerprint), with its number
	reason            string
}

// New returns a Walker for the listing named what.
func New(what string) *Walker { return &Walker{What: what} }

// Walks returns how many walks have begun.
func (w *Walker) Walks() int { return w.walks }

// BackTo is the page number to read after a Back step.
func (w *Walker) BackTo() int { return w.cur.backTo }

// Rewinds returns how many pages were read again after a change of total.
func (w *Walker) Rewinds() int { return w.rewinds }

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
	fresh := c.advance(p)
	if err := w.repeated(p, fresh); err != nil {
		return 0, err
	}
	w.checkIDs(p, fresh)
	totalChanged := c.noteTotal(p)
	w.checkChanges(p, fresh)
	if p.More && !p.Keyset {
		c.numbered = true
	}
	if totalChanged && c.numbered && c.reason == "" && c.pos > 1 {
		if step, ok := w.rewind(ctx); ok {
			return step, nil
		}
	}
	if p.More {
		return w.goOn(ctx, p)
	}
	return w.ended(ctx)
}

// advance moves the walk to the page just served and notes its size,
// clock and total; it says whether the page number is fresh (not read
// before in this walk).
func (c *walk) advance(p Page) bool {
	c.pages++
	if c.backTo > 0 {
		c.pos, c.backTo = c.backTo, 0
	} else {
		c.pos++
	}
	fresh := c.pos > c.maxPos
	c.maxPos = max(c.maxPos, c.pos)
	for len(c.sizes) < c.pos {
		c.sizes = append(c.sizes, 0)
	}
	c.sizes[c.pos-1] = len(p.IDs)
	c.served += len(p.IDs)
	c.ticks = append(c.ticks, tick{p.Clock, p.Total})
	if p.Total >= 0 && c.bloom.bits == nil {
		c.bloom = newBloom(p.Total)
	}
	return fresh
}

// repeated ends the listing capped when a fresh page serves the very ids,
// in the same order, of a page already served in this walk (an empty one
// included): the provider ignores the page asked for (a caching proxy, a
// next link that does not move), and every later page would be the same.
// A page repeated by records pushed down would need a page's worth of
// creations between two requests, twice over a walk's fingerprints: it
// costs a capped pass, retried at the next tick. Memory: 8 bytes a page.
func (w *Walker) repeated(p Page, fresh bool) error {
	c := &w.cur
	if !fresh {
		return nil // read again on purpose (Back)
	}
	var h maphash.Hash
	h.SetSeed(w.seed)
	for _, id := range p.IDs {
		h.WriteString(id)
		h.WriteByte(0)
	}
	k := h.Sum64()
	if at, ok := c.prints[k]; ok {
		return fmt.Errorf("%s: %w: page %d serves the same %d records as page %d: the provider ignores the page asked for",
			w.What, clients.ErrCapped, c.pos, len(p.IDs), at)
	}
	if c.prints == nil {
		c.prints = map[uint64]int{}
	}
	c.prints[k] = c.pos
	return nil
}

// checkIDs flags the ids of p that show the listing moved under the walk:
// served on the page before, twice on this page, or changed during the
// walk after being served on an earlier page.
func (w *Walker) checkIDs(p Page, fresh bool) {
	c := &w.cur
	// A total that changed since the last page explains ids served again
	// here (a record created above them pushed them down): the page before
	// is read again below, and this check waits for that.
	shifted := c.pages > 1 && p.Total != c.total
	clear(c.this)
	for i, id := range p.IDs {
		k := maphash.String(w.seed, id)
		if shifted && p.Total >= 0 {
			// checked on the pages read again
		} else if _, dup := c.last[k]; dup {
			c.flag("id %s served on two pages", id)
		} else if _, dup := c.this[k]; dup {
			c.flag("id %s served twice on one page", id)
		} else if fresh && i < len(p.Versions) && !c.start.IsZero() && !p.Versions[i].Before(c.start) && c.bloom.has(k) {
			// Changed during the walk and served on an earlier page: it
			// moved from a page already read to a later one, and whatever
			// it left behind moved up past a boundary. (Only changed
			// records are looked up, so the filter's rare false positive
			// costs a needless walk at most once in a long while.)
			c.flag("id %s moved down the list during the walk", id)
		}
		if !shifted {
			// A shifted page is read again in the new order; its ids as
			// served now may sit a page further down later.
			c.bloom.add(k)
		}
		c.this[k] = struct{}{}
		c.seq.WriteString(id)
		c.seq.WriteByte(0)
	}
	c.last, c.this = c.this, c.last
}

// noteTotal keeps the first page's counts and clock, and says whether the
// total changed since the page before.
func (c *walk) noteTotal(p Page) bool {
	if c.pages == 1 {
		c.total, c.totalPages, c.start = p.Total, p.TotalPages, p.Clock
		return false
	}
	if p.Total == c.total {
		return false
	}
	c.totalChanged = true
	c.total, c.totalPages = p.Total, p.TotalPages
	return true
}

// checkChanges flags a record changed (or created, when creation stamps
// are known) after the walk began. Page 1 shows what changed before it;
// from page 2 on, a change in the same second as page 1 may already be a
// change made during the walk.
func (w *Walker) checkChanges(p Page, fresh bool) {
	c := &w.cur
	if c.pages <= 1 || c.start.IsZero() {
		return
	}
	stamp, what := p.Newest, "changed"
	if p.CreatedKnown {
		// An edit in place moves nothing; a record created on a page
		// not yet read may mask a deletion (the total stays the same).
		stamp, what = p.Created, "was created"
		switch {
		case !fresh:
			stamp = time.Time{}
		case p.Total >= 0 && len(p.Creations) == len(p.IDs):
			stamp = c.createdUnseen(p.Creations)
		}
	}
	if !stamp.Before(c.start) && stamp.After(w.changed) {
		if c.reason == "" {
			w.changed = stamp
		}
		c.flag("a record %s after the walk began (%s)", what, stamp.UTC().Format(time.RFC3339))
	}
}

// rewind answers a change of total between the last two pages: whatever a
// deletion moved up past the boundary is now at the end of the page
// before. It reads that page again (and this one after it) while rewinds
// are left (ok), else flags the walk.
func (w *Walker) rewind(ctx context.Context) (Step, bool) {
	c := &w.cur
	limit := max(4, c.totalPages)
	if w.MaxRewinds > 0 {
		limit = w.MaxRewinds
	}
	if w.rewinds >= limit {
		c.flag("the total kept changing (now %d)", c.total)
		return 0, false
	}
	w.rewinds++
	c.backTo = c.pos - 1
	clear(c.last)
	zerolog.Ctx(ctx).Info().Str("listing", w.What).Int("page", c.backTo).Int("total", c.total).
		Msg("listing shifted while walking; reading the page before again")
	return Back, true
}

// goOn decides after a page that is not the last: the next page, a new
// walk when this one shifted, or the cap.
func (w *Walker) goOn(ctx context.Context, p Page) (Step, error) {
	c := &w.cur
	if !p.Keyset && p.Size > 0 && len(p.IDs) < p.Size {
		c.flag("page %d held %d of %d records but was not the last", c.pos, len(p.IDs), p.Size)
	}
	if w.MaxPages > 0 && c.pos >= w.MaxPages {
		return 0, fmt.Errorf("%s: %w: more than %d pages", w.What, clients.ErrCapped, w.MaxPages)
	}
	if c.reason != "" && c.numbered {
		return w.again(ctx, c.reason, true)
	}
	return Next, nil
}

// ended decides after the walk's last page: done, walked again, or capped.
func (w *Walker) ended(ctx context.Context) (Step, error) {
	c := &w.cur
	if c.total >= 0 && !c.totalChanged && c.totalPages > c.pos {
		return 0, fmt.Errorf("%s: %w: the provider stopped at page %d of the %d its envelope announced", w.What, clients.ErrCapped, c.pos, c.totalPages)
	}
	if !c.numbered {
		return Done, nil // one page, or cursors only: nothing can have been skipped
	}
	if c.total >= 0 {
		if n := sum(c.sizes[:c.pos]); n != c.total {
			c.flag("%d records on the pages, the total says %d", n, c.total)
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
	differs := w.prev != nil
	w.prev = fp
	if differs {
		return w.again(ctx, "the ids served differ from the previous walk's", true)
	}
	// A deletion would leave no trace in one walk: confirm with another.
	return w.again(ctx, "several pages and no total: confirming with a second walk", false)
}

// createdUnseen returns the newest of the creation stamps after the walk
// began that no change of total accounts for (zero if none). A creation
// moves records down, never up past what was read: it loses nothing by
// itself. It can mask a deletion on a page already read (which moves a
// record up past the boundary) only when both fall between the same two
// pages, leaving the total as it was; when the total changed between
// every two pages the creation may fall between, the page before was read
// again there (Back), which caught what the deletion moved up. It takes a
// record to show from its creation stamp (to the second): one committed
// seconds after its stamp could show, and move the total, in a later
// interval than its stamp says. Widening the intervals by such a delay
// would make nearly every creation cost a walk again at Harvest's pace of
// pages (several a second), which is what this avoids.
func (c *walk) createdUnseen(created []time.Time) time.Time {
	var out time.Time
	for _, s := range created {
		if s.Before(c.start) || !s.After(out) {
			continue
		}
		explained := false
		for j := 1; j < len(c.ticks); j++ {
			a, b := c.ticks[j-1], c.ticks[j]
			if a.clock.IsZero() || b.clock.IsZero() || s.Before(a.clock.Truncate(time.Second)) || s.After(b.clock) {
				continue // not created between these two pages
			}
			if a.total == b.total {
				explained = false
				break
			}
			explained = true
		}
		if !explained {
			out = s
		}
	}
	return out
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
		case step == Back:
			n = first + w.BackTo() - 2
		}
	}
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// bloom is a Bloom filter of id hashes: 24 bits and 12 probes an id, about
// one false positive in 75,000 look-ups, 3 MB for a million ids.
type bloom struct{ bits []uint64 }

const bloomProbes = 12

// bloomMaxIDs caps the filter's size whatever total a provider announces
// (4 million ids, 12 MB): a hostile total must not size an allocation, and
// past the cap the filter only answers "maybe" more often.
const bloomMaxIDs = 4_000_000

func newBloom(n int) bloom {
	n = min(max(n, 0), bloomMaxIDs)
	words := max(16, (n+n/4)*24/64+1) // room for a quarter more than the total
	return bloom{bits: make([]uint64, words)}
}

// probe returns the i-th bit position of k (double hashing).
func (b *bloom) probe(k uint64, i int) uint64 {
	h1, h2 := k, (k>>32|k<<32)|1
	return (h1 + uint64(i)*h2) % uint64(len(b.bits)*64)
}

func (b *bloom) add(k uint64) {
	if b.bits == nil {
		return
	}
	for i := range bloomProbes {
		x := b.probe(k, i)
		b.bits[x/64] |= 1 << (x % 64)
	}
}

func (b *bloom) has(k uint64) bool {
	if b.bits == nil {
		return false
	}
	for i := range bloomProbes {
		if x := b.probe(k, i); b.bits[x/64]&(1<<(x%64)) == 0 {
			return false
		}
	}
	return true
}
