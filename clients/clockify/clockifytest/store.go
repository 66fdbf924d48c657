package clockifytest

import (
	"fmt"
	"sync"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
)

// TimeEntry is a stored time entry.
type TimeEntry struct {
	ID, UserID        string
	ProjectID, TaskID string // "" renders null
	// ClientID, when set, is rendered as the entry's clientId (Clockify
	// does not always send it).
	ClientID    string
	Description *string
	Billable    bool
	IsLocked    bool
	Start       time.Time
	End         *time.Time // nil: running
	// Duration, when set, is rendered as is (e.g. a malformed one);
	// otherwise it is End − Start as PTnHnMnS, or null while running.
	Duration string
	// CreatedAt and UpdatedAt are the change stamps the feed reports. Zero
	// values become the source's now (CreatedAt: kept from the stored
	// entry on an update).
	CreatedAt, UpdatedAt time.Time
}

// Project is a stored project.
type Project struct {
	ID, Name, ClientID string
	Archived, Billable bool
	UpdatedAt          time.Time
}

// Client is a stored client.
type Client struct {
	ID, Name, CurrencyCode string
	Archived               bool
	UpdatedAt              time.Time
}

// User is a stored user. Status defaults to ACTIVE.
type User struct {
	ID, Name, Email, Status string
	UpdatedAt               time.Time
}

// Task is a stored task of a project. Status defaults to ACTIVE.
type Task struct {
	ID, ProjectID, Name, Status string
	UpdatedAt                   time.Time
}

type deletion struct {
	at, createdAt time.Time
	last          any
}

type store struct {
	entries  map[string]TimeEntry
	projects map[string]Project
	clients  map[string]Client
	users    map[string]User
	tasks    map[string]Task
	deleted  map[clients.Resource]map[string]deletion
}

func newStore() *store {
	return &store{
		entries: map[string]TimeEntry{}, projects: map[string]Project{}, clients: map[string]Client{},
		users: map[string]User{}, tasks: map[string]Task{}, deleted: map[clients.Resource]map[string]deletion{},
	}
}

var idSeq struct {
	sync.Mutex
	n uint64
}

// NewID returns a fresh 24-hex-digit id, like Clockify's.
func NewID() string {
	idSeq.Lock()
	defer idSeq.Unlock()
	idSeq.n++
	return fmt.Sprintf("65f0%020x", idSeq.n)
}

// stamp is the source's clock at Clockify's millisecond precision.
func (s *Server) stamp() time.Time { return s.Now().UTC().Truncate(time.Millisecond) }

// PutTimeEntry inserts or replaces an entry (a re-created id leaves the
// deletion log).
func (s *Server) PutTimeEntry(e TimeEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.stamp()
	if e.UpdatedAt.IsZero() {
		e.UpdatedAt = now
	}
	if e.CreatedAt.IsZero() {
		if old, ok := s.st.entries[e.ID]; ok {
			e.CreatedAt = old.CreatedAt
		} else {
			e.CreatedAt = e.UpdatedAt
		}
	}
	e.CreatedAt, e.UpdatedAt = e.CreatedAt.UTC(), e.UpdatedAt.UTC()
	e.Start = e.Start.UTC()
	s.st.entries[e.ID] = e
	delete(s.st.deleted[clients.TimeEntries], e.ID)
	delete(s.visibleAt, e.ID)
	if d := s.late.Next(); d > 0 {
		s.visibleAt[e.ID] = e.UpdatedAt.Add(d)
	}
}

// PutProject inserts or replaces a project.
func (s *Server) PutProject(p Project) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p.UpdatedAt = s.or(p.UpdatedAt)
	s.st.projects[p.ID] = p
	delete(s.st.deleted[clients.Projects], p.ID)
}

// PutClient inserts or replaces a client.
func (s *Server) PutClient(c Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.UpdatedAt = s.or(c.UpdatedAt)
	s.st.clients[c.ID] = c
	delete(s.st.deleted[clients.Clients], c.ID)
}

// PutUser inserts or replaces a user.
func (s *Server) PutUser(u User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u.UpdatedAt = s.or(u.UpdatedAt)
	if u.Status == "" {
		u.Status = "ACTIVE"
	}
	s.st.users[u.ID] = u
	delete(s.st.deleted[clients.Users], u.ID)
}

// PutTask inserts or replaces a task.
func (s *Server) PutTask(t Task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t.UpdatedAt = s.or(t.UpdatedAt)
	if t.Status == "" {
		t.Status = "ACTIVE"
	}
	s.st.tasks[t.ID] = t
	delete(s.st.deleted[clients.Tasks], t.ID)
}

func (s *Server) or(t time.Time) time.Time {
	if t.IsZero() {
		return s.stamp()
	}
	return t.UTC()
}

// Delete removes a record now (source clock). It vanishes from listings at
// once; a time entry's deletion reaches /entities/deleted DeletionDelay
// later. It reports whether the id existed.
func (s *Server) Delete(r clients.Resource, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	var last any
	var created time.Time
	switch r {
	case clients.TimeEntries:
		e, ok := s.st.entries[id]
		if !ok {
			return false
		}
		last, created = e, e.CreatedAt
		delete(s.st.entries, id)
	case clients.Projects:
		v, ok := s.st.projects[id]
		if !ok {
			return false
		}
		last = v
		delete(s.st.projects, id)
	case clients.Clients:
		v, ok := s.st.clients[id]
		if !ok {
			return false
		}
		last = v
		delete(s.st.clients, id)
	case clients.Users:
		v, ok := s.st.users[id]
		if !ok {
			return false
		}
		last = v
		delete(s.st.users, id)
	case clients.Tasks:
		v, ok := s.st.tasks[id]
		if !ok {
			return false
		}
		last = v
		delete(s.st.tasks, id)
	default:
		return false
	}
	if s.st.deleted[r] == nil {
		s.st.deleted[r] = map[string]deletion{}
	}
	s.st.deleted[r][id] = deletion{at: s.stamp(), createdAt: created, last: last}
	return true
}

// TimeEntry returns an entry's current state.
func (s *Server) TimeEntry(id string) (TimeEntry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.st.entries[id]
	return e, ok
}

// Versions returns r's live ids with their last change stamp (for time
// entries, what the feed reports; for the rest, when the fake last stored
// them: Clockify exposes no stamp for those).
func (s *Server) Versions(r clients.Resource) map[string]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]time.Time{}
	switch r {
	case clients.TimeEntries:
		for id, v := range s.st.entries {
			out[id] = v.UpdatedAt
		}
	case clients.Projects:
		for id, v := range s.st.projects {
			out[id] = v.UpdatedAt
		}
	case clients.Clients:
		for id, v := range s.st.clients {
			out[id] = v.UpdatedAt
		}
	case clients.Users:
		for id, v := range s.st.users {
			out[id] = v.UpdatedAt
		}
	case clients.Tasks:
		for id, v := range s.st.tasks {
			out[id] = v.UpdatedAt
		}
	}
	return out
}

// Deleted returns r's deleted ids with when they were deleted (source
// clock). An id deleted and put again is not here.
func (s *Server) Deleted(r clients.Resource) map[string]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]time.Time{}
	for id, d := range s.st.deleted[r] {
		out[id] = d.at
	}
	return out
}

// Live returns r's live records as a correct client normalizes them: id
// and typed fields (no Version, Raw or FetchedAt), keyed by id.
func (s *Server) Live(r clients.Resource) map[string]clients.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]clients.Record{}
	switch r {
	case clients.TimeEntries:
		for id, e := range s.st.entries {
			out[id] = clients.Record{ID: id, TimeEntry: expectEntry(e)}
		}
	case clients.Projects:
		for id, p := range s.st.projects {
			out[id] = clients.Record{ID: id, Project: &clients.Project{Name: p.Name, ClientID: p.ClientID, IsActive: !p.Archived, IsBillable: p.Billable}}
		}
	case clients.Clients:
		for id, c := range s.st.clients {
			out[id] = clients.Record{ID: id, Client: &clients.Client{Name: c.Name, Currency: c.CurrencyCode, IsActive: !c.Archived}}
		}
	case clients.Users:
		for id, u := range s.st.users {
			out[id] = clients.Record{ID: id, User: &clients.User{FirstName: u.Name, Email: u.Email, IsActive: u.Status == "ACTIVE"}}
		}
	case clients.Tasks:
		for id, t := range s.st.tasks {
			out[id] = clients.Record{ID: id, Task: &clients.Task{Name: t.Name, IsActive: t.Status == "ACTIVE"}}
		}
	}
	return out
}

func expectEntry(e TimeEntry) *clients.TimeEntry {
	te := &clients.TimeEntry{
		SpentDate: clients.DateOf(e.Start.UTC()), Notes: e.Description, UserID: e.UserID,
		ProjectID: e.ProjectID, TaskID: e.TaskID, ClientID: e.ClientID,
		Billable: e.Billable, IsLocked: e.IsLocked, IsRunning: e.End == nil, Hours: "0",
	}
	if e.End != nil {
		te.Hours = clients.Decimal(hoursText(e.End.Sub(e.Start)))
	}
	return te
}

// hoursText renders d in hours with up to six decimals, rounded half up.
func hoursText(d time.Duration) string {
	micro := (int64(d) + 1_800_000) / 3_600_000
	s := fmt.Sprintf("%d.%06d", micro/1_000_000, micro%1_000_000)
	for s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	if s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	return s
}

// isoDuration renders d as Clockify does: PT8H30M, PT45M, PT1H0M30S, PT0S.
func isoDuration(d time.Duration) string {
	secs := int64(d / time.Second)
	h, m, sec := secs/3600, secs/60%60, secs%60
	switch {
	case secs == 0:
		return "PT0S"
	case sec != 0 && h != 0:
		return fmt.Sprintf("PT%dH%dM%dS", h, m, sec)
	}
	out := "PT"
	if h != 0 {
		out += fmt.Sprintf("%dH", h)
	}
	if m != 0 {
		out += fmt.Sprintf("%dM", m)
	}
	if sec != 0 {
		out += fmt.Sprintf("%dS", sec)
	}
	return out
}
