package schema

import "github.com/tidemarkhq/tidemark/clients"

// Columns several declarations share, word for word (here and in
// tables_account.go).
var (
	colName     = Column{Name: "name", Type: Text, Path: "name", Doc: "Name."}
	colActive   = Column{Name: "is_active", Type: Boolean, Path: "is_active", Doc: "Active (not archived)."}
	colClientID = Column{Name: "client_id", Type: Text, Path: "client.id", Doc: "Client id (clients.id)."}
	colProject  = Column{Name: "project_id", Type: Text, Path: "project.id", Doc: "Project id (projects.id)."}
	colUserID   = Column{Name: "user_id", Type: Text, Path: "user.id", Doc: "User id (users.id)."}
	colNotes    = Column{Name: "notes", Type: Text, Nullable: true, Path: "notes", Doc: "Free-text notes; null when none."}
	colEmail    = Column{Name: "email", Type: Text, Nullable: true, EmptyIsNull: true, Path: "email", Doc: "E-mail address."}
	colLastName = Column{Name: "last_name", Type: Text, Nullable: true, EmptyIsNull: true, Path: "last_name", Doc: "Last name."}
	colClientOr = Column{Name: "client_id", Type: Text, Nullable: true, EmptyIsNull: true, Path: "client.id", Doc: "Client id (clients.id); null when none."}
	colLocked   = Column{Name: "is_locked", Type: Boolean, Path: "is_locked", Doc: "Locked against edits (approved or invoiced)."}
	colBilled   = Column{Name: "is_billed", Type: Boolean, Path: "is_billed", Doc: "Included in an invoice."}
	colInvoice  = Column{Name: "invoice_id", Type: Text, Nullable: true, EmptyIsNull: true, Path: "invoice.id", Doc: "Invoice id when billed; null otherwise."}
	colCurrency = Column{Name: "currency", Type: Text, Nullable: true, EmptyIsNull: true, Path: "currency", Doc: "Currency (ISO 4217)."}
	colRate     = Column{Name: "hourly_rate", Type: Numeric, Nullable: true, Path: "hourly_rate", Doc: "Hourly rate, exact decimal; null when the default applies."}
	colBudget   = Column{Name: "budget", Type: Numeric, Nullable: true, Path: "budget", Doc: "Budget, exact decimal; null when none."}
	colSubject  = Column{Name: "subject", Type: Text, Nullable: true, EmptyIsNull: true, Path: "subject", Doc: "Subject line; null when none."}
	colNumber   = Column{Name: "number", Type: Text, Nullable: true, EmptyIsNull: true, Path: "number", Doc: "Document number as shown to the client."}
	colState    = Column{Name: "state", Type: Text, Path: "state", Doc: "State: draft, open, paid or closed (invoices); draft, sent, accepted or declined (estimates)."}
	colAmount   = Column{Name: "amount", Type: Numeric, Path: "amount", Doc: "Total amount, exact decimal."}
	colTax      = Column{Name: "tax_amount", Type: Numeric, Nullable: true, Path: "tax_amount", Doc: "First tax amount, exact decimal."}
	colDiscount = Column{Name: "discount_amount", Type: Numeric, Nullable: true, Path: "discount_amount", Doc: "Discount amount, exact decimal."}
	colIssue    = Column{Name: "issue_date", Type: Date, Nullable: true, Path: "issue_date", Doc: "Date issued."}
	colSentAt   = Column{Name: "sent_at", Type: Timestamptz, Nullable: true, Path: "sent_at", Doc: "When it was sent; null while a draft."}
	colCreator  = Column{Name: "creator_id", Type: Text, Nullable: true, EmptyIsNull: true, Path: "creator.id", Doc: "User who created it (users.id)."}
	colSentBy   = Column{Name: "sent_by_email", Type: Text, Nullable: true, EmptyIsNull: true, Path: "sent_by_email", Doc: "E-mail address of the sender."}
	colEvent    = Column{Name: "event_type", Type: Text, Nullable: true, EmptyIsNull: true, Path: "event_type", Doc: "What the message recorded (send, close, re-open, view, accept, decline); null for a plain message."}
	colRateAmt  = Column{Name: "amount", Type: Numeric, Path: "amount", Doc: "Hourly rate, exact decimal."}
	colStart    = Column{Name: "start_date", Type: Date, Nullable: true, Path: "start_date", Doc: "First day the rate applies; null: since ever."}
	colEnd      = Column{Name: "end_date", Type: Date, Nullable: true, Path: "end_date", Doc: "Last day the rate applies; null: still current."}
	colRateUser = Column{Name: "user_id", Type: Text, Path: "(the user listed)", Doc: "User the rate belongs to (users.id)."}
)

// reference declares one of the reference tables every provider serves
// (listed whole; deletions reported where the source reports them, else
// reconciled).
func reference(name clients.Resource, doc string, cols ...Column) Table {
	return Table{Name: name, Doc: doc, Columns: cols, Deletions: Reported | Reconciled}
}

// The declarations, registered in pass order: reference data first, then
// time entries. Each Doc is the COMMENT the migrations give the table or
// column, word for word (TestDeclarationsMatchDatabase holds them to it).
// Paths are Harvest's.
var (
	Clients = MustRegister(reference(clients.Clients, "Mirror of the tracker's clients (customers).",
		Column{Name: "name", Type: Text, Path: "name", Doc: "Client name."},
		Column{Name: "currency", Type: Text, Nullable: true, EmptyIsNull: true, Path: "currency", Doc: "Billing currency (ISO 4217)."},
		colActive,
	))

	Users = MustRegister(reference(clients.Users, "Mirror of the tracker's users.",
		Column{Name: "first_name", Type: Text, Nullable: true, EmptyIsNull: true, Path: "first_name", Doc: "First name."},
		colLastName, colEmail, colActive,
	))

	Projects = MustRegister(reference(clients.Projects, "Mirror of the tracker's projects.",
		Column{Name: "name", Type: Text, Path: "name", Doc: "Project name."},
		Column{Name: "code", Type: Text, Nullable: true, EmptyIsNull: true, Path: "code", Doc: "Project code; null when none."},
		Column{Name: "client_id", Type: Text, Nullable: true, EmptyIsNull: true, Path: "client.id", Doc: "Client id (clients.id)."},
		colActive,
		Column{Name: "is_billable", Type: Boolean, Path: "is_billable", Doc: "Billable project."},
	))

	Tasks = MustRegister(reference(clients.Tasks, "Mirror of the tracker's tasks.",
		Column{Name: "name", Type: Text, Path: "name", Doc: "Task name."},
		colActive,
	))

	TimeEntries = MustRegister(Table{
		Name: clients.TimeEntries,
		Doc:  "Mirror of the tracker's time entries: one row per (source, id), latest version seen.",
		Columns: []Column{
			{Name: "spent_date", Type: Date, Tombstone: VersionDay, Path: "spent_date", Doc: "Day the time was spent (local date of the tracker, no zone)."},
			{Name: "hours", Type: Numeric, Path: "hours", Doc: "Hours recorded, exact decimal as the source sent it."},
			colNotes,
			{Name: "user_id", Type: Text, Path: "user.id", Doc: "Id of the user who tracked the time (users.id)."},
			colProject,
			{Name: "task_id", Type: Text, Nullable: true, EmptyIsNull: true, Path: "task.id", Doc: "Task id (tasks.id); null when none."},
			colClientOr,
			{Name: "billable", Type: Boolean, Path: "billable", Doc: "Whether the time is billable."},
			colLocked,
			{Name: "is_closed", Type: Boolean, Path: "is_closed", Doc: "Approved."},
			colBilled,
			{Name: "is_running", Type: Boolean, Path: "is_running", Doc: "A timer is running; hours still grow."},
			colInvoice,
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
		HistoryBy:  []string{"project_id"},
	})
)
