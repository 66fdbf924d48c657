package toggltest

import (
	"maps"
	"strconv"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
)

// TimeEntry is a stored time entry. Duration is in seconds; a running
// entry has Stop nil and Duration = -Start.Unix(), as Toggl sends it.
type TimeEntry struct {
	ID          int64
	WorkspaceID int64 // 0: the server's workspace
	ProjectID   int64 // 0: none
	TaskID      int64 // 0: none
	UserID      int64
	Billable    bool
	Description *string
	Start       time.Time
	Stop        *time.Time
	Duration    int64
	Tags        []string
	At          time.Time
	// DeletedAt is server_deleted_at: set by Delete; the entry stays in the
	// store and is served to `since` listings.
	DeletedAt *time.Time
}

// Running reports whether the entry is a running timer.
func (e TimeEntry) Running() bool { return e.Duration < 0 }

// Project is a stored project.
type Project struct {
	ID        int64
	ClientID  int64 // 0: none
	Name      string
	Active    bool
	Billable  bool
	At        time.Time
	DeletedAt *time.Time
}

// Client is a stored client.
type Client struct {
	ID        int64
	Name      string
	Archived  bool
	At        time.Time
	DeletedAt *time.Time
}

// Task is a stored task.
type Task struct {
	ID        int64
	ProjectID int64
	Name      string
	Active    bool
	At        time.Time
	DeletedAt *time.Time
}

// User is a workspace user. At is when it was stored (State's version for
// it); listings do not serve it, as Toggl documents no `at` for users.
type User struct {
	ID        int64
	Email     string
	Fullname  string
	Inactive  bool
	At        time.Time
	DeletedAt *time.Time
}

// table holds one resource's records by id, deleted ones too.
type table[T any] struct {
	rows map[int64]T
	// fields points at what every record has: its id, `at` (the version)
	// and server_deleted_at.
	fields func(*T) (id int64, at *time.Time, deleted **time.Time)
}

// records is a table whatever its record type: the store, Late and the
// listings handle records as TimeEntry, Project, Client, Task or User in
// an any.
type records interface {
	get(id int64) (any, bool)
	put(v any)
	// stamps returns v's id, `at` and server_deleted_at.
	stamps(v any) (id int64, at time.Time, deleted *time.Time)
	// with returns v with these stamps.
	with(v any, at time.Time, deleted *time.Time) any
	all() map[int64]any
	clone() records
}

func newTable[T any](fields func(*T) (int64, *time.Time, **time.Time)) records {
	return &table[T]{rows: map[int64]T{}, fields: fields}
}

func newTables() map[clients.Resource]records {
	return map[clients.Resource]records{
		clients.TimeEntries: newTable(func(e *TimeEntry) (int64, *time.Time, **time.Time) { return e.ID, &e.At, &e.DeletedAt }),
		clients.Projects:    newTable(func(p *Project) (int64, *time.Time, **time.Time) { return p.ID, &p.At, &p.DeletedAt }),
		clients.Clients:     newTable(func(c *Client) (int64, *time.Time, **time.Time) { return c.ID, &c.At, &c.DeletedAt }),
		clients.Tasks:       newTable(func(t *Task) (int64, *time.Time, **time.Time) { return t.ID, &t.At, &t.DeletedAt }),
		clients.Users:       newTable(func(u *User) (int64, *time.Time, **time.Time) { return u.ID, &u.At, &u.DeletedAt }),
	}
}

func (t *table[T]) get(id int64) (any, bool) {
	v, ok := t.rows[id]
	return v, ok
}

func (t *table[T]) put(v any) {
	x := v.(T)
	id, _, _ := t.fields(&x)
	t.rows[id] = x
}

func (t *table[T]) stamps(v any) (int64, time.Time, *time.Time) {
	x := v.(T)
	id, at, del := t.fields(&x)
	return id, *at, *del
}

func (t *table[T]) with(v any, at time.Time, deleted *time.Time) any {
	x := v.(T)
	_, pa, pd := t.fields(&x)
	*pa, *pd = at, deleted
	return x
}

func (t *table[T]) all() map[int64]any {
	out := make(map[int64]any, len(t.rows))
	for id, v := range t.rows {
		out[id] = v
	}
	return out
}

func (t *table[T]) clone() records { return &table[T]{rows: maps.Clone(t.rows), fields: t.fields} }

// State is a snapshot of the store: the ground truth a mirror is compared
// with. Deleted records are included (DeletedAt set).
type State struct {
	TimeEntries map[int64]TimeEntry
	Projects    map[int64]Project
	Clients     map[int64]Client
	Tasks       map[int64]Task
	Users       map[int64]User

	tables map[clients.Resource]records
}

func newState(tables map[clients.Resource]records) State {
	st := State{tables: map[clients.Resource]records{}}
	for r, t := range tables {
		st.tables[r] = t.clone()
	}
	st.TimeEntries, st.Projects = rows[TimeEntry](st.tables[clients.TimeEntries]), rows[Project](st.tables[clients.Projects])
	st.Clients, st.Tasks, st.Users = rows[Client](st.tables[clients.Clients]), rows[Task](st.tables[clients.Tasks]), rows[User](st.tables[clients.Users])
	return st
}

func rows[T any](t records) map[int64]T { return t.(*table[T]).rows }

// each calls fn with the stamps of r's records.
func (st State) each(r clients.Resource, fn func(id int64, at time.Time, deleted *time.Time)) {
	t := st.tables[r]
	if t == nil {
		return
	}
	for _, v := range t.all() {
		fn(t.stamps(v))
	}
}

// Versions returns r's live ids (decimal text, as in the mirror) with their
// versions (`at`), the same shape as harvestfake.State.Versions.
func (st State) Versions(r clients.Resource) map[string]time.Time {
	out := map[string]time.Time{}
	st.each(r, func(id int64, at time.Time, del *time.Time) {
		if del == nil {
			out[strconv.FormatInt(id, 10)] = at.UTC()
		}
	})
	return out
}

// Deleted returns r's deleted ids (decimal text) with their deletion time.
func (st State) Deleted(r clients.Resource) map[string]time.Time {
	out := map[string]time.Time{}
	st.each(r, func(id int64, _ time.Time, del *time.Time) {
		if del != nil {
			out[strconv.FormatInt(id, 10)] = del.UTC()
		}
	})
	return out
}
