package pagewalk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
)

// Span is a range of keys (dates), both ends inclusive; a zero end is open.
type Span struct{ From, To clients.Date }

// Query asks for page Page of the listing with keys in From..To (a zero
// end: open), in the listing's order (newest key first).
type Query struct {
	From, To clients.Date
	Page     int
}

// KeyedPage describes one response of a listing ordered by a date key,
// newest first (Harvest time entries by spent_date, then id).
type KeyedPage struct {
	// IDs, Keys and Versions are each record's id, key and version, in
	// order. Created, when set, are the records' creation stamps.
	IDs      []string
	Keys     []clients.Date
	Versions []time.Time
	Created  []time.Time
	// Total and TotalPages are the envelope's counts (-1: none).
	Total, TotalPages int
	// Size is the page size served; More says a next page exists; Keyset
	// that it is addressed by a cursor (such a walk cannot skip).
	Size   int
	More   bool
	Keyset bool
	// Clock is the source's clock when it served the page.
	Clock time.Time
}

// Anchored walks a listing ordered by a date key that it can also filter
// on, by re-anchoring instead of walking again: see the package doc.
type Anchored struct {
	// What names the listing in logs and errors.
	What string
	// Head, when set, is where new records land (today's, and yesterday's
	// for the zones behind): once records were seen pushed down (created
	// above), a walk that read down past the head goes on from page 1 below
	// it (one request), so that records created there afterwards never
	// change the total of what is left to read, and a departure below
	// always shows in it. The head was read whole before.
	Head clients.Date
	// Reanchors counts the walks continued from an anchor, Days the days
	// paged on their own, Patches the page boundaries read again by date.
	Reanchors, Days, Patches int
	// capped collects the ranges that would not hold still.
	capped error
	// The span being walked: its pages, where each record was last served,
	// its first page's clock, the re-anchors above the walk, and the clock
	// of the latest page. All bounded by what was served.
	hist   []mark
	served map[string]served
	// changed holds the changes (id and version) that already made the walk
	// re-anchor: the same change never costs twice.
	changed map[string]time.Time
	start   time.Time
	ups     int
	now     time.Time
}

// mark is what a span's walk keeps of each page served, in the order
// served: the source's clock, the page's last key, and whether the
// boundary before it was taken on trust (no overlap, total unchanged).
type mark struct {
	clock       time.Time
	first, last clients.Date
	trust       bool
}

// served is where a record was last served: the page (index into hist),
// its key then, and the clock of the response that served it.
type served struct {
	at    int
	key   clients.Date
	clock time.Time
}

// maxUps bounds the re-anchors of a span above the walk's position: each
// follows one change (a creation, a move) that may have hidden a record
// above; past it, a span still unsettled ends capped.
const maxUps = 64

// Walk walks spans in order. get fetches the page a Query asks for, hands
// its records on, and describes it. Within a span, pages are walked by
// number while the listing holds still; on any sign of a shift the walk
// goes on from page 1 of the same span with its upper bound set to the key
// of the last page known complete (re-anchoring). A day that would not hold
// still is paged on its own under the Walker's defence; one still unstable
// ends the listing with an error wrapping clients.ErrCapped, but only
// after the rest of the span and the later spans were walked.
func (a *Anchored) Walk(ctx context.Context, spans []Span, get func(context.Context, Query) (KeyedPage, error)) error {
	var capped error
	for _, sp := range spans {
		a.hist, a.served, a.changed, a.start, a.ups = nil, map[string]served{}, map[string]time.Time{}, time.Time{}, 0
		to := sp.To
		for {
			anchor, reason, err := a.segment(ctx, sp.From, to, get)
			if err != nil {
				return err
			}
			if anchor.IsZero() {
				break // the span is complete
			}
			if to.IsZero() || anchor != to {
				if !to.IsZero() && anchor.After(to) {
					if a.ups++; a.ups > maxUps {
						capped = errors.Join(capped, fmt.Errorf("%s: %w: %s..%s kept shifting above the walk (%s)", a.What, clients.ErrCapped, sp.From, sp.To, reason))
						break
					}
				}
				a.Reanchors++
				zerolog.Ctx(ctx).Debug().Str("listing", a.What).Stringer("to", anchor).Str("reason", reason).
					Msg("listing shifted while walking; going on from the last date known complete")
				to = anchor
				continue
			}
			// No progress: the day at the upper bound alone fills the pages
			// before the shift. Page it on its own, then go on below it.
			a.Days++
			if err := a.day(ctx, anchor, get); err != nil {
				if !errors.Is(err, clients.ErrCapped) {
					return err
				}
				zerolog.Ctx(ctx).Warn().Err(err).Str("listing", a.What).Stringer("day", anchor).
					Msg("a day would not hold still; the rest of the listing goes on")
				capped = errors.Join(capped, err)
			}
			if !sp.From.IsZero() && !anchor.After(sp.From) {
				break
			}
			to = anchor.AddDays(-1)
			// The day was read apart: its pages are no anchor for later
			// changes, which start from below it.
			a.hist = append(a.hist, mark{clock: a.now, last: to})
		}
	}
	return errors.Join(capped, a.capped)
}

// segment walks page 1, 2, … of from..to. It returns the zero Date when
// the walk reached the last page with every boundary sound, else the key
// to go on from (records with that key are served again).
func (a *Anchored) segment(ctx context.Context, from, to clients.Date, get func(context.Context, Query) (KeyedPage, error)) (clients.Date, string, error) {
	s := &seg{a: a, from: from, to: to, base: len(a.hist), here: map[string]int{}, total: -1}
	for n := 1; ; n++ {
		p, err := get(ctx, Query{From: from, To: to, Page: n})
		if err != nil {
			return clients.Date{}, "", err
		}
		if err := a.inBounds(n, p, from, to); err != nil {
			return clients.Date{}, "", err
		}
		if err := s.stuck(n, p); err != nil {
			return clients.Date{}, "", err
		}
		s.anchor, s.reason = clients.Date{}, ""
		m := s.boundary(n, p)
		last := s.mark(p, m)
		s.moved(n, p, m)
		patch := a.suspects(p, m, !from.IsZero())
		s.note(p)
		if err := a.patch(ctx, patch, get); err != nil {
			return clients.Date{}, "", err
		}
		if err := s.short(n, p, last); err != nil {
			return clients.Date{}, "", err
		}
		if s.anchor.IsZero() && s.grew && !a.Head.IsZero() && p.More && !p.Keyset && (to.IsZero() || !to.Before(a.Head)) && last.Before(a.Head) {
			s.flag(last, "below the head (%s): going on without it", a.Head)
		}
		if !s.anchor.IsZero() {
			if !from.IsZero() && s.anchor.Before(from) {
				return clients.Date{}, "", fmt.Errorf("%s: %w: no date to go on from (%s)", a.What, clients.ErrCapped, s.reason)
			}
			return s.anchor, s.reason, nil
		}
		if !p.More {
			if p.Total >= 0 && !p.Keyset && p.TotalPages > n {
				return clients.Date{}, "", fmt.Errorf("%s: %w: the provider stopped at page %d of the %d its envelope announced", a.What, clients.ErrCapped, n, p.TotalPages)
			}
			return clients.Date{}, "", nil
		}
		s.prev = p
	}
}

// seg is one walk of a span's pages from page 1 (segment).
type seg struct {
	a        *Anchored
	from, to clients.Date
	base     int            // the first mark of this walk in a.hist
	here     map[string]int // ids served by this walk, with the mark of their page
	prev     KeyedPage
	total    int
	grew     bool // a boundary showed records pushed down: the head is growing
	trust    bool // the boundary before the latest page was taken on trust
	still    int  // pages in a row that served no record new to this walk
	// anchor and reason: the key to go on from after this page, and why
	// (the highest flagged wins).
	anchor clients.Date
	reason string
}

// maxStill bounds the pages in a row that serve no record new to a walk:
// a provider that ignores the page asked for (a caching proxy, a next link
// that does not move) serves the first page for ever, a page fully pushed
// down by creations takes a page's worth of them between two requests.
const maxStill = 3

func (s *seg) flag(key clients.Date, format string, args ...any) {
	if s.anchor.IsZero() || key.After(s.anchor) {
		s.anchor, s.reason = key, fmt.Sprintf(format, args...)
	}
}

// stuck ends the walk capped when too many pages in a row served nothing
// new (maxStill): bounded by what was served, not by a provider's count,
// so that no repeating listing keeps its pass, its lease and the source's
// budget for ever, or grows the marks by a page each request.
func (s *seg) stuck(n int, p KeyedPage) error {
	if n == 1 {
		return nil
	}
	for _, id := range p.IDs {
		if _, ok := s.here[id]; !ok {
			s.still = 0
			return nil
		}
	}
	if s.still++; s.still >= maxStill && p.More {
		return fmt.Errorf("%s: %w: pages %d to %d served no record not served before in this walk: the provider ignores the page asked for",
			s.a.What, clients.ErrCapped, n-s.still+1, n)
	}
	return nil
}

// boundary checks the boundary between the page before and p: it returns
// how many records of the page before p serves again at its top (pushed
// down, m), and flags a boundary that cannot be proven.
func (s *seg) boundary(n int, p KeyedPage) int {
	a := s.a
	cur := len(a.hist)
	if n == 1 {
		s.total = p.Total
	}
	m := 0
	s.trust = false
	if n > 1 && !s.prev.Keyset {
		prev := s.prev
		m = overlap(prev, p)
		switch {
		case m > 0:
			// Contiguous: whatever changed above pushed records down.
			s.grew = true
		case p.Total != s.total:
			// A record left or joined the pages already served: what
			// a departure moved up past the boundary was not served.
			s.flag(a.hist[cur-1].last, "the total changed from %d to %d", s.total, p.Total)
		case len(p.Keys) > 0 && len(prev.Keys) > 0 && p.Keys[0].After(prev.Keys[len(prev.Keys)-1]):
			s.flag(a.hist[cur-1].last, "page %d starts above where page %d ended", n, n-1)
		default:
			s.trust = true
		}
	}
	s.total = p.Total
	return m
}

// mark appends p's mark to the span's history and returns its last key.
func (s *seg) mark(p KeyedPage, m int) clients.Date {
	a := s.a
	cur := len(a.hist)
	last := s.to
	if len(p.IDs) > 0 {
		last = p.Keys[len(p.Keys)-1]
	} else if cur > s.base {
		last = a.hist[cur-1].last
	}
	first := last
	if len(p.Keys) > 0 {
		first = p.Keys[0]
	}
	a.hist = append(a.hist, mark{clock: p.Clock, first: first, last: last, trust: s.trust})
	a.now = p.Clock
	if a.start.IsZero() {
		a.start = p.Clock.Truncate(time.Second)
	}
	return last
}

// moved flags the records of p (from m on) served before at a later key
// (moved down, without a stamp to tell when), or served again by this
// walk at or above where they were.
func (s *seg) moved(n int, p KeyedPage, m int) {
	a := s.a
	for i := m; i < len(p.IDs); i++ {
		id := p.IDs[i]
		if f, ok := a.served[id]; ok && p.Keys[i].Before(f.key) {
			if i >= len(p.Versions) || p.Versions[i].IsZero() {
				// No stamp to tell when it moved: from where it was.
				if k, ok := a.hidden(f.at); ok {
					s.flag(k, "id %s moved from %s to %s", id, f.key, p.Keys[i])
				}
			}
		} else if j, ok := s.here[id]; ok && !p.Keys[i].Before(a.hist[j].last) {
			s.flag(a.hist[j].last, "id %s served again on page %d", id, n)
		}
	}
}

// note records where each record of p (the latest mark) was served.
func (s *seg) note(p KeyedPage) {
	a := s.a
	cur := len(a.hist) - 1
	for i, id := range p.IDs {
		a.served[id] = served{at: cur, key: p.Keys[i], clock: p.Clock}
		if _, ok := s.here[id]; !ok {
			s.here[id] = cur
		}
	}
}

// short flags a page before the last that held less than a page; an
// empty first page that is not the last ends the walk capped.
func (s *seg) short(n int, p KeyedPage, last clients.Date) error {
	if !p.More || p.Keyset || p.Size <= 0 || len(p.IDs) >= p.Size {
		return nil
	}
	switch {
	case len(p.IDs) > 0:
		s.flag(last, "page %d held %d of %d records but was not the last", n, len(p.IDs), p.Size)
	case n > 1:
		s.flag(last, "page %d was empty but not the last", n)
	default:
		return fmt.Errorf("%s: %w: page 1 was empty but not the last", s.a.What, clients.ErrCapped)
	}
	return nil
}

// hidden returns the highest last key of a page just before a boundary
// taken on trust after page k of the span (false: none). A change made
// after page k was served can only have hidden a record at such a
// boundary: the others were proven by an overlap, or began a walk from an
// anchor, or made the walk re-anchor there.
func (a *Anchored) hidden(k int) (clients.Date, bool) {
	var out clients.Date
	found := false
	for j := k + 1; j < len(a.hist); j++ {
		if a.hist[j].trust && (!found || a.hist[j-1].last.After(out)) {
			out, found = a.hist[j-1].last, true
		}
	}
	return out, found
}

// inBounds checks that p's keys lie in from..to, newest first: the
// anchors are taken from them, and a provider that ignored the bounds would
// otherwise be asked the same page for ever.
func (a *Anchored) inBounds(n int, p KeyedPage, from, to clients.Date) error {
	for i, k := range p.Keys {
		switch {
		case !to.IsZero() && k.After(to), !from.IsZero() && k.Before(from):
			return fmt.Errorf("%s: page %d: record %s dated %s, outside the %s..%s asked for", a.What, n, p.IDs[i], k, from, to)
		case i > 0 && k.After(p.Keys[i-1]):
			return fmt.Errorf("%s: page %d: record %s dated %s after %s: not newest first", a.What, n, p.IDs[i], k, p.Keys[i-1])
		}
	}
	return nil
}

// overlap returns m ≥ 1 when the first m records of p are the last m of
// prev, unchanged: the walk is then contiguous across the boundary (the
// records were pushed down by m), whatever else changed above it.
func overlap(prev, p KeyedPage) int {
	for m := min(len(prev.IDs), len(p.IDs)); m >= 1; m-- {
		off := len(prev.IDs) - m
		if !slices.Equal(prev.IDs[off:], p.IDs[:m]) {
			continue
		}
		same := true
		for i := range m {
			if i < len(p.Versions) && off+i < len(prev.Versions) && !p.Versions[i].Equal(prev.Versions[off+i]) {
				same = false
				break
			}
		}
		if same {
			return m
		}
	}
	return 0
}

// suspects returns the boundaries taken on trust at which a change seen on
// p (from record m on) may have hidden a record: a record created (or moved
// in) during the walk on a page not yet read masks a departure above it at
// the boundary it became visible in (the total unchanged); a record served
// before and now further down left a gap at the boundary it moved in. That
// boundary lies after the last page served before the change's stamp, up
// to the first page served after it.
func (a *Anchored) suspects(p KeyedPage, m int, bounded bool) []int {
	var out []int
	for i := m; i < len(p.IDs); i++ {
		id := p.IDs[i]
		var c time.Time
		if f, ok := a.served[id]; ok {
			if !p.Keys[i].Before(f.key) || i >= len(p.Versions) {
				continue
			}
			c = p.Versions[i] // moved down since it was served
		} else {
			c = arrivedAt(p, i, bounded)
		}
		if c.IsZero() || c.Before(a.start) {
			continue
		}
		if v, ok := a.changed[id]; ok && !c.After(v) {
			continue
		}
		k := 0
		for k+1 < len(a.hist) && !a.hist[k+1].clock.IsZero() && !a.hist[k+1].clock.Add(time.Second).After(c) {
			k++
		}
		for j := k + 1; j < len(a.hist); j++ {
			if a.hist[j].trust {
				a.changed[id] = c
				out = append(out, j)
			}
			if a.hist[j].clock.IsZero() || a.hist[j].clock.After(c.Add(time.Second)) {
				break
			}
		}
	}
	return out
}

// patch reads again, by date, the boundaries suspects named.
func (a *Anchored) patch(ctx context.Context, js []int, get func(context.Context, Query) (KeyedPage, error)) error {
	for _, j := range js {
		if !a.hist[j].trust {
			continue // read already
		}
		a.hist[j].trust = false
		if err := a.boundary(ctx, j, get); err != nil {
			return err
		}
	}
	return nil
}

// watched wraps get for reads outside a walk's pages (a day, a boundary),
// and describes their pages for the Walker (page): what they serve is
// checked for changes (suspects) and counted as served.
func (a *Anchored) watched(get func(context.Context, Query) (KeyedPage, error)) func(context.Context, Query) (Page, error) {
	return func(ctx context.Context, q Query) (Page, error) {
		p, err := get(ctx, q)
		if err != nil {
			return Page{}, err
		}
		out := a.page(p)
		if len(a.hist) == 0 {
			return out, nil
		}
		js := a.suspects(p, 0, false)
		at := len(a.hist) - 1
		for i, id := range p.IDs {
			if i < len(p.Keys) {
				a.served[id] = served{at: at, key: p.Keys[i], clock: p.Clock}
			}
		}
		return out, a.patch(ctx, js, get)
	}
}

// boundary reads again the dates around boundary j (the first date of
// page j to the last of page j-1): a record a departure above moved up
// past it, masked by a creation below, is among them. One request, as a
// rule, instead of walking again from there. A range that would not hold
// still is noted as capped and the walk goes on.
func (a *Anchored) boundary(ctx context.Context, j int, get func(context.Context, Query) (KeyedPage, error)) error {
	from, to := a.hist[j].first, a.hist[j-1].last
	if from.IsZero() || to.IsZero() || from.After(to) {
		from = to
	}
	a.Patches++
	zerolog.Ctx(ctx).Debug().Str("listing", a.What).Stringer("from", from).Stringer("to", to).
		Msg("listing shifted while walking; reading the dates at a page boundary again")
	w := New(fmt.Sprintf("%s from %s to %s", a.What, from, to))
	w.MaxRewinds = 8
	read := a.watched(get)
	err := w.Numbered(ctx, 1, func(ctx context.Context, n int) (Page, error) {
		return read(ctx, Query{From: from, To: to, Page: n})
	})
	if errors.Is(err, clients.ErrCapped) {
		a.capped = errors.Join(a.capped, err)
		return nil
	}
	return err
}

// day pages the single day d by number under the Walker's defence.
func (a *Anchored) day(ctx context.Context, d clients.Date, get func(context.Context, Query) (KeyedPage, error)) error {
	w := New(fmt.Sprintf("%s on %s", a.What, d))
	// A day is small: a few rewinds, not one per page of a day that grows
	// faster than it is read.
	w.MaxRewinds = 8
	read := a.watched(get)
	return w.Numbered(ctx, 1, func(ctx context.Context, n int) (Page, error) {
		return read(ctx, Query{From: d, To: d, Page: n})
	})
}

// page is p, a read bounded by date (a day, a boundary), as the Walker
// sees it: a record edited into the dates from others arrives as a
// creation does and may mask a departure above, whatever its creation
// stamp says, so the Walker is given arrival stamps (arrivedAt). A record
// served at the same date before its change was edited in place (one
// change a walk: the gap the package doc names), and without a version
// the creation stamp is all there is.
func (a *Anchored) page(p KeyedPage) Page {
	out := Page{IDs: p.IDs, Total: p.Total, TotalPages: p.TotalPages, Size: p.Size, More: p.More, Keyset: p.Keyset,
		Clock: p.Clock, Versions: p.Versions}
	if len(p.Created) == len(p.IDs) {
		arrived := make([]time.Time, len(p.IDs))
		for i, id := range p.IDs {
			arrived[i] = arrivedAt(p, i, true)
			f, ok := a.served[id]
			if arrived[i].IsZero() || ok && !f.clock.IsZero() && i < len(p.Keys) && f.key == p.Keys[i] && !f.clock.Add(time.Second).After(arrived[i]) {
				arrived[i] = p.Created[i]
			}
		}
		out.CreatedKnown, out.Creations = true, arrived
		for _, c := range arrived {
			if c.IsZero() {
				out.CreatedKnown, out.Creations = false, nil
				break
			}
			if c.After(out.Created) {
				out.Created = c
			}
		}
	}
	for _, v := range p.Versions {
		if v.After(out.Newest) {
			out.Newest = v
		}
	}
	return out
}

// arrivedAt is when record i may have joined the listing: its creation
// stamp, else (no stamp) its version. Its version too when the span has a
// lower bound (bounded): a record edited from before the span into it
// arrives as a creation does. Without one, a record can only enter the
// part not yet read from the part read (and was served there), so an edit
// in place of a record not yet read costs nothing.
func arrivedAt(p KeyedPage, i int, bounded bool) time.Time {
	var created, version time.Time
	if i < len(p.Created) {
		created = p.Created[i]
	}
	if i < len(p.Versions) {
		version = p.Versions[i]
	}
	if created.IsZero() || bounded {
		return version
	}
	return created
}
