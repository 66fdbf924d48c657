package toggltest

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
	// Seed makes the data and the mutation stream deterministic (their
	// stamps still come from the server's clock).
	Seed uint64
	// Entries is the number of time entries NewChurn puts (default 200);
	// Days the history they, and back-dated creates, span (default 30).
	// Entries whose `at` is older than the server's SinceLimit are reachable
	// only through start_date/end_date listings (backfill).
	Entries, Days int
	// Users and Projects are how many of each NewChurn puts (default 3
	// and 5).
	Users, Projects int
}

// ChurnCounts counts the mutations a Churn applied, by kind.
type ChurnCounts struct {
	Created, BackdatedCreates, Updated, DoubleUpdates, Deleted, Backdated, Timers, Projects int
}

// Churn is a seeded mutation stream over a Server, like a live account:
// creates (today or back-dated), edits, two edits within one second (the
// two states share `at`), deletions (server_deleted_at), entries moved to
// an earlier day, timers started and stopped, and projects renamed or
// (de)activated. Every entry state gets a description of its own ("entry
// <id> rev <n>"), so that a mirror's notes tell which state it holds.
type Churn struct {
	s *Server

	mu       sync.Mutex
	rng      *rand.Rand
	days     int
	users    []int64
	projects []Project
	live     []int64
	nextID   int64
	rev      int
	counts   ChurnCounts
}

// NewChurn puts p's users, projects and time entries into s (stamped in
// the past on s's clock) and returns the stream that mutates them.
func NewChurn(s *Server, p ChurnParams) *Churn {
	p.Entries = cmp.Or(p.Entries, 200)
	p.Days = max(cmp.Or(p.Days, 30), 2)
	p.Users = cmp.Or(p.Users, 3)
	p.Projects = cmp.Or(p.Projects, 5)
	c := &Churn{s: s, rng: rand.New(rand.NewPCG(p.Seed, 0x70991)), days: p.Days, nextID: 1}
	now := s.stamp()
	for i := range p.Users {
		id := int64(100 + i)
		s.PutUser(User{ID: id, Email: fmt.Sprintf("user%d@example.com", id), Fullname: fmt.Sprintf("User %d", id), At: now.Add(-time.Duration(p.Days+1) * 24 * time.Hour)})
		c.users = append(c.users, id)
	}
	for i := range p.Projects {
		id := int64(500 + i)
		pr := Project{ID: id, Name: fmt.Sprintf("Project %d", id), Active: true, Billable: i%2 == 0,
			At: now.Add(-time.Duration(p.Days+1) * 24 * time.Hour)}
		s.PutProject(pr)
		c.projects = append(c.projects, pr)
	}
	for range p.Entries {
		start := now.Add(-time.Duration(c.rng.Int64N(int64(p.Days) * int64(24*time.Hour)))).Truncate(time.Second)
		dur := time.Duration(15+c.rng.IntN(480)) * time.Minute
		stop := start.Add(dur)
		at := stop.Add(time.Duration(c.rng.IntN(3600)) * time.Second)
		if at.After(now) {
			at = now.Add(-time.Minute)
		}
		e := c.newEntry(start, at)
		e.Stop, e.Duration = &stop, int64(dur/time.Second)
		s.PutTimeEntry(e)
		c.live = append(c.live, e.ID)
	}
	return c
}

func (c *Churn) newEntry(start, at time.Time) TimeEntry {
	id := c.nextID
	c.nextID++
	return TimeEntry{
		ID: id, UserID: c.users[c.rng.IntN(len(c.users))], ProjectID: c.projects[c.rng.IntN(len(c.projects))].ID,
		Billable: c.rng.IntN(2) == 0, Description: c.describe(id), Start: start, At: at,
	}
}

func (c *Churn) describe(id int64) *string {
	c.rev++
	d := fmt.Sprintf("entry %d rev %d", id, c.rev)
	return &d
}

// Counts returns how many mutations of each kind were applied.
func (c *Churn) Counts() ChurnCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts
}

// Live returns the ids of the entries the stream has not deleted.
func (c *Churn) Live() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.live)
}

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
		case k < 60:
			c.update(false)
		case k < 70:
			c.update(true)
		case k < 80:
			c.delete()
		case k < 88:
			c.backdate()
		case k < 95:
			c.timer()
		default:
			c.touchProject()
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
		if e, ok := c.s.TimeEntry(c.live[i]); ok && e.DeletedAt == nil {
			return e, true
		}
		c.forget(i)
	}
	return TimeEntry{}, false
}

func (c *Churn) forget(i int) {
	c.live[i] = c.live[len(c.live)-1]
	c.live = c.live[:len(c.live)-1]
}

func (c *Churn) create(backdated bool) {
	now := c.s.stamp()
	start := now.Add(-time.Duration(1+c.rng.IntN(8)) * time.Hour)
	if backdated {
		start = start.AddDate(0, 0, -1-c.rng.IntN(c.days-1))
		c.counts.BackdatedCreates++
	} else {
		c.counts.Created++
	}
	e := c.newEntry(start, now)
	dur := time.Duration(15+c.rng.IntN(240)) * time.Minute
	stop := start.Add(dur)
	e.Stop, e.Duration = &stop, int64(dur/time.Second)
	c.s.PutTimeEntry(e)
	c.live = append(c.live, e.ID)
}

// update edits an entry; double: twice with the same `at` (one second).
func (c *Churn) update(double bool) {
	e, ok := c.pick()
	if !ok {
		return
	}
	e.At = c.s.stamp()
	for range 1 + btoi(double) {
		e.Description = c.describe(e.ID)
		e.Billable = !e.Billable
		if !e.Running() {
			e.Duration = int64(15+c.rng.IntN(480)) * 60
			stop := e.Start.Add(time.Duration(e.Duration) * time.Second)
			e.Stop = &stop
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
	c.live = slices.DeleteFunc(c.live, func(id int64) bool { return id == e.ID })
}

// backdate moves an entry 1 to Days-1 days earlier.
func (c *Churn) backdate() {
	e, ok := c.pick()
	if !ok {
		return
	}
	shift := time.Duration(1+c.rng.IntN(c.days-1)) * 24 * time.Hour
	e.Start = e.Start.Add(-shift)
	if e.Running() {
		e.Duration = -e.Start.Unix()
	} else if e.Stop != nil {
		stop := e.Stop.Add(-shift)
		e.Stop = &stop
	}
	e.Description, e.At = c.describe(e.ID), c.s.stamp()
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
	if e.Running() {
		stop := now
		if !stop.After(e.Start) {
			stop = e.Start.Add(time.Minute)
		}
		e.Stop, e.Duration = &stop, int64(stop.Sub(e.Start)/time.Second)
		e.Description, e.At = c.describe(e.ID), now
		c.s.PutTimeEntry(e)
	} else {
		n := c.newEntry(now.Add(-time.Duration(c.rng.IntN(3600))*time.Second), now)
		n.Duration = -n.Start.Unix()
		c.s.PutTimeEntry(n)
		c.live = append(c.live, n.ID)
	}
	c.counts.Timers++
}

func (c *Churn) touchProject() {
	i := c.rng.IntN(len(c.projects))
	p := &c.projects[i]
	c.rev++
	p.Name = fmt.Sprintf("Project %d rev %d", p.ID, c.rev)
	p.Active = !p.Active
	p.At = c.s.stamp()
	c.s.PutProject(*p)
	c.counts.Projects++
}
