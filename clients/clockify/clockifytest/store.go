package clockifytest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/schema"
)

// TimeEntry is a stored time entry.
type TimeEntry struct {
	ID, UserID        string
	ProjectID, TaskID string // "" renders null
	// ClientID, when set, is rendered as the entry's clientId. Real
	// non-hydrated entries never carry it: leave it empty and the client
	// must take it from the project (Live does the same).
	ClientID string
	// TimeZone, when set, is rendered as timeInterval.timeZone, with
	// start and end in that zone's offset and offStart, offEnd,
	// zonedStart and zonedEnd, as newer real bodies have them.
	TimeZone string
	// NumericDuration renders the duration as a number of seconds (4), as
	// newer real bodies do, instead of ISO 8601 text.
	NumericDuration bool
	// TagIDs are rendered as tagIds (nil: []).
	TagIDs      []string
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

// User is a stored user. Status defaults to ACTIVE, TimeZone (its
// settings.timeZone) to DefaultUserTimeZone; NoTimeZone sends none.
type User struct {
	ID, Name, Email, Status string
	TimeZone                string
	NoTimeZone              bool
	UpdatedAt               time.Time
}

// DefaultUserTimeZone is a stored user's settings.timeZone by default.
const DefaultUserTimeZone = "Europe/Berlin"

// zone is the user's settings.timeZone as served.
func (u User) zone() string {
	if u.NoTimeZone {
		return ""
	}
	if u.TimeZone == "" {
		return DefaultUserTimeZone
	}
	return u.TimeZone
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

// table holds one resource's live records by id.
type table[T any] struct {
	rows map[string]T
	// fields points at what every record has: its id and its last change.
	fields func(*T) (id string, updated *time.Time)
}

// records is a table whatever its record type (TimeEntry, Project, Client,
// User or Task in an any).
type records interface {
	put(v any) (id string)
	has(v any) bool // a record with v's id is stored
	remove(id string) (any, bool)
	updated(v any) time.Time
	withUpdated(v any, t time.Time) any
	versions() map[string]time.Time
}

func newTable[T any](fields func(*T) (string, *time.Time)) *table[T] {
	return &table[T]{rows: map[string]T{}, fields: fields}
}

func (t *table[T]) put(x any) string {
	v := x.(T)
	id, _ := t.fields(&v)
	t.rows[id] = v
	return id
}

func (t *table[T]) has(x any) bool {
	v := x.(T)
	id, _ := t.fields(&v)
	_, ok := t.rows[id]
	return ok
}

func (t *table[T]) remove(id string) (any, bool) {
	v, ok := t.rows[id]
	delete(t.rows, id)
	return v, ok
}

func (t *table[T]) updated(x any) time.Time {
	v := x.(T)
	_, u := t.fields(&v)
	return *u
}

func (t *table[T]) withUpdated(x any, at time.Time) any {
	v := x.(T)
	_, u := t.fields(&v)
	*u = at
	return v
}

func (t *table[T]) versions() map[string]time.Time {
	out := make(map[string]time.Time, len(t.rows))
	for id, v := range t.rows {
		_, u := t.fields(&v)
		out[id] = *u
	}
	return out
}

// store holds the five resources, by type for rendering and by resource
// for the rest, and the deletion log.
type store struct {
	entries  *table[TimeEntry]
	projects *table[Project]
	clients  *table[Client]
	users    *table[User]
	tasks    *table[Task]
	by       map[clients.Resource]records
	deleted  map[clients.Resource]map[string]deletion
}

func newStore() *store {
	st := &store{
		entries:  newTable(func(e *TimeEntry) (string, *time.Time) { return e.ID, &e.UpdatedAt }),
		projects: newTable(func(p *Project) (string, *time.Time) { return p.ID, &p.UpdatedAt }),
		clients:  newTable(func(c *Client) (string, *time.Time) { return c.ID, &c.UpdatedAt }),
		users:    newTable(func(u *User) (string, *time.Time) { return u.ID, &u.UpdatedAt }),
		tasks:    newTable(func(t *Task) (string, *time.Time) { return t.ID, &t.UpdatedAt }),
		deleted:  map[clients.Resource]map[string]deletion{},
	}
	st.by = map[clients.Resource]records{
		clients.TimeEntries: st.entries, clients.Projects: st.projects, clients.Clients: st.clients,
		clients.Users: st.users, clients.Tasks: st.tasks,
	}
	return st
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
		if old, ok := s.st.entries.rows[e.ID]; ok {
			e.CreatedAt = old.CreatedAt
		} else {
			e.CreatedAt = e.UpdatedAt
		}
	}
	e.CreatedAt, e.UpdatedAt = e.CreatedAt.UTC(), e.UpdatedAt.UTC()
	e.Start = e.Start.UTC()
	_, existed := s.st.entries.rows[e.ID]
	s.st.entries.rows[e.ID] = e
	defer s.emit(clients.TimeEntries, map[bool]string{true: "updated", false: "created"}[existed], e)
	delete(s.st.deleted[clients.TimeEntries], e.ID)
	delete(s.visibleAt, e.ID)
	if d := s.late.Next(); d > 0 {
		s.visibleAt[e.ID] = e.UpdatedAt.Add(d)
	}
}

// PutProject inserts or replaces a project.
func (s *Server) PutProject(p Project) { s.put(clients.Projects, p) }

// PutClient inserts or replaces a client.
func (s *Server) PutClient(c Client) { s.put(clients.Clients, c) }

// PutUser inserts or replaces a user.
func (s *Server) PutUser(u User) {
	u.Status = cmp.Or(u.Status, "ACTIVE")
	s.put(clients.Users, u)
}

// PutTask inserts or replaces a task.
func (s *Server) PutTask(t Task) {
	t.Status = cmp.Or(t.Status, "ACTIVE")
	s.put(clients.Tasks, t)
}

// put stores v, stamped now unless it has a stamp (a re-created id leaves
// the deletion log).
func (s *Server) put(r clients.Resource, v any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.st.by[r]
	at := t.updated(v)
	if at.IsZero() {
		at = s.stamp()
	}
	v = t.withUpdated(v, at.UTC())
	existed := t.has(v)
	delete(s.st.deleted[r], t.put(v))
	s.emit(r, map[bool]string{true: "updated", false: "created"}[existed], v)
}

// Delete removes a record now (source clock). It vanishes from listings at
// once; a time entry's deletion reaches /entities/deleted DeletionDelay
// later. It reports whether the id existed.
func (s *Server) Delete(r clients.Resource, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.st.by[r]
	if !ok {
		return false
	}
	last, ok := t.remove(id)
	if !ok {
		return false
	}
	var created time.Time
	if e, ok := last.(TimeEntry); ok {
		created = e.CreatedAt
	}
	if s.st.deleted[r] == nil {
		s.st.deleted[r] = map[string]deletion{}
	}
	s.st.deleted[r][id] = deletion{at: s.stamp(), createdAt: created, last: last}
	s.emit(r, "deleted", last)
	return true
}

// TimeEntry returns an entry's current state.
func (s *Server) TimeEntry(id string) (TimeEntry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.st.entries.rows[id]
	return e, ok
}

// Versions returns r's live ids with their last change stamp (for time
// entries, what the feed reports; for the rest, when the fake last stored
// them: Clockify exposes no stamp for those).
func (s *Server) Versions(r clients.Resource) map[string]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.st.by[r]; ok {
		return t.versions()
	}
	return map[string]time.Time{}
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
// and row (no Version, Raw or FetchedAt), keyed by id.
func (s *Server) Live(r clients.Resource) map[string]clients.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]clients.Record{}
	switch r {
	case clients.TimeEntries:
		for id, e := range s.st.entries.rows {
			out[id] = clients.Record{ID: id, Row: s.st.expectEntry(e)}
		}
	case clients.Projects:
		for id, p := range s.st.projects.rows {
			out[id] = clients.Record{ID: id, Row: schema.Projects.Row(schema.Values{
				"name": p.Name, "client_id": p.ClientID, "is_active": !p.Archived, "is_billable": p.Billable})}
		}
	case clients.Clients:
		for id, c := range s.st.clients.rows {
			out[id] = clients.Record{ID: id, Row: schema.Clients.Row(schema.Values{
				"name": c.Name, "currency": c.CurrencyCode, "is_active": !c.Archived})}
		}
	case clients.Users:
		for id, u := range s.st.users.rows {
			out[id] = clients.Record{ID: id, Row: schema.Users.Row(schema.Values{
				"first_name": u.Name, "email": u.Email, "is_active": u.Status == "ACTIVE"})}
		}
	case clients.Tasks:
		for id, t := range s.st.tasks.rows {
			out[id] = clients.Record{ID: id, Row: schema.Tasks.Row(schema.Values{"name": t.Name, "is_active": t.Status == "ACTIVE"})}
		}
	}
	return out
}

// expectEntry is the row a correct client makes of e: dated in e's zone,
// else its user's (when the user is stored), else UTC; the client from e,
// else from its project (when stored).
func (st *store) expectEntry(e TimeEntry) []any {
	zone := "UTC"
	if e.TimeZone != "" {
		zone = e.TimeZone
	} else if u, ok := st.users.rows[e.UserID]; ok && u.zone() != "" {
		zone = u.zone()
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		loc, zone = time.UTC, "UTC"
	}
	client := e.ClientID
	if p, ok := st.projects.rows[e.ProjectID]; ok && client == "" {
		client = p.ClientID
	}
	tags := e.TagIDs
	if tags == nil {
		tags = []string{}
	}
	tb, _ := json.Marshal(tags)
	v := schema.Values{
		"spent_date": clients.DateOf(e.Start.In(loc)), "user_id": e.UserID,
		"project_id": e.ProjectID, "task_id": e.TaskID, "client_id": client,
		"billable": e.Billable, "is_locked": e.IsLocked, "is_running": e.End == nil, "hours": clients.Decimal("0"),
		"started_at": e.Start.UTC().Truncate(time.Second), "time_zone": zone, "tags": json.RawMessage(tb),
	}
	if e.Description != nil {
		v["notes"] = *e.Description
	}
	if e.End != nil {
		v["hours"] = clients.Decimal(hoursText(e.End.Sub(e.Start).Truncate(time.Second)))
		v["ended_at"] = e.End.UTC().Truncate(time.Second)
	}
	return schema.TimeEntries.Row(v)
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
