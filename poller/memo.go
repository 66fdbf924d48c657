package poller

import (
	"context"
	"encoding/binary"
	"hash/maphash"
	"slices"
	"sync"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/upsert"
)

// pageMemo remembers the pages of a source's incremental passes once the
// versioned write applied them (and committed what they wrote): the
// overlap's re-deliveries of an idle source, the same bytes every tick. A
// later incremental page with the same records, byte for byte, takes the
// remembered counts (every record unchanged, or stale) instead of a lookup:
// applied again it would write nothing, as long as no other write made a
// stored row older or deleted it since. The only writes that can do that are
// this process's own (a reconcile's tombstones, or a page written at the
// same version as a stored row: a tie, like the tombstones Toggl's workspace
// scope writes for entries absent from a listing; the owner lease keeps
// every other poller of the source in this process), and those forget the
// resource's pages (forget). Ownership changing forgets them all. The one
// writer beside the owner is webhook intake with `apply` (any replica): a
// record it wrote at the same version is put right by the pass its event
// triggers, which looks every page up (LookUpEveryPage). An entry also ages
// out after memoMaxAge, so a row changed behind Tidemark's back (by hand) is
// written again within that time.
type pageMemo struct {
	mu    sync.Mutex
	pages []memoPage // a few a resource: a slice, not maps (a thousand sources keep theirs)
	// gen counts forgets: a page looked up before one is not remembered
	// after it (a reconcile beside a long incremental listing may have
	// tombstoned a row the page's lookup read as live).
	gen uint64
}

type pageKey [2]uint64

// memoPage is one remembered page: what it counted (it wrote nothing, so
// every record was unchanged or stale) and when it was looked up.
type memoPage struct {
	resource         clients.Resource
	key              pageKey
	unchanged, stale int64
	at               int64 // unix nanoseconds
}

// memoMaxAge bounds how long a remembered page stands in for its lookup.
const memoMaxAge = 10 * time.Minute

// memoMaxPages bounds the pages remembered per resource (an idle
// incremental listing is one page; more is a busy one, not worth keeping).
const memoMaxPages = 8

// Two seeds: a 128-bit fingerprint, so that a changed page passing for a
// remembered one is out of the question.
var memoSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

// fingerprint identifies a page's records: ids, versions, deletion stamps
// and the bytes each was decoded from (its columns follow from them).
// FetchedAt is left out: it is what differs between two re-deliveries.
func fingerprint(recs []clients.Record) pageKey {
	var k pageKey
	var b [8]byte
	for i, seed := range memoSeeds {
		var h maphash.Hash
		h.SetSeed(seed)
		for j := range recs {
			r := &recs[j]
			binary.LittleEndian.PutUint64(b[:], uint64(len(r.ID)))
			h.Write(b[:])
			h.WriteString(r.ID)
			binary.LittleEndian.PutUint64(b[:], uint64(r.Version.UnixNano()))
			h.Write(b[:])
			var del int64 = -1
			if r.DeletedAt != nil {
				del = r.DeletedAt.UnixNano()
			}
			binary.LittleEndian.PutUint64(b[:], uint64(del))
			h.Write(b[:])
			binary.LittleEndian.PutUint64(b[:], uint64(len(r.Raw)))
			h.Write(b[:])
			h.Write(r.Raw)
			binary.LittleEndian.PutUint64(b[:], uint64(len(r.Derived)))
			h.Write(b[:])
			h.Write(r.Derived) // in the content hash too
		}
		k[i] = h.Sum64()
	}
	return k
}

// get returns the counts of a remembered page applied within memoMaxAge.
func (m *pageMemo) get(r clients.Resource, k pageKey, now time.Time) (upsert.Counts, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.pages {
		if p.resource == r && p.key == k {
			if !fresh(p, now) {
				return upsert.Counts{}, false
			}
			return upsert.Counts{Unchanged: p.unchanged, Stale: p.stale}, true
		}
	}
	return upsert.Counts{}, false
}

// fresh reports whether p may still stand in for its lookup at now.
func fresh(p memoPage, now time.Time) bool {
	age := now.Sub(time.Unix(0, p.at))
	return age >= 0 && age <= memoMaxAge
}

// generation is the number of forgets so far; read it before a page's
// lookup and give it to put.
func (m *pageMemo) generation() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gen
}

// put remembers a page as what its re-delivery counts (nothing written:
// the caller counts a page it wrote as unchanged), unless the memo
// forgot anything since generation gen (read before the page's lookup) or
// already holds memoMaxPages fresh pages of r.
func (m *pageMemo) put(r clients.Resource, k pageKey, c upsert.Counts, now time.Time, gen uint64) {
	if c.Inserted+c.Updated+c.Tombstoned > 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gen != gen {
		return
	}
	m.pages = slices.DeleteFunc(m.pages, func(p memoPage) bool {
		return p.resource == r && (p.key == k || !fresh(p, now))
	})
	n := 0
	for _, p := range m.pages {
		if p.resource == r {
			n++
		}
	}
	if n >= memoMaxPages {
		// Full: keep what is remembered. A listing longer than the memo
		// then still finds its first pages each pass, where evicting would
		// make every page of it miss in turn.
		return
	}
	m.pages = append(m.pages, memoPage{resource: r, key: k, unchanged: c.Unchanged, stale: c.Stale, at: now.UnixNano()})
}

// forget drops the remembered pages of r, or of every resource when r is
// empty.
func (m *pageMemo) forget(r clients.Resource) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen++
	if r == "" {
		m.pages = nil
		return
	}
	m.pages = slices.DeleteFunc(m.pages, func(p memoPage) bool { return p.resource == r })
}

type lookUpKey struct{}

// LookUpEveryPage makes the incremental passes run under ctx look every
// page up, remembered or not: a webhook-triggered pass confirms what the
// intake wrote beside the owner (webhooks.apply), which the memo does not
// see.
func LookUpEveryPage(ctx context.Context) context.Context {
	return context.WithValue(ctx, lookUpKey{}, true)
}

func looksUpEveryPage(ctx context.Context) bool {
	v, _ := ctx.Value(lookUpKey{}).(bool)
	return v
}
