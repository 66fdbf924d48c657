package poller

import (
	"encoding/binary"
	"hash/maphash"
	"sync"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/upsert"
)

// pageMemo remembers the pages of a source's incremental passes that the
// versioned write applied without writing anything: the overlap's
// re-deliveries of an idle source, the same bytes every tick. A later
// incremental page with the same records, byte for byte, takes the
// remembered counts instead of a lookup: applied again it would write
// nothing either, as long as no other write made a stored row older or
// deleted it since. The only writes that can do that are this process's
// own (a reconcile's tombstones; the owner lease keeps every other writer
// of the source's rows in this process), and those forget the resource's
// pages (forget). Ownership changing forgets them all; an entry also ages
// out after memoMaxAge, so a row changed behind Tidemark's back (by hand)
// is written again within that time.
type pageMemo struct {
	mu    sync.Mutex
	pages map[clients.Resource]map[pageKey]memoEntry
}

type pageKey [2]uint64

type memoEntry struct {
	counts upsert.Counts
	at     time.Time
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
		}
		k[i] = h.Sum64()
	}
	return k
}

// get returns the counts of a remembered page applied within memoMaxAge.
func (m *pageMemo) get(r clients.Resource, k pageKey, now time.Time) (upsert.Counts, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.pages[r][k]
	if !ok || now.Sub(e.at) > memoMaxAge || now.Before(e.at) {
		return upsert.Counts{}, false
	}
	return e.counts, true
}

// put remembers a page whose application wrote nothing.
func (m *pageMemo) put(r clients.Resource, k pageKey, c upsert.Counts, now time.Time) {
	if c.Inserted+c.Updated+c.Tombstoned > 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pages == nil {
		m.pages = map[clients.Resource]map[pageKey]memoEntry{}
	}
	ps := m.pages[r]
	if ps == nil || len(ps) >= memoMaxPages {
		ps = map[pageKey]memoEntry{}
		m.pages[r] = ps
	}
	ps[k] = memoEntry{counts: c, at: now}
}

// forget drops the remembered pages of r, or of every resource when r is
// empty.
func (m *pageMemo) forget(r clients.Resource) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r == "" {
		m.pages = nil
		return
	}
	delete(m.pages, r)
}
