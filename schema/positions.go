package schema

// Positions in a Row of the core resources' columns that every provider's
// decoder fills by hand (row[schema.TE.SpentDate] = day), resolved once
// from the declarations: a column renamed there fails at start-up, in one
// place, not in three decoders.
var (
	TE = TimeEntryColumns{
		SpentDate: TimeEntries.Index("spent_date"), Hours: TimeEntries.Index("hours"), Notes: TimeEntries.Index("notes"),
		User: TimeEntries.Index("user_id"), Project: TimeEntries.Index("project_id"), Task: TimeEntries.Index("task_id"),
		Client: TimeEntries.Index("client_id"), Invoice: TimeEntries.Index("invoice_id"),
		Billable: TimeEntries.Index("billable"), Running: TimeEntries.Index("is_running"), Locked: TimeEntries.Index("is_locked"),
		Closed: TimeEntries.Index("is_closed"), Billed: TimeEntries.Index("is_billed"),
		Started: TimeEntries.Index("started_at"), Ended: TimeEntries.Index("ended_at"), Zone: TimeEntries.Index("time_zone"),
		Tags: TimeEntries.Index("tags"), Approval: TimeEntries.Index("approval_status"), ExtRef: TimeEntries.Index("external_reference"),
	}
	PR = ProjectColumns{Name: Projects.Index("name"), Code: Projects.Index("code"), Client: Projects.Index("client_id"),
		Active: Projects.Index("is_active"), Billable: Projects.Index("is_billable")}
	CL = ClientColumns{Name: Clients.Index("name"), Currency: Clients.Index("currency"), Active: Clients.Index("is_active")}
	US = UserColumns{First: Users.Index("first_name"), Last: Users.Index("last_name"), Email: Users.Index("email"), Active: Users.Index("is_active")}
	TA = TaskColumns{Name: Tasks.Index("name"), Active: Tasks.Index("is_active")}
)

// TimeEntryColumns are positions of time_entries columns.
type TimeEntryColumns struct {
	SpentDate, Hours, Notes, User, Project, Task, Client, Invoice   int
	Billable, Running, Locked, Closed, Billed, Started, Ended, Zone int
	Tags, Approval, ExtRef                                          int
}

// ProjectColumns are positions of projects columns.
type ProjectColumns struct{ Name, Code, Client, Active, Billable int }

// ClientColumns are positions of clients columns.
type ClientColumns struct{ Name, Currency, Active int }

// UserColumns are positions of users columns.
type UserColumns struct{ First, Last, Email, Active int }

// TaskColumns are positions of tasks columns.
type TaskColumns struct{ Name, Active int }
