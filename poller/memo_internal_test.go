package poller

import (
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/upsert"
)

func TestPageMemo(t *testing.T) {
	t0 := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	del := t0.Add(-time.Hour)
	page := []clients.Record{
		{ID: "1", Version: t0, FetchedAt: t0, Raw: []byte(`{"id":1,"notes":"a"}`)},
		{ID: "2", Version: t0, FetchedAt: t0, Raw: []byte(`{"id":2,"notes":"b"}`)},
	}
	k := fingerprint(page)
	refetched := clone(page, func(r *clients.Record) { r.FetchedAt = t0.Add(time.Minute) })
	if fingerprint(refetched) != k {
		t.Fatal("a re-delivery (only fetched later) has another fingerprint")
	}
	for name, changed := range map[string][]clients.Record{
		"content":  clone(page, func(r *clients.Record) { r.Raw = []byte(`{"id":2,"notes":"B"}`) }),
		"version":  clone(page, func(r *clients.Record) { r.Version = t0.Add(time.Second) }),
		"deletion": clone(page, func(r *clients.Record) { r.DeletedAt = &del }),
		"id":       clone(page, func(r *clients.Record) { r.ID = "3" }),
		"boundary": {{ID: "1", Version: t0, Raw: []byte(`{"id":1,"notes":"a"}{"id":2,"notes":"b"}`)}, {ID: "2", Version: t0}},
		"order":    {page[1], page[0]},
		"fewer":    page[:1],
	} {
		if fingerprint(changed) == k {
			t.Errorf("%s: a changed page has the remembered fingerprint", name)
		}
	}

	var m pageMemo
	unchanged := upsert.Counts{Unchanged: 2}
	if _, ok := m.get(clients.TimeEntries, k, t0); ok {
		t.Fatal("an empty memo remembers a page")
	}
	m.put(clients.TimeEntries, k, upsert.Counts{Inserted: 1, Unchanged: 1}, t0, m.generation())
	if _, ok := m.get(clients.TimeEntries, k, t0); ok {
		t.Fatal("a page that wrote is remembered")
	}
	m.put(clients.TimeEntries, k, unchanged, t0, m.generation())
	if c, ok := m.get(clients.TimeEntries, k, t0.Add(memoMaxAge)); !ok || c != unchanged {
		t.Fatalf("remembered page: %+v %v", c, ok)
	}
	if _, ok := m.get(clients.Projects, k, t0); ok {
		t.Fatal("a page is remembered for another resource")
	}
	if _, ok := m.get(clients.TimeEntries, k, t0.Add(memoMaxAge+time.Second)); ok {
		t.Fatal("a page is remembered past memoMaxAge")
	}
	if _, ok := m.get(clients.TimeEntries, k, t0.Add(-time.Second)); ok {
		t.Fatal("a page is remembered from the future (the clock went back)")
	}
	m.forget(clients.Projects)
	if _, ok := m.get(clients.TimeEntries, k, t0); !ok {
		t.Fatal("forgetting another resource forgot this one")
	}
	m.forget(clients.TimeEntries)
	if _, ok := m.get(clients.TimeEntries, k, t0); ok {
		t.Fatal("forget(r) kept r's page")
	}
	m.put(clients.TimeEntries, k, unchanged, t0, m.generation())
	m.forget("")
	if _, ok := m.get(clients.TimeEntries, k, t0); ok {
		t.Fatal(`forget("") kept a page`)
	}
	// A page looked up before a forget is not remembered after it.
	gen := m.generation()
	m.forget(clients.Projects)
	m.put(clients.TimeEntries, k, unchanged, t0, gen)
	if _, ok := m.get(clients.TimeEntries, k, t0); ok {
		t.Fatal("a page looked up before a forget was remembered after it")
	}
	// A listing one page longer than the memo, listed twice: the memo keeps
	// its first pages rather than evicting each in turn before it is read.
	for range 2 {
		for i := range memoMaxPages + 1 {
			m.put(clients.TimeEntries, pageKey{uint64(i)}, unchanged, t0, m.generation())
		}
	}
	if n := len(m.pages); n != memoMaxPages {
		t.Fatalf("%d pages remembered, want %d", n, memoMaxPages)
	}
	for i := range memoMaxPages {
		if _, ok := m.get(clients.TimeEntries, pageKey{uint64(i)}, t0); !ok {
			t.Fatalf("page %d of a long listing was evicted", i)
		}
	}
	// Pages of other resources do not count against r's, and an expired
	// page makes room.
	m.put(clients.Projects, k, unchanged, t0, m.generation())
	later := t0.Add(memoMaxAge + time.Second)
	m.put(clients.TimeEntries, pageKey{99}, unchanged, later, m.generation())
	if _, ok := m.get(clients.TimeEntries, pageKey{99}, later); !ok {
		t.Fatal("a full memo of expired pages did not make room")
	}
	if _, ok := m.get(clients.Projects, k, t0); !ok {
		t.Fatal("making room for one resource dropped another's page")
	}
}

// clone copies recs and changes the last one.
func clone(recs []clients.Record, change func(*clients.Record)) []clients.Record {
	out := append([]clients.Record(nil), recs...)
	change(&out[len(out)-1])
	return out
}
