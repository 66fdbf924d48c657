package schema

import "github.com/tidemarkhq/tidemark/clients"

// The declarations, registered in pass order: reference data first, then
// time entries. Each Doc is the COMMENT the migrations give the table or
// column, word for word (TestDeclarationsMatchDatabase holds them to it).
// Paths are Harvest's.
var (
	Clients = MustRegister(Table{
		Name: clients.Clients,
		Doc:  "Mirror of the tracker's clients (customers).",
		Columns: []Column{
			{Name: "name", Type: Text, Path: "name", Doc: "Client name."},
			{Name: "currency", Type: Text, Nullable: true, EmptyIsNull: true, Path: "currency", Doc: "Billing currency (ISO 4217)."},
			{Name: "is_active", Type: Boolean, Path: "is_active", Doc: "Active (not archived)."},
		},
		Deletions: Reported | Reconciled,
	})

	Users = MustRegister(Table{
		Name: clients.Users,
		Doc:  "Mirror of the tracker's users.",
		Columns: []Column{
			{Name: "first_name", Type: Text, Nullable: true, EmptyIsNull: true, Path: "first_name", Doc: "First name."},
			{Name: "last_name", Type: Text, Nullable: true, EmptyIsNull: true, Path: "last_name", Doc: "Last name."},
			{Name: "email", Type: Text, Nullable: true, EmptyIsNull: true, Path: "email", Doc: "E-mail address."},
			{Name: "is_active", Type: Boolean, Path: "is_active", Doc: "Active (not archived)."},
		},
		Deletions: Reported | Reconciled,
	})

	Projects = MustRegister(Table{
		Name: clients.Projects,
		Doc:  "Mirror of the tracker's projects.",
		Columns: []Column{
			{Name: "name", Type: Text, Path: "name", Doc: "Project name."},
			{Name: "code", Type: Text, Nullable: true, EmptyIsNull: true, Path: "code", Doc: "Project code; null when none."},
			{Name: "client_id", Type: Text, Nullable: true, EmptyIsNull: true, Path: "client.id", Doc: "Client id (clients.id)."},
			{Name: "is_active", Type: Boolean, Path: "is_active", Doc: "Active (not archived)."},
			{Name: "is_billable", Type: Boolean, Path: "is_billable", Doc: "Billable project."},
		},
		Deletions: Reported | Reconciled,
	})

	Tasks = MustRegister(Table{
		Name: clients.Tasks,
		Doc:  "Mirror of the tracker's tasks.",
		Columns: []Column{
			{Name: "name", Type: Text, Path: "name", Doc: "Task name."},
			{Name: "is_active", Type: Boolean, Path: "is_active", Doc: "Active (not archived)."},
		},
		Deletions: Reported | Reconciled,
	})

	TimeEntries = MustRegister(Table{
		Name: clients.TimeEntries,
		Doc:  "Mirror of the tracker's time entries: one row per (source, id), latest version seen.",
		Columns: []Column{
			{Name: "spent_date", Type: Date, Tombstone: VersionDay, Path: "spent_date", Doc: "Day the time was spent (local date of the tracker, no zone)."},
			{Name: "hours", Type: Numeric, Path: "hours", Doc: "Hours recorded, exact decimal as the source sent it."},
			{Name: "notes", Type: Text, Nullable: true, Path: "notes", Doc: "Free-text notes; null when none."},
			{Name: "user_id", Type: Text, Path: "user.id", Doc: "Id of the user who tracked the time (users.id)."},
			{Name: "project_id", Type: Text, Path: "project.id", Doc: "Project id (projects.id)."},
			{Name: "task_id", Type: Text, Nullable: true, EmptyIsNull: true, Path: "task.id", Doc: "Task id (tasks.id); null when none."},
			{Name: "client_id", Type: Text, Nullable: true, EmptyIsNull: true, Path: "client.id", Doc: "Client id (clients.id); null when none."},
			{Name: "billable", Type: Boolean, Path: "billable", Doc: "Whether the time is billable."},
			{Name: "is_locked", Type: Boolean, Path: "is_locked", Doc: "Locked against edits (approved or invoiced)."},
			{Name: "is_closed", Type: Boolean, Path: "is_closed", Doc: "Approved."},
			{Name: "is_billed", Type: Boolean, Path: "is_billed", Doc: "Included in an invoice."},
			{Name: "is_running", Type: Boolean, Path: "is_running", Doc: "A timer is running; hours still grow."},
			{Name: "invoice_id", Type: Text, Nullable: true, EmptyIsNull: true, Path: "invoice.id", Doc: "Invoice id when billed; null otherwise."},
			{Name: "started_at", Type: Timestamptz, Nullable: true, Path: "start", Doc: "When the time started, as an instant; null when the source gives only a day (Harvest)."},
			{Name: "ended_at", Type: Timestamptz, Nullable: true, Path: "stop", Doc: "When the time ended; null while a timer runs or when the source gives only a day."},
			{Name: "time_zone", Type: Text, Nullable: true, EmptyIsNull: true, Path: "(the user's zone)", Doc: "IANA zone spent_date was taken in (the user's, as the provider's own reports date it); null when the source sends the day itself (Harvest)."},
			{Name: "tags", Type: JSONB, Nullable: true, Path: "tags", Doc: "Tag names, a JSON array of strings; null when the source has no tags."},
			{Name: "approval_status", Type: Text, Nullable: true, EmptyIsNull: true, Path: "approval_status", Doc: "Harvest approval state: unsubmitted, submitted or approved; null elsewhere."},
			{Name: "external_reference", Type: JSONB, Nullable: true, Path: "external_reference", Doc: "Harvest external reference (the linked issue or task elsewhere), as sent; null when none."},
		},
		ListBy:     "spent_date",
		UserColumn: "user_id",
		Deletions:  Reported | Reconciled,
	})
)
