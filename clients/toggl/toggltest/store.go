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

func (e TimeEntry) key() int64                      { return e.ID }
func (e TimeEntry) stamps() (time.Time, *time.Time) { return e.At, e.DeletedAt }
func (e TimeEntry) stamped(at time.Time) record     { e.At = at; return e }
func (e TimeEntry) deletedAt(at time.Time) record   { e.At, e.DeletedAt = at, &at; return e }

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

func (p Project) key() int64                      { return p.ID }
func (p Project) stamps() (time.Time, *time.Time) { return p.At, p.DeletedAt }
func (p Project) stamped(at time.Time) record     { p.At = at; return p }
func (p Project) deletedAt(at time.Time) record   { p.At, p.DeletedAt = at, &at; return p }

// Client is a stored client.
type Client struct {
	ID        int64
	Name      string
	Archived  bool
	At        time.Time
	DeletedAt *time.Time
}

func (c Client) key() int64                      { return c.ID }
func (c Client) stamps() (time.Time, *time.Time) { return c.At, c.DeletedAt }
func (c Client) stamped(at time.Time) record     { c.At = at; return c }
func (c Client) deletedAt(at time.Time) record   { c.At, c.DeletedAt = at, &at; return c }

// Task is a stored task.
type Task struct {
	ID        int64
	ProjectID int64
	Name      string
	Active    bool
	At        time.Time
	DeletedAt *time.Time
}

func (t Task) key() int64                      { return t.ID }
func (t Task) stamps() (time.Time, *time.Time) { return t.At, t.DeletedAt }
func (t Task) stamped(at time.Time) record     { t.At = at; return t }
func (t Task) deletedAt(at time.Time) record   { t.At, t.DeletedAt = at, &at; return t }

// User is a workspace user.
type User struct {
	ID        int64
	Email     string
	Fullname  string
	Inactive  bool
	At        time.Time
	DeletedAt *time.Time
}

func (u User) key() int64                      { return u.ID }
func (u User) stamps() (time.Time, *time.Time) { return u.At, u.DeletedAt }
func (u User) stamped(at time.Time) record     { u.At = at; return u }
func (u User) deletedAt(at time.Time) record   { u.At, u.DeletedAt = at, &at; return u }

// record is what the store keeps of any resource: TimeEntry, Project,
// Client, Task or User.
type record interface {
	key() int64
	// stamps returns the version (`at`) and server_deleted_at.
	stamps() (at time.Time, deleted *time.Time)
	stamped(at time.Time) record
	// deletedAt returns the record deleted at t (`at` moves too).
	deletedAt(t time.Time) record
}

func live(v record) bool {
	_, del := v.stamps()
	return del == nil
}

// State is a snapshot of the store: the ground truth a mirror is compared
// with. Deleted records are included (DeletedAt set).
type State struct {
	TimeEntries map[int64]TimeEntry
	Projects    map[int64]Project
	Clients     map[int64]Client
	Tasks       map[int64]Task
	Users       map[int64]User

	all map[clients.Resource]map[int64]record
}

func newState(tables map[clients.Resource]map[int64]record) State {
	all := make(map[clients.Resource]map[int64]record, len(tables))
	for r, m := range tables {
		all[r] = maps.Clone(m)
	}
	return State{
		TimeEntries: typed[TimeEntry](all[clients.TimeEntries]), Projects: typed[Project](all[clients.Projects]),
		Clients: typed[Client](all[clients.Clients]), Tasks: typed[Task](all[clients.Tasks]), Users: typed[User](all[clients.Users]),
		all: all,
	}
}

func typed[T record](m map[int64]record) map[int64]T {
	out := make(map[int64]T, len(m))
	for id, v := range m {
		out[id] = v.(T)
	}
	return out
}

// Versions returns r's live ids (decimal text, as in the mirror) with their
// versions (`at`), the same shape as harvestfake.State.Versions.
func (st State) Versions(r clients.Resource) map[string]time.Time {
	out := map[string]time.Time{}
	for id, v := range st.all[r] {
		if at, del := v.stamps(); del == nil {
			out[strconv.FormatInt(id, 10)] = at.UTC()
		}
	}
	return out
}

// Deleted returns r's deleted ids (decimal text) with their deletion time.
func (st State) Deleted(r clients.Resource) map[string]time.Time {
	out := map[string]time.Time{}
	for id, v := range st.all[r] {
		if _, del := v.stamps(); del != nil {
			out[strconv.FormatInt(id, 10)] = del.UTC()
		}
	}
	return out
}
