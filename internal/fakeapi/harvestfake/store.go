package harvestfake

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/schema"
)

// TimeEntry is a stored time entry. It is compact (names of the user,
// project, client and task are looked up when rendering) so that a million
// fit in memory; the JSON is rendered per request.
type TimeEntry struct {
	ID        int64
	SpentDate clients.Date
	// Hours is decimal text ("1.25"), rendered as a JSON number.
	Hours     string
	Notes     *string
	UserID    int64
	ProjectID int64
	TaskID    int64
	ClientID  int64
	Billable  bool
	IsLocked  bool
	IsClosed  bool
	IsBilled  bool
	IsRunning bool
	// TimerStartedAt, when set on a running entry, is when its timer
	// started (source clock): its hours then grow from Hours with the time
	// since, while updated_at stays as it is (APIS.md).
	TimerStartedAt time.Time
	// Submitted: sent for approval (approval_status submitted) and not yet
	// approved (IsClosed: approved).
	Submitted bool
	InvoiceID int64 // 0: not invoiced
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Project is a stored project.
type Project struct {
	ID         int64
	ClientID   int64
	Name, Code string
	IsActive   bool
	IsBillable bool
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// Client is a stored client.
type Client struct {
	ID        int64
	Name      string
	Currency  string
	IsActive  bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

// User is a stored user.
type User struct {
	ID                         int64
	FirstName, LastName, Email string
	IsActive                   bool
	CreatedAt                  time.Time
	UpdatedAt                  time.Time
}

// Task is a stored task.
type Task struct {
	ID        int64
	Name      string
	IsActive  bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

// HoursAt is the entry's hours as served at now: a running timer's grow by
// the time since it started (to the hundredth, rounded down).
func (e *TimeEntry) HoursAt(now time.Time) string {
	if !e.IsRunning || e.TimerStartedAt.IsZero() {
		return e.Hours
	}
	h, _ := strconv.ParseFloat(e.Hours, 64)
	h += max(now.Sub(e.TimerStartedAt), 0).Hours()
	return strconv.FormatFloat(math.Floor(h*100+1e-9)/100, 'f', 2, 64)
}

// ApprovalStatus is the entry's approval_status as Harvest renders it.
func (e *TimeEntry) ApprovalStatus() string {
	switch {
	case e.IsClosed:
		return "approved"
	case e.Submitted:
		return "submitted"
	}
	return "unsubmitted"
}

func dateKey(d clients.Date) int64 { return int64(d.Year)*10000 + int64(d.Month)*100 + int64(d.Day) }

// table holds one resource: items in insertion slots, an id index and the
// listing order (descending key: spent_date then id for time entries,
// created_at then id for the others, as Harvest documents).
type table[T any] struct {
	items []T
	pos   map[int64]int32
	order []int32
	// fields points at what every record has: its id and stamps.
	fields func(*T) (id int64, created, updated *time.Time)
	key    func(*T) [2]int64
	render func(s *Server, b []byte, v *T, o renderOpts) []byte
}

// records is a table whatever its record type: records come and go as
// TimeEntry, Project, Client, User or Task in an any, and are listed by
// position in the table.
type records interface {
	get(id int64) (any, bool)
	put(v any)
	del(id int64) bool
	len() int
	listing() []int32
	id(p int32) int64
	keyAt(p int32) [2]int64
	updated(p int32) time.Time
	appendJSON(s *Server, b []byte, p int32, o renderOpts) []byte
	// stamps returns v's id, created_at and updated_at; withStamps v with
	// these stamps.
	stamps(v any) (id int64, created, updated time.Time)
	withStamps(v any, created, updated time.Time) any
}

func newTable[T any](fields func(*T) (int64, *time.Time, *time.Time), render func(*Server, []byte, *T, renderOpts) []byte) *table[T] {
	t := &table[T]{pos: map[int64]int32{}, fields: fields, render: render}
	t.key = func(v *T) [2]int64 {
		id, created, _ := fields(v)
		return [2]int64{created.Unix(), id}
	}
	return t
}

// tables are the five resources, by type for rendering and by resource
// for everything else.
type tables struct {
	entries  *table[TimeEntry]
	projects *table[Project]
	clients  *table[Client]
	users    *table[User]
	tasks    *table[Task]
	by       map[clients.Resource]records
}

func newTables() *tables {
	ts := &tables{
		entries:  newTable(func(e *TimeEntry) (int64, *time.Time, *time.Time) { return e.ID, &e.CreatedAt, &e.UpdatedAt }, (*Server).appendTimeEntry),
		projects: newTable(func(p *Project) (int64, *time.Time, *time.Time) { return p.ID, &p.CreatedAt, &p.UpdatedAt }, (*Server).appendProject),
		clients:  newTable(func(c *Client) (int64, *time.Time, *time.Time) { return c.ID, &c.CreatedAt, &c.UpdatedAt }, (*Server).appendClient),
		users:    newTable(func(u *User) (int64, *time.Time, *time.Time) { return u.ID, &u.CreatedAt, &u.UpdatedAt }, (*Server).appendUser),
		tasks:    newTable(func(t *Task) (int64, *time.Time, *time.Time) { return t.ID, &t.CreatedAt, &t.UpdatedAt }, (*Server).appendTask),
	}
	ts.entries.key = func(e *TimeEntry) [2]int64 { return [2]int64{dateKey(e.SpentDate), e.ID} }
	ts.by = docTables()
	for r, t := range map[clients.Resource]records{
		clients.TimeEntries: ts.entries, clients.Projects: ts.projects, clients.Clients: ts.clients,
		clients.Users: ts.users, clients.Tasks: ts.tasks,
	} {
		ts.by[r] = t
	}
	return ts
}

// cmpKeys orders listing keys, descending.
func cmpKeys(a, b [2]int64) int {
	switch {
	case a[0] != b[0]:
		if a[0] > b[0] {
			return -1
		}
		return 1
	case a[1] > b[1]:
		return -1
	case a[1] < b[1]:
		return 1
	}
	return 0
}

func (t *table[T]) idOf(v *T) int64 {
	id, _, _ := t.fields(v)
	return id
}

func (t *table[T]) find(k [2]int64) (int, bool) {
	return slices.BinarySearchFunc(t.order, k, func(p int32, k [2]int64) int { return cmpKeys(t.key(&t.items[p]), k) })
}

func (t *table[T]) lookup(id int64) (T, bool) {
	p, ok := t.pos[id]
	if !ok {
		var zero T
		return zero, false
	}
	return t.items[p], true
}

func (t *table[T]) get(id int64) (any, bool) {
	p, ok := t.pos[id]
	if !ok {
		return nil, false
	}
	return t.items[p], true
}

func (t *table[T]) put(x any) {
	v := x.(T)
	id := t.idOf(&v)
	if p, ok := t.pos[id]; ok {
		old := t.key(&t.items[p])
		if i, found := t.find(old); found {
			t.order = slices.Delete(t.order, i, i+1)
		}
		t.items[p] = v
		i, _ := t.find(t.key(&v))
		t.order = slices.Insert(t.order, i, p)
		return
	}
	p := int32(len(t.items))
	t.items = append(t.items, v)
	t.pos[id] = p
	i, _ := t.find(t.key(&v))
	t.order = slices.Insert(t.order, i, p)
}

// load appends many new items and sorts once.
func (t *table[T]) load(vs []T) {
	t.items = slices.Grow(t.items, len(vs))
	for _, v := range vs {
		id := t.idOf(&v)
		if p, ok := t.pos[id]; ok {
			t.items[p] = v
			continue
		}
		t.pos[id] = int32(len(t.items))
		t.order = append(t.order, int32(len(t.items)))
		t.items = append(t.items, v)
	}
	slices.SortFunc(t.order, func(a, b int32) int { return cmpKeys(t.key(&t.items[a]), t.key(&t.items[b])) })
}

func (t *table[T]) del(id int64) bool {
	p, ok := t.pos[id]
	if !ok {
		return false
	}
	if i, found := t.find(t.key(&t.items[p])); found {
		t.order = slices.Delete(t.order, i, i+1)
	}
	delete(t.pos, id)
	var zero T
	t.items[p] = zero
	return true
}

func (t *table[T]) len() int               { return len(t.pos) }
func (t *table[T]) listing() []int32       { return t.order }
func (t *table[T]) id(p int32) int64       { return t.idOf(&t.items[p]) }
func (t *table[T]) keyAt(p int32) [2]int64 { return t.key(&t.items[p]) }

func (t *table[T]) updated(p int32) time.Time {
	_, _, u := t.fields(&t.items[p])
	return *u
}

func (t *table[T]) appendJSON(s *Server, b []byte, p int32, o renderOpts) []byte {
	return t.render(s, b, &t.items[p], o)
}

func (t *table[T]) stamps(x any) (int64, time.Time, time.Time) {
	v := x.(T)
	id, c, u := t.fields(&v)
	return id, *c, *u
}

func (t *table[T]) withStamps(x any, created, updated time.Time) any {
	v := x.(T)
	_, c, u := t.fields(&v)
	*c, *u = created, updated
	return v
}

func snapshot[T any](t *table[T]) map[int64]T {
	m := make(map[int64]T, t.len())
	for id, p := range t.pos {
		m[id] = t.items[p]
	}
	return m
}

// State is a snapshot of what the fake serves: the ground truth a mirror is
// compared with.
type State struct {
	TimeEntries map[int64]TimeEntry
	Projects    map[int64]Project
	Clients     map[int64]Client
	Users       map[int64]User
	Tasks       map[int64]Task
	// Docs are the records of the resources served from their declaration.
	Docs map[clients.Resource]map[int64]Doc
	// AccountID is the company's id.
	AccountID string
	// Deleted maps each resource's deleted ids to when they were deleted
	// (the source clock). An id deleted and later re-created is not here.
	Deleted map[clients.Resource]map[int64]time.Time
}

func newState(ts *tables, deleted map[clients.Resource]map[int64]time.Time, account string) State {
	st := State{
		TimeEntries: snapshot(ts.entries), Projects: snapshot(ts.projects), Clients: snapshot(ts.clients),
		Users: snapshot(ts.users), Tasks: snapshot(ts.tasks),
		Docs:    map[clients.Resource]map[int64]Doc{},
		Deleted: map[clients.Resource]map[int64]time.Time{}, AccountID: account,
	}
	for r, t := range ts.by {
		if dt, ok := t.(*table[Doc]); ok {
			st.Docs[r] = snapshot(dt)
		}
	}
	for r, m := range deleted {
		st.Deleted[r] = maps.Clone(m)
	}
	return st
}

// Count returns the number of live records of r.
func (st State) Count(r clients.Resource) int {
	switch r {
	case clients.TimeEntries:
		return len(st.TimeEntries)
	case clients.Projects:
		return len(st.Projects)
	case clients.Clients:
		return len(st.Clients)
	case clients.Users:
		return len(st.Users)
	case clients.Tasks:
		return len(st.Tasks)
	}
	return len(st.Docs[r])
}

// Versions returns r's live ids (decimal text, as in the mirror) with their
// updated_at.
func (st State) Versions(r clients.Resource) map[string]time.Time {
	out := map[string]time.Time{}
	for id, rec := range st.Expected(r) {
		out[id] = rec.Version
	}
	return out
}

func ids(n int64) string {
	if n == 0 {
		return ""
	}
	return strconv.FormatInt(n, 10)
}

// Expected returns r's live records as a correct client normalizes them
// (row and version; no Raw, no FetchedAt), keyed by id.
func (st State) Expected(r clients.Resource) map[string]clients.Record {
	out := map[string]clients.Record{}
	add := func(id int64, updated time.Time, t *schema.Table, v schema.Values) {
		out[ids(id)] = clients.Record{ID: ids(id), Version: updated.UTC(), Row: t.Row(v)}
	}
	switch r {
	case clients.TimeEntries:
		for _, e := range st.TimeEntries {
			v := schema.Values{
				"spent_date": e.SpentDate, "hours": clients.Decimal(e.Hours),
				"user_id": ids(e.UserID), "project_id": ids(e.ProjectID), "task_id": ids(e.TaskID), "client_id": ids(e.ClientID),
				"billable": e.Billable, "is_locked": e.IsLocked, "is_closed": e.IsClosed, "is_billed": e.IsBilled,
				"is_running": e.IsRunning, "invoice_id": ids(e.InvoiceID), "approval_status": e.ApprovalStatus(),
			}
			if e.Notes != nil {
				v["notes"] = *e.Notes
			}
			add(e.ID, e.UpdatedAt, schema.TimeEntries, v)
		}
	case clients.Projects:
		for _, p := range st.Projects {
			add(p.ID, p.UpdatedAt, schema.Projects, schema.Values{
				"name": p.Name, "code": p.Code, "client_id": ids(p.ClientID), "is_active": p.IsActive, "is_billable": p.IsBillable,
			})
		}
	case clients.Clients:
		for _, c := range st.Clients {
			add(c.ID, c.UpdatedAt, schema.Clients, schema.Values{"name": c.Name, "currency": c.Currency, "is_active": c.IsActive})
		}
	case clients.Users:
		for _, u := range st.Users {
			add(u.ID, u.UpdatedAt, schema.Users, schema.Values{
				"first_name": u.FirstName, "last_name": u.LastName, "email": u.Email, "is_active": u.IsActive,
			})
		}
	case clients.Tasks:
		for _, t := range st.Tasks {
			add(t.ID, t.UpdatedAt, schema.Tasks, schema.Values{"name": t.Name, "is_active": t.IsActive})
		}
	default:
		def, ok := schema.Lookup(r)
		if !ok {
			return out
		}
		for _, d := range st.Docs[r] {
			v := maps.Clone(d.Values)
			if def.ParentColumn != "" {
				v[def.ParentColumn] = ids(d.Parent)
			}
			id := ids(d.ID)
			if def.Singleton {
				id = st.AccountID
			}
			out[id] = clients.Record{ID: id, Version: d.UpdatedAt.UTC(), Row: def.Row(v)}
		}
	}
	return out
}
