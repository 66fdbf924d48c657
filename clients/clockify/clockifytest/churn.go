package clockifytest

import (
	"fmt"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
)

// NewChurn puts p's users, projects and time entries into s and returns
// the stream that mutates the entries, like a live workspace
// (fakeapi.EntryChurn). Per-user listings (backfill, reconcile) need the
// users (Users). Ids come from NewID, stamps from the server's clock:
// drive it with a fakeapi.Clock to make changes reach the feed's windows.
func NewChurn(s *Server, p fakeapi.ChurnParams) *fakeapi.EntryChurn[string] {
	return fakeapi.NewEntryChurn(churnStore{s}, p)
}

// churnStore is s as an EntryChurn sees it.
type churnStore struct{ s *Server }

func (c churnStore) Stamp() time.Time { return c.s.stamp() }
func (c churnStore) NewID() string    { return NewID() }

func (c churnStore) PutUser(i int, at time.Time) string {
	u := User{ID: NewID(), Name: fmt.Sprintf("User %d", i), Email: fmt.Sprintf("user%d@example.com", i), UpdatedAt: at}
	c.s.PutUser(u)
	return u.ID
}

func (c churnStore) PutProject(i int, at time.Time) string {
	p := Project{ID: NewID(), Name: fmt.Sprintf("Project %d", i), Billable: i%2 == 0, UpdatedAt: at}
	c.s.PutProject(p)
	return p.ID
}

func (c churnStore) Entry(id string) (fakeapi.Entry[string], bool) {
	e, ok := c.s.TimeEntry(id)
	return fakeapi.Entry[string]{ID: e.ID, UserID: e.UserID, ProjectID: e.ProjectID, Billable: e.Billable,
		Notes: e.Description, Start: e.Start, Stop: e.End, Version: e.UpdatedAt}, ok
}

// Put writes e over the stored entry (a new one is created at its
// version).
func (c churnStore) Put(e fakeapi.Entry[string]) {
	te, _ := c.s.TimeEntry(e.ID)
	te.ID, te.UserID, te.ProjectID, te.Billable, te.Description = e.ID, e.UserID, e.ProjectID, e.Billable, e.Notes
	te.Start, te.End, te.UpdatedAt = e.Start, e.Stop, e.Version
	c.s.PutTimeEntry(te)
}

func (c churnStore) Delete(id string) bool { return c.s.Delete(clients.TimeEntries, id) }
