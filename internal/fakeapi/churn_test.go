package fakeapi_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/internal/fakeapi"
)

// memEntries is an in-memory Entries on a manual clock.
type memEntries struct {
	clk      *fakeapi.Clock
	next     int
	entries  map[int]fakeapi.Entry[int]
	touched  map[int]int // project → last revision
	toucher  bool
	users    int
	projects int
}

func newMem() *memEntries {
	return &memEntries{clk: fakeapi.NewClock(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)), entries: map[int]fakeapi.Entry[int]{}, touched: map[int]int{}}
}

func (m *memEntries) Stamp() time.Time { return m.clk.Now() }
func (m *memEntries) NewID() int       { m.next++; return m.next }
func (m *memEntries) PutUser(i int, _ time.Time) int {
	m.users++
	return 100 + i
}
func (m *memEntries) PutProject(i int, _ time.Time) int {
	m.projects++
	return 500 + i
}
func (m *memEntries) Entry(id int) (fakeapi.Entry[int], bool) { e, ok := m.entries[id]; return e, ok }
func (m *memEntries) Put(e fakeapi.Entry[int])                { m.entries[e.ID] = e }
func (m *memEntries) Delete(id int) bool {
	_, ok := m.entries[id]
	delete(m.entries, id)
	return ok
}

// toucherMem also renames projects.
type toucherMem struct{ *memEntries }

func (m toucherMem) TouchProject(id, rev int) { m.touched[id] = rev }

func TestEntryChurn(t *testing.T) {
	t.Parallel()
	run := func(store fakeapi.Entries[int], m *memEntries) (map[int]fakeapi.Entry[int], fakeapi.ChurnCounts) {
		c := fakeapi.NewEntryChurn(store, fakeapi.ChurnParams{Seed: 7, Entries: 50, Users: 2})
		if len(m.entries) != 50 || m.users != 2 || m.projects != 5 || len(c.Users()) != 2 {
			t.Fatalf("after NewEntryChurn: %d entries, %d users, %d projects", len(m.entries), m.users, m.projects)
		}
		for range 40 {
			c.Step(10)
			m.clk.Advance(time.Second)
		}
		if len(c.Live()) != len(m.entries) {
			t.Errorf("%d live ids for %d entries", len(c.Live()), len(m.entries))
		}
		for id, e := range m.entries {
			if e.Notes == nil || e.Stop != nil && !e.Stop.After(e.Start) || e.Version.After(m.clk.Now()) {
				t.Fatalf("entry %d: %+v", id, e)
			}
		}
		return m.entries, c.Counts()
	}
	m := newMem()
	es, counts := run(m, m)
	if counts.Created == 0 || counts.BackdatedCreates == 0 || counts.Updated == 0 || counts.DoubleUpdates == 0 ||
		counts.Deleted == 0 || counts.Backdated == 0 || counts.Timers == 0 || counts.Projects != 0 {
		t.Errorf("counts %+v: a mutation never happened, or projects were touched without a ProjectToucher", counts)
	}
	m2 := newMem()
	es2, counts2 := run(m2, m2)
	if counts2 != counts || !reflect.DeepEqual(es, es2) {
		t.Error("same seed, different streams")
	}
	m3 := newMem()
	if _, counts3 := run(toucherMem{m3}, m3); counts3.Projects == 0 || len(m3.touched) == 0 {
		t.Errorf("a ProjectToucher's projects were never touched: %+v", counts3)
	}
}

func TestStream(t *testing.T) {
	t.Parallel()
	s := fakeapi.NewStream[string](rand.New(rand.NewPCG(1, 2)))
	var log []string
	ms := []fakeapi.Mutation{
		{Weight: 1, Do: func() { log = append(log, "create") }},
		{Weight: 99, Do: func() { log = append(log, "other") }},
	}
	s.Step(3, 1, ms) // nothing live: creates only
	if fmt.Sprint(log) != "[create create create]" {
		t.Fatalf("with nothing live: %v", log)
	}
	for _, id := range []string{"a", "b", "c", "a"} {
		s.Add(id)
	}
	if len(s.Live()) != 3 {
		t.Fatalf("live %v", s.Live())
	}
	gone := map[string]bool{"a": true, "c": true}
	for range 20 {
		if id, ok := s.Pick(func(id string) bool { return !gone[id] }); !ok || id != "b" {
			t.Fatalf("Pick = %q %v, want b", id, ok)
		}
	}
	if fmt.Sprint(s.Live()) != "[b]" {
		t.Fatalf("Pick kept the gone ids: %v", s.Live())
	}
	s.Remove("b")
	if _, ok := s.Pick(func(string) bool { return true }); ok {
		t.Fatal("Pick from nothing")
	}
	if a, b := s.Rev(), s.Rev(); b != a+1 {
		t.Fatalf("revisions %d, %d", a, b)
	}
}
