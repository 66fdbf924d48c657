package toggltest

import (
	"fmt"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
)

// NewChurn puts p's users, projects and time entries into s (stamped in
// the past on s's clock) and returns the stream that mutates them, like a
// live account (fakeapi.EntryChurn): deletions set server_deleted_at, and
// projects are renamed or (de)activated too. Entries whose `at` is older
// than the server's SinceLimit are reachable only through
// start_date/end_date listings (backfill).
func NewChurn(s *Server, p fakeapi.ChurnParams) *fakeapi.EntryChurn[int64] {
	return fakeapi.NewEntryChurn(&churnStore{s: s, projects: map[int64]Project{}}, p)
}

// churnStore is s as an EntryChurn sees it.
type churnStore struct {
	s        *Server
	nextID   int64
	projects map[int64]Project
}

func (c *churnStore) Stamp() time.Time { return c.s.stamp() }

func (c *churnStore) NewID() int64 {
	c.nextID++
	return c.nextID
}

func (c *churnStore) PutUser(i int, at time.Time) int64 {
	id := int64(100 + i)
	c.s.PutUser(User{ID: id, Email: fmt.Sprintf("user%d@example.com", id), Fullname: fmt.Sprintf("User %d", id), At: at})
	return id
}

func (c *churnStore) PutProject(i int, at time.Time) int64 {
	id := int64(500 + i)
	c.projects[id] = Project{ID: id, Name: fmt.Sprintf("Project %d", id), Active: true, Billable: i%2 == 0, At: at}
	c.s.PutProject(c.projects[id])
	return id
}

func (c *churnStore) Entry(id int64) (fakeapi.Entry[int64], bool) {
	e, ok := c.s.TimeEntry(id)
	if !ok || e.DeletedAt != nil {
		return fakeapi.Entry[int64]{}, false
	}
	return fakeapi.Entry[int64]{ID: e.ID, UserID: e.UserID, ProjectID: e.ProjectID, Billable: e.Billable,
		Notes: e.Description, Start: e.Start, Stop: e.Stop, Version: e.At}, true
}

// Put writes e over the stored entry; Duration follows from the stop, or
// is -start for a running timer, as Toggl sends it.
func (c *churnStore) Put(e fakeapi.Entry[int64]) {
	te, _ := c.s.TimeEntry(e.ID)
	te.ID, te.UserID, te.ProjectID, te.Billable, te.Description = e.ID, e.UserID, e.ProjectID, e.Billable, e.Notes
	te.Start, te.Stop, te.At = e.Start, e.Stop, e.Version
	te.Duration = -e.Start.Unix()
	if e.Stop != nil {
		te.Duration = int64(e.Stop.Sub(e.Start) / time.Second)
	}
	c.s.PutTimeEntry(te)
}

func (c *churnStore) Delete(id int64) bool { return c.s.Delete(clients.TimeEntries, id) }

func (c *churnStore) TouchProject(id int64, rev int) {
	p := c.projects[id]
	p.Name = fmt.Sprintf("Project %d rev %d", p.ID, rev)
	p.Active = !p.Active
	p.At = c.s.stamp()
	c.projects[id] = p
	c.s.PutProject(p)
}
