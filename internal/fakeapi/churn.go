package fakeapi

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// Stream is the machinery of a seeded mutation stream: its random source,
// the ids of the live records it picks from, revision numbers that make
// every state's notes unique, and a weighted choice among mutations. It is
// not safe for concurrent use: its owner serializes Step.
type Stream[ID comparable] struct {
	Rand *rand.Rand

	live []ID
	idx  map[ID]int
	rev  int
}

// NewStream returns a stream drawing from r.
func NewStream[ID comparable](r *rand.Rand) *Stream[ID] {
	return &Stream[ID]{Rand: r, idx: map[ID]int{}}
}

// Mutation is one kind of change and its weight among a Step's choices.
type Mutation struct {
	Weight int
	Do     func()
}

// Step applies n mutations, each chosen by weight; while fewer than
// minLive records are live, the first mutation (a create) is chosen.
func (s *Stream[ID]) Step(n, minLive int, ms []Mutation) {
	total := 0
	for _, m := range ms {
		total += m.Weight
	}
	for range n {
		k := s.Rand.IntN(total)
		if len(s.live) < minLive {
			ms[0].Do()
			continue
		}
		for _, m := range ms {
			if k < m.Weight {
				m.Do()
				break
			}
			k -= m.Weight
		}
	}
}

// Add counts id among the live records.
func (s *Stream[ID]) Add(id ID) {
	if _, ok := s.idx[id]; ok {
		return
	}
	s.idx[id] = len(s.live)
	s.live = append(s.live, id)
}

// Remove forgets id.
func (s *Stream[ID]) Remove(id ID) {
	i, ok := s.idx[id]
	if !ok {
		return
	}
	last := s.live[len(s.live)-1]
	s.live[i] = last
	s.idx[last] = i
	s.live = s.live[:len(s.live)-1]
	delete(s.idx, id)
}

// Live returns the ids of the live records.
func (s *Stream[ID]) Live() []ID { return slices.Clone(s.live) }

// Pick returns a random live id for which ok holds, forgetting those for
// which it does not (records gone by other means).
func (s *Stream[ID]) Pick(ok func(ID) bool) (ID, bool) {
	for len(s.live) > 0 {
		id := s.live[s.Rand.IntN(len(s.live))]
		if ok(id) {
			return id, true
		}
		s.Remove(id)
	}
	var zero ID
	return zero, false
}

// Rev returns the next revision number.
func (s *Stream[ID]) Rev() int {
	s.rev++
	return s.rev
}

// Run calls step(perTick) every interval until ctx ends.
func Run(ctx context.Context, every time.Duration, perTick int, step func(n int)) error {
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tk.C:
			step(perTick)
		}
	}
}

// ChurnParams configures an EntryChurn.
type ChurnParams struct {
	// Seed makes the data and the mutation stream deterministic (their
	// stamps still come from the server's clock).
	Seed uint64
	// Entries is the number of time entries NewEntryChurn puts (default
	// 200), stamped in the past; Days the history they, and back-dated
	// creates, span (default 30, at least 2).
	Entries, Days int
	// Users and Projects are how many of each NewEntryChurn puts first
	// (default 3 and 5), stamped before the history.
	Users, Projects int
}

// WithDefaults fills the zero fields.
func (p ChurnParams) WithDefaults() ChurnParams {
	p.Entries = cmp.Or(p.Entries, 200)
	p.Days = max(cmp.Or(p.Days, 30), 2)
	p.Users = cmp.Or(p.Users, 3)
	p.Projects = cmp.Or(p.Projects, 5)
	return p
}

// ChurnCounts counts the mutations an EntryChurn applied, by kind.
type ChurnCounts struct {
	Created, BackdatedCreates, Updated, DoubleUpdates, Deleted, Backdated, Timers, Projects int
}

// Entry is a timer-style time entry (Toggl, Clockify) as EntryChurn sees
// it: a start and, once stopped, a stop.
type Entry[ID comparable] struct {
	ID, UserID, ProjectID ID
	Billable              bool
	Notes                 *string
	Start                 time.Time
	Stop                  *time.Time // nil: running
	Version               time.Time  // the source's stamp of this state
}

// Entries is the store an EntryChurn mutates, in its dialect's terms.
type Entries[ID comparable] interface {
	// Stamp is the source's clock at its stamp precision.
	Stamp() time.Time
	NewID() ID
	// PutUser and PutProject put the i-th user or project, stamped at, and
	// return its id.
	PutUser(i int, at time.Time) ID
	PutProject(i int, at time.Time) ID
	// Entry returns a live entry.
	Entry(id ID) (Entry[ID], bool)
	// Put creates or updates an entry (other fields of a stored one kept).
	Put(e Entry[ID])
	Delete(id ID) bool
}

// ProjectToucher is an Entries whose churn also renames and (de)activates
// projects: TouchProject gives project id revision rev.
type ProjectToucher[ID comparable] interface {
	TouchProject(id ID, rev int)
}

// EntryChurn is a seeded mutation stream over a fake's time entries, like a
// live account: creates (now or back-dated), edits, two edits with one
// stamp, deletions, entries moved to an earlier day, timers started and
// stopped, and, where the store is a ProjectToucher, projects renamed or
// (de)activated. Every entry state gets notes of its own ("entry <id> rev
// <n>"), so that a mirror's notes tell which state it holds. Stamps come
// from the store's clock.
type EntryChurn[ID comparable] struct {
	store    Entries[ID]
	days     int
	users    []ID
	projects []ID

	mu     sync.Mutex
	s      *Stream[ID]
	counts ChurnCounts
	muts   []Mutation
}

// NewEntryChurn puts p's users, projects and time entries into store,
// stamped in the past on its clock, and returns the stream that mutates
// the entries.
func NewEntryChurn[ID comparable](store Entries[ID], p ChurnParams) *EntryChurn[ID] {
	p = p.WithDefaults()
	c := &EntryChurn[ID]{store: store, days: p.Days, s: NewStream[ID](rand.New(rand.NewPCG(p.Seed, 0x70991)))}
	now := store.Stamp()
	old := now.Add(-time.Duration(p.Days+1) * 24 * time.Hour)
	for i := range p.Users {
		c.users = append(c.users, store.PutUser(i, old))
	}
	for i := range p.Projects {
		c.projects = append(c.projects, store.PutProject(i, old))
	}
	c.muts = []Mutation{
		{25, func() { c.create(false) }},
		{10, func() { c.create(true) }},
		{27, func() { c.update(false) }},
		{10, func() { c.update(true) }},
		{10, c.delete},
		{10, c.backdate},
		{8, c.timer},
	}
	if t, ok := store.(ProjectToucher[ID]); ok {
		c.muts = append(c.muts, Mutation{5, func() { c.touchProject(t) }})
	}
	r := c.s.Rand
	for range p.Entries {
		start := now.Add(-time.Duration(r.Int64N(int64(p.Days) * int64(24*time.Hour)))).Truncate(time.Second)
		stop := start.Add(time.Duration(15+r.IntN(480)) * time.Minute)
		at := stop.Add(time.Duration(r.IntN(3600)) * time.Second)
		if at.After(now) {
			at = now.Add(-time.Hour)
		}
		e := c.newEntry(start, at)
		e.Stop = &stop
		store.Put(e)
		c.s.Add(e.ID)
	}
	return c
}

func (c *EntryChurn[ID]) newEntry(start, version time.Time) Entry[ID] {
	r := c.s.Rand
	e := Entry[ID]{
		ID: c.store.NewID(), UserID: c.users[r.IntN(len(c.users))], ProjectID: c.projects[r.IntN(len(c.projects))],
		Billable: r.IntN(2) == 0, Start: start, Version: version,
	}
	c.describe(&e)
	return e
}

func (c *EntryChurn[ID]) describe(e *Entry[ID]) {
	d := fmt.Sprintf("entry %v rev %d", e.ID, c.s.Rev())
	e.Notes = &d
}

// Counts returns how many mutations of each kind were applied.
func (c *EntryChurn[ID]) Counts() ChurnCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts
}

// Live returns the ids of the entries the stream has not deleted.
func (c *EntryChurn[ID]) Live() []ID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s.Live()
}

// Users returns the ids of the users the entries belong to.
func (c *EntryChurn[ID]) Users() []ID { return slices.Clone(c.users) }

// Step applies n mutations, chosen from the seed.
func (c *EntryChurn[ID]) Step(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.Step(n, 10, c.muts)
}

// Run applies perTick mutations every interval until ctx ends.
func (c *EntryChurn[ID]) Run(ctx context.Context, every time.Duration, perTick int) error {
	return Run(ctx, every, perTick, c.Step)
}

func (c *EntryChurn[ID]) pick() (Entry[ID], bool) {
	var e Entry[ID]
	_, ok := c.s.Pick(func(id ID) bool {
		var live bool
		e, live = c.store.Entry(id)
		return live
	})
	return e, ok
}

func (c *EntryChurn[ID]) create(backdated bool) {
	r := c.s.Rand
	now := c.store.Stamp()
	start := now.Add(-time.Duration(1+r.IntN(8)) * time.Hour).Truncate(time.Second)
	if backdated {
		start = start.AddDate(0, 0, -1-r.IntN(c.days-1))
		c.counts.BackdatedCreates++
	} else {
		c.counts.Created++
	}
	e := c.newEntry(start, now)
	stop := start.Add(time.Duration(15+r.IntN(240)) * time.Minute)
	e.Stop = &stop
	c.store.Put(e)
	c.s.Add(e.ID)
}

// update edits an entry; double: twice with the same stamp.
func (c *EntryChurn[ID]) update(double bool) {
	e, ok := c.pick()
	if !ok {
		return
	}
	e.Version = c.store.Stamp()
	times := 1
	if double {
		times = 2
		c.counts.DoubleUpdates++
	} else {
		c.counts.Updated++
	}
	for range times {
		c.describe(&e)
		e.Billable = !e.Billable
		if e.Stop != nil {
			stop := e.Start.Add(time.Duration(15+c.s.Rand.IntN(480)) * time.Minute)
			e.Stop = &stop
		}
		c.store.Put(e)
	}
}

func (c *EntryChurn[ID]) delete() {
	e, ok := c.pick()
	if !ok {
		return
	}
	if c.store.Delete(e.ID) {
		c.counts.Deleted++
	}
	c.s.Remove(e.ID)
}

// backdate moves an entry 1 to Days-1 days earlier.
func (c *EntryChurn[ID]) backdate() {
	e, ok := c.pick()
	if !ok {
		return
	}
	shift := time.Duration(1+c.s.Rand.IntN(c.days-1)) * 24 * time.Hour
	e.Start = e.Start.Add(-shift)
	if e.Stop != nil {
		stop := e.Stop.Add(-shift)
		e.Stop = &stop
	}
	c.describe(&e)
	e.Version = c.store.Stamp()
	c.store.Put(e)
	c.counts.Backdated++
}

// timer stops a running entry, or starts one.
func (c *EntryChurn[ID]) timer() {
	e, ok := c.pick()
	if !ok {
		return
	}
	now := c.store.Stamp()
	if e.Stop == nil {
		stop := now.Truncate(time.Second)
		if !stop.After(e.Start) {
			stop = e.Start.Add(time.Minute)
		}
		e.Stop, e.Version = &stop, now
		c.describe(&e)
		c.store.Put(e)
	} else {
		n := c.newEntry(now.Add(-time.Duration(c.s.Rand.IntN(3600))*time.Second).Truncate(time.Second), now)
		c.store.Put(n)
		c.s.Add(n.ID)
	}
	c.counts.Timers++
}

func (c *EntryChurn[ID]) touchProject(t ProjectToucher[ID]) {
	t.TouchProject(c.projects[c.s.Rand.IntN(len(c.projects))], c.s.Rev())
	c.counts.Projects++
}
