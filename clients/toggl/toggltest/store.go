package toggltest

import (
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

// User is a workspace user.
type User struct {
	ID        int64
	Email     string
	Fullname  string
	Inactive  bool
	At        time.Time
	DeletedAt *time.Time
}

// State is a snapshot of the store: the ground truth a mirror is compared
// with. Deleted records are included (DeletedAt set).
type State struct {
	TimeEntries map[int64]TimeEntry
	Projects    map[int64]Project
	Clients     map[int64]Client
	Tasks       map[int64]Task
	Users       map[int64]User
}

// Versions returns r's live ids (decimal text, as in the mirror) with their
// versions (`at`), the same shape as harvesttest.State.Versions.
func (st State) Versions(r clients.Resource) map[string]time.Time {
	out := map[string]time.Time{}
	add := func(id int64, at time.Time, del *time.Time) {
		if del == nil {
			out[strconv.FormatInt(id, 10)] = at.UTC()
		}
	}
	switch r {
	case clients.TimeEntries:
		for _, e := range st.TimeEntries {
			add(e.ID, e.At, e.DeletedAt)
		}
	case clients.Projects:
		for _, p := range st.Projects {
			add(p.ID, p.At, p.DeletedAt)
		}
	case clients.Clients:
		for _, c := range st.Clients {
			add(c.ID, c.At, c.DeletedAt)
		}
	case clients.Tasks:
		for _, t := range st.Tasks {
			add(t.ID, t.At, t.DeletedAt)
		}
	case clients.Users:
		for _, u := range st.Users {
			add(u.ID, u.At, u.DeletedAt)
		}
	}
	return out
}

// Deleted returns r's deleted ids (decimal text) with their deletion time.
func (st State) Deleted(r clients.Resource) map[string]time.Time {
	out := map[string]time.Time{}
	add := func(id int64, del *time.Time) {
		if del != nil {
			out[strconv.FormatInt(id, 10)] = del.UTC()
		}
	}
	switch r {
	case clients.TimeEntries:
		for _, e := range st.TimeEntries {
			add(e.ID, e.DeletedAt)
		}
	case clients.Projects:
		for _, p := range st.Projects {
			add(p.ID, p.DeletedAt)
		}
	case clients.Clients:
		for _, c := range st.Clients {
			add(c.ID, c.DeletedAt)
		}
	case clients.Tasks:
		for _, t := range st.Tasks {
			add(t.ID, t.DeletedAt)
		}
	case clients.Users:
		for _, u := range st.Users {
			add(u.ID, u.DeletedAt)
		}
	}
	return out
}
