package schema

import (
	"slices"

	"github.com/tidemarkhq/tidemark/clients"
)

// The rest of an agency's account (issue 12): what invoicing, payroll and
// approvals read. Registered after time entries, parents before their
// nested resources. Paths are Harvest's; every column is typed because a
// report filters or sums on it, the rest stays in raw.

// lineColumns are an invoice's or estimate's line item columns.
var lineColumns = []Column{
	{Name: "kind", Type: Text, Path: "kind", Doc: "Item category name (invoice or estimate item category)."},
	{Name: "description", Type: Text, Nullable: true, Path: "description", Doc: "Line description; null when none."},
	{Name: "project_id", Type: Text, Nullable: true, EmptyIsNull: true, Path: "project.id", Doc: "Project id (projects.id); null when the line names none."},
	{Name: "quantity", Type: Numeric, Path: "quantity", Doc: "Quantity (hours or units), exact decimal."},
	{Name: "unit_price", Type: Numeric, Path: "unit_price", Doc: "Price per unit, exact decimal."},
	{Name: "amount", Type: Numeric, Path: "amount", Doc: "Line amount (quantity × unit price), exact decimal."},
	{Name: "taxed", Type: Boolean, Path: "taxed", Doc: "The first tax applies."},
	{Name: "taxed2", Type: Boolean, Path: "taxed2", Doc: "The second tax applies."},
}

// lines declares the line items of an invoice or an estimate.
func lines(parent, parentColumn string) []*Child {
	return []*Child{{
		Name: clients.Resource(parent[:len(parent)-1] + "_line_items"),
		Doc:  "Lines of the mirrored " + parent + ", replaced as a whole when the " + parent[:len(parent)-1] + "'s content changes.",
		Path: "line_items", ParentColumn: parentColumn, Columns: lineColumns,
	}}
}

// messages declares the messages listed under an invoice or an estimate.
func messages(parent, parentColumn string) Table {
	one := parent[:len(parent)-1]
	return Table{
		Name: clients.Resource(one + "_messages"),
		Columns: []Column{
			colSubject,
			{Name: parentColumn, Type: Text, Path: "(the " + one + " listed)", Doc: "The " + one + " the message is about (" + parent + ".id)."},
			colSentBy, colEvent,
		},
		Parent: clients.Resource(parent), ParentColumn: parentColumn,
		Deletions: Reconciled,
	}
}

// rates declares a user's billable or cost rates.
func rates(name, doc string) Table {
	return Table{
		Name: clients.Resource(name), Doc: doc,
		Columns: []Column{colRateAmt, colRateUser, colStart, colEnd},
		Parent:  "users", ParentColumn: "user_id",
		Deletions: Reconciled,
	}
}

// assignments declares the tasks or users assigned to projects: the rate
// and the project, what is assigned (cols), then whether it is active and
// its budget.
func assignments(name clients.Resource, what string, cols ...Column) Table {
	return Table{
		Name: name, Doc: "Mirror of the " + what + " assigned to projects, with their rates and budgets.",
		Columns:   slices.Concat([]Column{colRate, colProject}, cols, []Column{colActive, colBudget}),
		Deletions: Reconciled,
	}
}

// withDoc returns t with its doc.
func withDoc(t Table, doc string) Table { t.Doc = doc; return t }

var (
	Contacts = MustRegister(Table{
		Name: "contacts",
		Doc:  "Mirror of the tracker's client contacts.",
		Columns: []Column{
			{Name: "first_name", Type: Text, Path: "first_name", Doc: "First name."},
			colLastName,
			colEmail,
			colClientID,
		},
		Deletions: Reconciled,
	})

	ExpenseCategories = MustRegister(Table{
		Name: "expense_categories",
		Doc:  "Mirror of the tracker's expense categories.",
		Columns: []Column{
			colName,
			{Name: "unit_name", Type: Text, Nullable: true, EmptyIsNull: true, Path: "unit_name", Doc: "Unit for unit-priced categories (e.g. mile); null otherwise."},
			{Name: "unit_price", Type: Numeric, Nullable: true, Path: "unit_price", Doc: "Price per unit, exact decimal; null otherwise."},
			colActive,
		},
		Deletions: Reconciled,
	})

	Expenses = MustRegister(Table{
		Name: "expenses",
		Doc:  "Mirror of the tracker's expenses (receipts as metadata only: the file is never fetched).",
		Columns: []Column{
			colNotes,
			{Name: "spent_date", Type: Date, Tombstone: VersionDay, Path: "spent_date", Doc: "Day the expense was incurred."},
			{Name: "total_cost", Type: Numeric, Path: "total_cost", Doc: "Total cost, exact decimal."},
			{Name: "units", Type: Numeric, Nullable: true, Path: "units", Doc: "Units for unit-priced categories; null otherwise."},
			colUserID, colProject,
			colClientOr,
			{Name: "expense_category_id", Type: Text, Path: "expense_category.id", Doc: "Expense category id (expense_categories.id)."},
			{Name: "billable", Type: Boolean, Path: "billable", Doc: "Billable to the client."},
			colBilled,
			colLocked,
			{Name: "approval_status", Type: Text, Nullable: true, EmptyIsNull: true, Path: "approval_status", Doc: "Approval state: unsubmitted, submitted or approved."},
			colInvoice,
			{Name: "receipt", Type: JSONB, Nullable: true, Path: "receipt", Doc: "Receipt metadata (url, file_name, file_size, content_type) as sent; null when none. The file is not fetched."},
		},
		Deletions: Reconciled,
	})

	InvoiceItemCategories = MustRegister(Table{
		Name: "invoice_item_categories",
		Doc:  "Mirror of the tracker's invoice item categories.",
		Columns: []Column{
			colName,
			{Name: "use_as_service", Type: Boolean, Path: "use_as_service", Doc: "Used for time (service) lines."},
			{Name: "use_as_expense", Type: Boolean, Path: "use_as_expense", Doc: "Used for expense lines."},
		},
		Deletions: Reconciled,
	})

	EstimateItemCategories = MustRegister(Table{
		Name:      "estimate_item_categories",
		Doc:       "Mirror of the tracker's estimate item categories.",
		Columns:   []Column{colName},
		Deletions: Reconciled,
	})

	Invoices = MustRegister(Table{
		Name: "invoices",
		Doc:  "Mirror of the tracker's invoices; their lines are in invoice_line_items.",
		Columns: []Column{
			colNotes, colClientID, colNumber, colState, colAmount,
			{Name: "due_amount", Type: Numeric, Path: "due_amount", Doc: "Amount still due, exact decimal."},
			colTax, colDiscount, colSubject, colCurrency, colIssue,
			{Name: "due_date", Type: Date, Nullable: true, Path: "due_date", Doc: "Date payment is due."},
			{Name: "period_start", Type: Date, Nullable: true, Path: "period_start", Doc: "First day of the invoiced period; null when none."},
			{Name: "period_end", Type: Date, Nullable: true, Path: "period_end", Doc: "Last day of the invoiced period; null when none."},
			colSentAt,
			{Name: "paid_at", Type: Timestamptz, Nullable: true, Path: "paid_at", Doc: "When it was paid in full; null until then."},
			{Name: "estimate_id", Type: Text, Nullable: true, EmptyIsNull: true, Path: "estimate.id", Doc: "Estimate it was made from (estimates.id); null when none."},
			colCreator,
		},
		Children:  lines("invoices", "invoice_id"),
		Deletions: Reconciled,
	})

	InvoicePayments = MustRegister(Table{
		Name: "invoice_payments",
		Doc:  "Mirror of the payments recorded against invoices.",
		Columns: []Column{
			colNotes,
			{Name: "invoice_id", Type: Text, Path: "(the invoice listed)", Doc: "Invoice paid (invoices.id)."},
			{Name: "amount", Type: Numeric, Path: "amount", Doc: "Amount paid, exact decimal."},
			{Name: "paid_at", Type: Timestamptz, Nullable: true, Path: "paid_at", Doc: "When the payment was made."},
			{Name: "paid_date", Type: Date, Nullable: true, Path: "paid_date", Doc: "Day the payment was made."},
			{Name: "recorded_by_email", Type: Text, Nullable: true, EmptyIsNull: true, Path: "recorded_by_email", Doc: "E-mail address of who recorded it."},
		},
		Parent: "invoices", ParentColumn: "invoice_id",
		Deletions: Reconciled,
	})

	InvoiceMessages = MustRegister(withDoc(messages("invoices", "invoice_id"), "Mirror of the messages sent about invoices (sends, reminders, thank-yous)."))

	Estimates = MustRegister(Table{
		Name: "estimates",
		Doc:  "Mirror of the tracker's estimates; their lines are in estimate_line_items.",
		Columns: []Column{
			colNotes, colClientID, colNumber, colState, colAmount, colTax, colDiscount, colSubject, colCurrency, colIssue, colSentAt,
			{Name: "accepted_at", Type: Timestamptz, Nullable: true, Path: "accepted_at", Doc: "When the client accepted it; null otherwise."},
			{Name: "declined_at", Type: Timestamptz, Nullable: true, Path: "declined_at", Doc: "When the client declined it; null otherwise."},
			colCreator,
		},
		Children:  lines("estimates", "estimate_id"),
		Deletions: Reconciled,
	})

	EstimateMessages = MustRegister(withDoc(messages("estimates", "estimate_id"), "Mirror of the messages sent about estimates."))

	TaskAssignments = MustRegister(assignments("task_assignments", "tasks",
		Column{Name: "task_id", Type: Text, Path: "task.id", Doc: "Task id (tasks.id)."},
		Column{Name: "billable", Type: Boolean, Path: "billable", Doc: "Time on this task is billable."},
	))

	UserAssignments = MustRegister(assignments("user_assignments", "users",
		colUserID,
		Column{Name: "is_project_manager", Type: Boolean, Path: "is_project_manager", Doc: "The user manages the project."},
		Column{Name: "use_default_rates", Type: Boolean, Path: "use_default_rates", Doc: "The user's default rates apply, not hourly_rate."},
	))

	Roles = MustRegister(Table{
		Name: "roles",
		Doc:  "Mirror of the tracker's roles (groups of users).",
		Columns: []Column{
			colName,
			{Name: "user_ids", Type: JSONB, Path: "user_ids", Doc: "Ids of the users in the role, a JSON array."},
		},
		NoSince:   true,
		Deletions: Reconciled,
	})

	Company = MustRegister(Table{
		Name: "company",
		Doc:  "Mirror of the account's company settings: one row per source, id the account id.",
		Columns: []Column{
			colName,
			{Name: "full_domain", Type: Text, Nullable: true, EmptyIsNull: true, Path: "full_domain", Doc: "The account's domain."},
			colActive,
			{Name: "week_start_day", Type: Text, Nullable: true, EmptyIsNull: true, Path: "week_start_day", Doc: "First day of the week (Saturday, Sunday or Monday)."},
			{Name: "plan_type", Type: Text, Nullable: true, EmptyIsNull: true, Path: "plan_type", Doc: "The account's plan."},
			{Name: "approval_feature", Type: Boolean, Path: "approval_feature", Doc: "Approvals are on: time and expenses are submitted and approved."},
			{Name: "expense_feature", Type: Boolean, Path: "expense_feature", Doc: "Expenses are on."},
			{Name: "invoice_feature", Type: Boolean, Path: "invoice_feature", Doc: "Invoices are on."},
			{Name: "estimate_feature", Type: Boolean, Path: "estimate_feature", Doc: "Estimates are on."},
		},
		NoSince: true, Singleton: true,
		Deletions: Reconciled,
	})

	BillableRates = MustRegister(rates("billable_rates", "Mirror of each user's billable rates over time."))
	CostRates     = MustRegister(rates("cost_rates", "Mirror of each user's cost rates over time (what an hour costs the agency)."))
)
