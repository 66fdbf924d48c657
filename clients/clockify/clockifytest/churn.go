package clockifytest

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
)

// ChurnParams configures a Churn.
type ChurnParams struct {
	// Seed makes the data and the mutation stream deterministic (ids come
	// from NewID, stamps from the server's clock).
	Seed uint64
	// Entries is the number of time entries NewChurn puts (default 200),
	// stamped in the past; Days the history they, and back-dated creates,
	// span (default 30).
	Entries, Days int
	// Users and Projects are how many of each NewChurn puts (default 3 and
	// 5). Per-user listings (backfill, reconcile) need the users.
	Users, Projects int
}

// ChurnCounts counts the mutations a Churn applied, by kind.
type ChurnCounts struct {
	Created, BackdatedCreates, Updated, DoubleUpdates, Deleted, Backdated, Timers int
}

// Churn is a seeded mutation stream over a Server's time entries, like a
// live workspace: creates (today or back-dated), edits, two edits with one
// stamp, deletions, entries moved to an earlier day, timers started and
// stopped. Every entry state gets a description of its own ("entry <id>
// rev <n>"), so that a mirror's notes tell which state it holds. Stamps
// come from the server's clock: drive it with a Clock to make changes
// reach the feed's windows.
type Churn struct {
	s *Server

	mu       sync.Mutex
	rng      *rand.Rand
	days     int
	users    []string
	projects []string
	live     []string
	rev      int
	counts   ChurnCounts
}

// NewChurn puts p's users, projects and time entries into s and returns
// the stream that mutates them.
func NewChurn(s *Server, p ChurnParams) *Churn {
	p.Entries = cmp.Or(p.Entries, 200)
	p.Days = max(cmp.Or(p.Days, 30), 2)
	p.Users = cmp.Or(p.Users, 3)
	p.Projects = cmp.Or(p.Projects, 5)
	c := &Churn{s: s, rng: rand.New(rand.NewPCG(p.Seed, 0xc10c)), days: p.Days}
	now := s.stamp()
	old := now.Add(-time.Duration(p.Days+1) * 24 * time.Hour)
	for i := range p.Users {
		u := User{ID: NewID(), Name: fmt.Sprintf("User %d", i), Email: fmt.Sprintf("user%d@example.com", i), UpdatedAt: old}
		s.PutUser(u)
		c.users = append(c.users, u.ID)
	}
	for i := range p.Projects {
		pr := Project{ID: NewID(), Name: fmt.Sprintf("Project %d", i), Billable: i%2 == 0, UpdatedAt: old}
		s.PutProject(pr)
		c.projects = append(c.projects, pr.ID)
	}
	for range p.Entries {
		start := now.Add(-time.Duration(c.rng.Int64N(int64(p.Days) * int64(24*time.Hour)))).Truncate(time.Second)
		end := start.Add(time.Duration(15+c.rng.IntN(480)) * time.Minute)
		at := end.Add(time.Duration(c.rng.IntN(3600)) * time.Second)
		if at.After(now) {
			at = now.Add(-time.Hour)
		}
		e := c.newEntry(start)
		e.End, e.CreatedAt, e.UpdatedAt = &end, at, at
		s.PutTimeEntry(e)
		c.live = append(c.live, e.ID)
	}
	return c
}

func (c *Churn) newEntry(start time.Time) TimeEntry {
	e := TimeEntry{
		ID: NewID(), UserID: c.users[c.rng.IntN(len(c.users))], ProjectID: c.projects[c.rng.IntN(len(c.projects))],
		Billable: c.rng.IntN(2) == 0, Start: start,
	}
	e.Description = c.describe(e.ID)
	return e
}

func (c *Churn) describe(id string) *string {
	c.rev++
	d := fmt.Sprintf("entry %s rev %d", id, c.rev)
	return &d
}

// Counts returns how many mutations of each kind were applied.
func (c *Churn) Counts() ChurnCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts
}

// Users returns the ids of the users NewChurn put.
func (c *Churn) Users() []string { return slices.Clone(c.users) }

// Step applies n mutations, chosen from the seed.
func (c *Churn) Step(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for range n {
		switch k := c.rng.IntN(100); {
		case k < 25 || len(c.live) < 10:
			c.create(false)
		case k < 35:
			c.create(true)
		case k < 62:
			c.update(false)
		case k < 72:
			c.update(true)
		case k < 82:
			c.delete()
		case k < 92:
			c.backdate()
		default:
			c.timer()
		}
	}
}

// Run applies perTick mutations every interval until ctx ends.
func (c *Churn) Run(ctx context.Context, every time.Duration, perTick int) error {
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tk.C:
			c.Step(perTick)
		}
	}
}

func (c *Churn) pick() (TimeEntry, bool) {
	for len(c.live) > 0 {
		i := c.rng.IntN(len(c.live))
		if e, ok := c.s.TimeEntry(c.live[i]); ok {
			return e, true
		}
		c.live[i] = c.live[len(c.live)-1]
		c.live = c.live[:len(c.live)-1]
	}
	return TimeEntry{}, false
}

func (c *Churn) create(backdated bool) {
	now := c.s.stamp()
	start := now.Add(-time.Duration(1+c.rng.IntN(8)) * time.Hour).Truncate(time.Second)
	if backdated {
		start = start.AddDate(0, 0, -1-c.rng.IntN(c.days-1))
		c.counts.BackdatedCreates++
	} else {
		c.counts.Created++
	}
	e := c.newEntry(start)
	end := start.Add(time.Duration(15+c.rng.IntN(240)) * time.Minute)
	e.End, e.CreatedAt, e.UpdatedAt = &end, now, now
	c.s.PutTimeEntry(e)
	c.live = append(c.live, e.ID)
}

// update edits an entry; double: twice with the same stamp.
func (c *Churn) update(double bool) {
	e, ok := c.pick()
	if !ok {
		return
	}
	e.UpdatedAt = c.s.stamp()
	for range 1 + btoi(double) {
		e.Description = c.describe(e.ID)
		e.Billable = !e.Billable
		if e.End != nil {
			end := e.Start.Add(time.Duration(15+c.rng.IntN(480)) * time.Minute)
			e.End = &end
		}
		c.s.PutTimeEntry(e)
	}
	if double {
		c.counts.DoubleUpdates++
	} else {
		c.counts.Updated++
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (c *Churn) delete() {
	e, ok := c.pick()
	if !ok {
		return
	}
	if c.s.Delete(clients.TimeEntries, e.ID) {
		c.counts.Deleted++
	}
	c.live = slices.DeleteFunc(c.live, func(id string) bool { return id == e.ID })
}

// backdate moves an entry 1 to Days-1 days earlier.
func (c *Churn) backdate() {
	e, ok := c.pick()
	if !ok {
		return
	}
	shift := time.Duration(1+c.rng.IntN(c.days-1)) * 24 * time.Hour
	e.Start = e.Start.Add(-shift)
	if e.End != nil {
		end := e.End.Add(-shift)
		e.End = &end
	}
	e.Description, e.UpdatedAt = c.describe(e.ID), time.Time{}
	c.s.PutTimeEntry(e)
	c.counts.Backdated++
}

// timer stops a running entry, or starts one.
func (c *Churn) timer() {
	e, ok := c.pick()
	if !ok {
		return
	}
	now := c.s.stamp()
	if e.End == nil {
		end := now.Truncate(time.Second)
		if !end.After(e.Start) {
			end = e.Start.Add(time.Minute)
		}
		e.End, e.Description, e.UpdatedAt = &end, c.describe(e.ID), now
		c.s.PutTimeEntry(e)
	} else {
		n := c.newEntry(now.Add(-time.Duration(c.rng.IntN(3600)) * time.Second).Truncate(time.Second))
		n.CreatedAt, n.UpdatedAt = now, now
		c.s.PutTimeEntry(n)
		c.live = append(c.live, n.ID)
	}
	c.counts.Timers++
}
