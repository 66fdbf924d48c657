-- +goose Up
-- The rest of an agency's account (issue 12): invoices and their lines,
-- payments, messages, estimates, expenses, assignments, rates, roles and the
-- company, as declared in package schema (schema/tables_account.go).

CREATE TABLE contacts (
    source        text        NOT NULL,
    id            text        NOT NULL,
    first_name    text NOT NULL,
    last_name     text,
    email         text,
    client_id     text NOT NULL,
    updated_at    timestamptz NOT NULL,
    fetched_at    timestamptz NOT NULL,
    content_hash  bytea       NOT NULL,
    raw           jsonb       NOT NULL,
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz,
    PRIMARY KEY (source, id)
);
COMMENT ON TABLE contacts IS 'Mirror of the tracker''s client contacts.';
COMMENT ON COLUMN contacts.first_name IS 'First name.';
COMMENT ON COLUMN contacts.last_name IS 'Last name.';
COMMENT ON COLUMN contacts.email IS 'E-mail address.';
COMMENT ON COLUMN contacts.client_id IS 'Client id (clients.id).';
COMMENT ON COLUMN contacts.source IS 'The configured source name (sources[].name).';
COMMENT ON COLUMN contacts.id IS 'The provider''s id as text.';
COMMENT ON COLUMN contacts.updated_at IS 'The source''s version stamp.';
COMMENT ON COLUMN contacts.fetched_at IS 'When tidemark fetched this version; breaks ties between equal versions.';
COMMENT ON COLUMN contacts.content_hash IS 'SHA-256 of the record in canonical JSON form.';
COMMENT ON COLUMN contacts.raw IS 'The record as the source sent it.';
COMMENT ON COLUMN contacts.first_seen_at IS 'When tidemark first stored this id; never changed afterwards.';
COMMENT ON COLUMN contacts.deleted_at IS 'Set when the record was deleted at the source (tombstone); null while live.';

CREATE TABLE expense_categories (
    source        text        NOT NULL,
    id            text        NOT NULL,
    name          text NOT NULL,
    unit_name     text,
    unit_price    numeric,
    is_active     boolean NOT NULL,
    updated_at    timestamptz NOT NULL,
    fetched_at    timestamptz NOT NULL,
    content_hash  bytea       NOT NULL,
    raw           jsonb       NOT NULL,
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz,
    PRIMARY KEY (source, id)
);
COMMENT ON TABLE expense_categories IS 'Mirror of the tracker''s expense categories.';
COMMENT ON COLUMN expense_categories.name IS 'Name.';
COMMENT ON COLUMN expense_categories.unit_name IS 'Unit for unit-priced categories (e.g. mile); null otherwise.';
COMMENT ON COLUMN expense_categories.unit_price IS 'Price per unit, exact decimal; null otherwise.';
COMMENT ON COLUMN expense_categories.is_active IS 'Active (not archived).';
COMMENT ON COLUMN expense_categories.source IS 'The configured source name (sources[].name).';
COMMENT ON COLUMN expense_categories.id IS 'The provider''s id as text.';
COMMENT ON COLUMN expense_categories.updated_at IS 'The source''s version stamp.';
COMMENT ON COLUMN expense_categories.fetched_at IS 'When tidemark fetched this version; breaks ties between equal versions.';
COMMENT ON COLUMN expense_categories.content_hash IS 'SHA-256 of the record in canonical JSON form.';
COMMENT ON COLUMN expense_categories.raw IS 'The record as the source sent it.';
COMMENT ON COLUMN expense_categories.first_seen_at IS 'When tidemark first stored this id; never changed afterwards.';
COMMENT ON COLUMN expense_categories.deleted_at IS 'Set when the record was deleted at the source (tombstone); null while live.';

CREATE TABLE expenses (
    source        text        NOT NULL,
    id            text        NOT NULL,
    notes         text,
    spent_date    date NOT NULL,
    total_cost    numeric NOT NULL,
    units         numeric,
    user_id       text NOT NULL,
    project_id    text NOT NULL,
    client_id     text,
    expense_category_id text NOT NULL,
    billable      boolean NOT NULL,
    is_billed     boolean NOT NULL,
    is_locked     boolean NOT NULL,
    approval_status text,
    invoice_id    text,
    receipt       jsonb,
    updated_at    timestamptz NOT NULL,
    fetched_at    timestamptz NOT NULL,
    content_hash  bytea       NOT NULL,
    raw           jsonb       NOT NULL,
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz,
    PRIMARY KEY (source, id)
);
COMMENT ON TABLE expenses IS 'Mirror of the tracker''s expenses (receipts as metadata only: the file is never fetched).';
COMMENT ON COLUMN expenses.notes IS 'Free-text notes; null when none.';
COMMENT ON COLUMN expenses.spent_date IS 'Day the expense was incurred.';
COMMENT ON COLUMN expenses.total_cost IS 'Total cost, exact decimal.';
COMMENT ON COLUMN expenses.units IS 'Units for unit-priced categories; null otherwise.';
COMMENT ON COLUMN expenses.user_id IS 'User id (users.id).';
COMMENT ON COLUMN expenses.project_id IS 'Project id (projects.id).';
COMMENT ON COLUMN expenses.client_id IS 'Client id (clients.id); null when none.';
COMMENT ON COLUMN expenses.expense_category_id IS 'Expense category id (expense_categories.id).';
COMMENT ON COLUMN expenses.billable IS 'Billable to the client.';
COMMENT ON COLUMN expenses.is_billed IS 'Included in an invoice.';
COMMENT ON COLUMN expenses.is_locked IS 'Locked against edits (approved or invoiced).';
COMMENT ON COLUMN expenses.approval_status IS 'Approval state: unsubmitted, submitted or approved.';
COMMENT ON COLUMN expenses.invoice_id IS 'Invoice id when billed; null otherwise.';
COMMENT ON COLUMN expenses.receipt IS 'Receipt metadata (url, file_name, file_size, content_type) as sent; null when none. The file is not fetched.';
COMMENT ON COLUMN expenses.source IS 'The configured source name (sources[].name).';
COMMENT ON COLUMN expenses.id IS 'The provider''s id as text.';
COMMENT ON COLUMN expenses.updated_at IS 'The source''s version stamp.';
COMMENT ON COLUMN expenses.fetched_at IS 'When tidemark fetched this version; breaks ties between equal versions.';
COMMENT ON COLUMN expenses.content_hash IS 'SHA-256 of the record in canonical JSON form.';
COMMENT ON COLUMN expenses.raw IS 'The record as the source sent it.';
COMMENT ON COLUMN expenses.first_seen_at IS 'When tidemark first stored this id; never changed afterwards.';
COMMENT ON COLUMN expenses.deleted_at IS 'Set when the record was deleted at the source (tombstone); null while live.';

CREATE TABLE invoice_item_categories (
    source        text        NOT NULL,
    id            text        NOT NULL,
    name          text NOT NULL,
    use_as_service boolean NOT NULL,
    use_as_expense boolean NOT NULL,
    updated_at    timestamptz NOT NULL,
    fetched_at    timestamptz NOT NULL,
    content_hash  bytea       NOT NULL,
    raw           jsonb       NOT NULL,
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz,
    PRIMARY KEY (source, id)
);
COMMENT ON TABLE invoice_item_categories IS 'Mirror of the tracker''s invoice item categories.';
COMMENT ON COLUMN invoice_item_categories.name IS 'Name.';
COMMENT ON COLUMN invoice_item_categories.use_as_service IS 'Used for time (service) lines.';
COMMENT ON COLUMN invoice_item_categories.use_as_expense IS 'Used for expense lines.';
COMMENT ON COLUMN invoice_item_categories.source IS 'The configured source name (sources[].name).';
COMMENT ON COLUMN invoice_item_categories.id IS 'The provider''s id as text.';
COMMENT ON COLUMN invoice_item_categories.updated_at IS 'The source''s version stamp.';
COMMENT ON COLUMN invoice_item_categories.fetched_at IS 'When tidemark fetched this version; breaks ties between equal versions.';
COMMENT ON COLUMN invoice_item_categories.content_hash IS 'SHA-256 of the record in canonical JSON form.';
COMMENT ON COLUMN invoice_item_categories.raw IS 'The record as the source sent it.';
COMMENT ON COLUMN invoice_item_categories.first_seen_at IS 'When tidemark first stored this id; never changed afterwards.';
COMMENT ON COLUMN invoice_item_categories.deleted_at IS 'Set when the record was deleted at the source (tombstone); null while live.';

CREATE TABLE estimate_item_categories (
    source        text        NOT NULL,
    id            text        NOT NULL,
    name          text NOT NULL,
    updated_at    timestamptz NOT NULL,
    fetched_at    timestamptz NOT NULL,
    content_hash  bytea       NOT NULL,
    raw           jsonb       NOT NULL,
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz,
    PRIMARY KEY (source, id)
);
COMMENT ON TABLE estimate_item_categories IS 'Mirror of the tracker''s estimate item categories.';
COMMENT ON COLUMN estimate_item_categories.name IS 'Name.';
COMMENT ON COLUMN estimate_item_categories.source IS 'The configured source name (sources[].name).';
COMMENT ON COLUMN estimate_item_categories.id IS 'The provider''s id as text.';
COMMENT ON COLUMN estimate_item_categories.updated_at IS 'The source''s version stamp.';
COMMENT ON COLUMN estimate_item_categories.fetched_at IS 'When tidemark fetched this version; breaks ties between equal versions.';
COMMENT ON COLUMN estimate_item_categories.content_hash IS 'SHA-256 of the record in canonical JSON form.';
COMMENT ON COLUMN estimate_item_categories.raw IS 'The record as the source sent it.';
COMMENT ON COLUMN estimate_item_categories.first_seen_at IS 'When tidemark first stored this id; never changed afterwards.';
COMMENT ON COLUMN estimate_item_categories.deleted_at IS 'Set when the record was deleted at the source (tombstone); null while live.';

CREATE TABLE invoices (
    source        text        NOT NULL,
    id            text        NOT NULL,
    notes         text,
    client_id     text NOT NULL,
    number        text,
    state         text NOT NULL,
    amount        numeric NOT NULL,
    due_amount    numeric NOT NULL,
    tax_amount    numeric,
    discount_amount numeric,
    subject       text,
    currency      text,
    issue_date    date,
    due_date      date,
    period_start  date,
    period_end    date,
    sent_at       timestamptz,
    paid_at       timestamptz,
    estimate_id   text,
    creator_id    text,
    updated_at    timestamptz NOT NULL,
    fetched_at    timestamptz NOT NULL,
    content_hash  bytea       NOT NULL,
    raw           jsonb       NOT NULL,
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz,
    PRIMARY KEY (source, id)
);
COMMENT ON TABLE invoices IS 'Mirror of the tracker''s invoices; their lines are in invoice_line_items.';
COMMENT ON COLUMN invoices.notes IS 'Free-text notes; null when none.';
COMMENT ON COLUMN invoices.client_id IS 'Client id (clients.id).';
COMMENT ON COLUMN invoices.number IS 'Document number as shown to the client.';
COMMENT ON COLUMN invoices.state IS 'State: draft, open, paid or closed (invoices); draft, sent, accepted or declined (estimates).';
COMMENT ON COLUMN invoices.amount IS 'Total amount, exact decimal.';
COMMENT ON COLUMN invoices.due_amount IS 'Amount still due, exact decimal.';
COMMENT ON COLUMN invoices.tax_amount IS 'First tax amount, exact decimal.';
COMMENT ON COLUMN invoices.discount_amount IS 'Discount amount, exact decimal.';
COMMENT ON COLUMN invoices.subject IS 'Subject line; null when none.';
COMMENT ON COLUMN invoices.currency IS 'Currency (ISO 4217).';
COMMENT ON COLUMN invoices.issue_date IS 'Date issued.';
COMMENT ON COLUMN invoices.due_date IS 'Date payment is due.';
COMMENT ON COLUMN invoices.period_start IS 'First day of the invoiced period; null when none.';
COMMENT ON COLUMN invoices.period_end IS 'Last day of the invoiced period; null when none.';
COMMENT ON COLUMN invoices.sent_at IS 'When it was sent; null while a draft.';
COMMENT ON COLUMN invoices.paid_at IS 'When it was paid in full; null until then.';
COMMENT ON COLUMN invoices.estimate_id IS 'Estimate it was made from (estimates.id); null when none.';
COMMENT ON COLUMN invoices.creator_id IS 'User who created it (users.id).';
COMMENT ON COLUMN invoices.source IS 'The configured source name (sources[].name).';
COMMENT ON COLUMN invoices.id IS 'The provider''s id as text.';
COMMENT ON COLUMN invoices.updated_at IS 'The source''s version stamp.';
COMMENT ON COLUMN invoices.fetched_at IS 'When tidemark fetched this version; breaks ties between equal versions.';
COMMENT ON COLUMN invoices.content_hash IS 'SHA-256 of the record in canonical JSON form.';
COMMENT ON COLUMN invoices.raw IS 'The record as the source sent it.';
COMMENT ON COLUMN invoices.first_seen_at IS 'When tidemark first stored this id; never changed afterwards.';
COMMENT ON COLUMN invoices.deleted_at IS 'Set when the record was deleted at the source (tombstone); null while live.';

CREATE TABLE invoice_line_items (
    source        text        NOT NULL,
    invoice_id    text        NOT NULL,
    id            text        NOT NULL,
    kind          text NOT NULL,
    description   text,
    project_id    text,
    quantity      numeric NOT NULL,
    unit_price    numeric NOT NULL,
    amount        numeric NOT NULL,
    taxed         boolean NOT NULL,
    taxed2        boolean NOT NULL,
    raw           jsonb       NOT NULL,
    parent_hash   bytea       NOT NULL,
    PRIMARY KEY (source, invoice_id, id)
);
COMMENT ON TABLE invoice_line_items IS 'Lines of the mirrored invoices, replaced as a whole when the invoice''s content changes.';
COMMENT ON COLUMN invoice_line_items.source IS 'The configured source name (sources[].name).';
COMMENT ON COLUMN invoice_line_items.invoice_id IS 'The parent''s id (invoices.id).';
COMMENT ON COLUMN invoice_line_items.id IS 'The line''s id as text.';
COMMENT ON COLUMN invoice_line_items.kind IS 'Item category name (invoice or estimate item category).';
COMMENT ON COLUMN invoice_line_items.description IS 'Line description; null when none.';
COMMENT ON COLUMN invoice_line_items.project_id IS 'Project id (projects.id); null when the line names none.';
COMMENT ON COLUMN invoice_line_items.quantity IS 'Quantity (hours or units), exact decimal.';
COMMENT ON COLUMN invoice_line_items.unit_price IS 'Price per unit, exact decimal.';
COMMENT ON COLUMN invoice_line_items.amount IS 'Line amount (quantity × unit price), exact decimal.';
COMMENT ON COLUMN invoice_line_items.taxed IS 'The first tax applies.';
COMMENT ON COLUMN invoice_line_items.taxed2 IS 'The second tax applies.';
COMMENT ON COLUMN invoice_line_items.raw IS 'The line as the source sent it, inside its parent.';
COMMENT ON COLUMN invoice_line_items.parent_hash IS 'The invoice''s content_hash these lines were taken from.';

CREATE TABLE invoice_payments (
    source        text        NOT NULL,
    id            text        NOT NULL,
    notes         text,
    invoice_id    text NOT NULL,
    amount        numeric NOT NULL,
    paid_at       timestamptz,
    paid_date     date,
    recorded_by_email text,
    updated_at    timestamptz NOT NULL,
    fetched_at    timestamptz NOT NULL,
    content_hash  bytea       NOT NULL,
    raw           jsonb       NOT NULL,
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz,
    PRIMARY KEY (source, id)
);
CREATE INDEX invoice_payments_invoice_id ON invoice_payments (source, invoice_id);
COMMENT ON TABLE invoice_payments IS 'Mirror of the payments recorded against invoices.';
COMMENT ON COLUMN invoice_payments.notes IS 'Free-text notes; null when none.';
COMMENT ON COLUMN invoice_payments.invoice_id IS 'Invoice paid (invoices.id).';
COMMENT ON COLUMN invoice_payments.amount IS 'Amount paid, exact decimal.';
COMMENT ON COLUMN invoice_payments.paid_at IS 'When the payment was made.';
COMMENT ON COLUMN invoice_payments.paid_date IS 'Day the payment was made.';
COMMENT ON COLUMN invoice_payments.recorded_by_email IS 'E-mail address of who recorded it.';
COMMENT ON COLUMN invoice_payments.source IS 'The configured source name (sources[].name).';
COMMENT ON COLUMN invoice_payments.id IS 'The provider''s id as text.';
COMMENT ON COLUMN invoice_payments.updated_at IS 'The source''s version stamp.';
COMMENT ON COLUMN invoice_payments.fetched_at IS 'When tidemark fetched this version; breaks ties between equal versions.';
COMMENT ON COLUMN invoice_payments.content_hash IS 'SHA-256 of the record in canonical JSON form.';
COMMENT ON COLUMN invoice_payments.raw IS 'The record as the source sent it.';
COMMENT ON COLUMN invoice_payments.first_seen_at IS 'When tidemark first stored this id; never changed afterwards.';
COMMENT ON COLUMN invoice_payments.deleted_at IS 'Set when the record was deleted at the source (tombstone); null while live.';

CREATE TABLE invoice_messages (
    source        text        NOT NULL,
    id            text        NOT NULL,
    subject       text,
    invoice_id    text NOT NULL,
    sent_by_email text,
    event_type    text,
    updated_at    timestamptz NOT NULL,
    fetched_at    timestamptz NOT NULL,
    content_hash  bytea       NOT NULL,
    raw           jsonb       NOT NULL,
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz,
    PRIMARY KEY (source, id)
);
CREATE INDEX invoice_messages_invoice_id ON invoice_messages (source, invoice_id);
COMMENT ON TABLE invoice_messages IS 'Mirror of the messages sent about invoices (sends, reminders, thank-yous).';
COMMENT ON COLUMN invoice_messages.subject IS 'Subject line; null when none.';
COMMENT ON COLUMN invoice_messages.invoice_id IS 'The invoice the message is about (invoices.id).';
COMMENT ON COLUMN invoice_messages.sent_by_email IS 'E-mail address of the sender.';
COMMENT ON COLUMN invoice_messages.event_type IS 'What the message recorded (send, close, re-open, view, accept, decline); null for a plain message.';
COMMENT ON COLUMN invoice_messages.source IS 'The configured source name (sources[].name).';
COMMENT ON COLUMN invoice_messages.id IS 'The provider''s id as text.';
COMMENT ON COLUMN invoice_messages.updated_at IS 'The source''s version stamp.';
COMMENT ON COLUMN invoice_messages.fetched_at IS 'When tidemark fetched this version; breaks ties between equal versions.';
COMMENT ON COLUMN invoice_messages.content_hash IS 'SHA-256 of the record in canonical JSON form.';
COMMENT ON COLUMN invoice_messages.raw IS 'The record as the source sent it.';
COMMENT ON COLUMN invoice_messages.first_seen_at IS 'When tidemark first stored this id; never changed afterwards.';
COMMENT ON COLUMN invoice_messages.deleted_at IS 'Set when the record was deleted at the source (tombstone); null while live.';

CREATE TABLE estimates (
    source        text        NOT NULL,
    id            text        NOT NULL,
    notes         text,
    client_id     text NOT NULL,
    number        text,
    state         text NOT NULL,
    amount        numeric NOT NULL,
    tax_amount    numeric,
    discount_amount numeric,
    subject       text,
    currency      text,
    issue_date    date,
    sent_at       timestamptz,
    accepted_at   timestamptz,
    declined_at   timestamptz,
    creator_id    text,
    updated_at    timestamptz NOT NULL,
    fetched_at    timestamptz NOT NULL,
    content_hash  bytea       NOT NULL,
    raw           jsonb       NOT NULL,
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz,
    PRIMARY KEY (source, id)
);
COMMENT ON TABLE estimates IS 'Mirror of the tracker''s estimates; their lines are in estimate_line_items.';
COMMENT ON COLUMN estimates.notes IS 'Free-text notes; null when none.';
COMMENT ON COLUMN estimates.client_id IS 'Client id (clients.id).';
COMMENT ON COLUMN estimates.number IS 'Document number as shown to the client.';
COMMENT ON COLUMN estimates.state IS 'State: draft, open, paid or closed (invoices); draft, sent, accepted or declined (estimates).';
COMMENT ON COLUMN estimates.amount IS 'Total amount, exact decimal.';
COMMENT ON COLUMN estimates.tax_amount IS 'First tax amount, exact decimal.';
COMMENT ON COLUMN estimates.discount_amount IS 'Discount amount, exact decimal.';
COMMENT ON COLUMN estimates.subject IS 'Subject line; null when none.';
COMMENT ON COLUMN estimates.currency IS 'Currency (ISO 4217).';
COMMENT ON COLUMN estimates.issue_date IS 'Date issued.';
COMMENT ON COLUMN estimates.sent_at IS 'When it was sent; null while a draft.';
COMMENT ON COLUMN estimates.accepted_at IS 'When the client accepted it; null otherwise.';
COMMENT ON COLUMN estimates.declined_at IS 'When the client declined it; null otherwise.';
COMMENT ON COLUMN estimates.creator_id IS 'User who created it (users.id).';
COMMENT ON COLUMN estimates.source IS 'The configured source name (sources[].name).';
COMMENT ON COLUMN estimates.id IS 'The provider''s id as text.';
COMMENT ON COLUMN estimates.updated_at IS 'The source''s version stamp.';
COMMENT ON COLUMN estimates.fetched_at IS 'When tidemark fetched this version; breaks ties between equal versions.';
COMMENT ON COLUMN estimates.content_hash IS 'SHA-256 of the record in canonical JSON form.';
COMMENT ON COLUMN estimates.raw IS 'The record as the source sent it.';
COMMENT ON COLUMN estimates.first_seen_at IS 'When tidemark first stored this id; never changed afterwards.';
COMMENT ON COLUMN estimates.deleted_at IS 'Set when the record was deleted at the source (tombstone); null while live.';

CREATE TABLE estimate_line_items (
    source        text        NOT NULL,
    estimate_id   text        NOT NULL,
    id            text        NOT NULL,
    kind          text NOT NULL,
    description   text,
    project_id    text,
    quantity      numeric NOT NULL,
    unit_price    numeric NOT NULL,
    amount        numeric NOT NULL,
    taxed         boolean NOT NULL,
    taxed2        boolean NOT NULL,
    raw           jsonb       NOT NULL,
    parent_hash   bytea       NOT NULL,
    PRIMARY KEY (source, estimate_id, id)
);
COMMENT ON TABLE estimate_line_items IS 'Lines of the mirrored estimates, replaced as a whole when the estimate''s content changes.';
COMMENT ON COLUMN estimate_line_items.source IS 'The configured source name (sources[].name).';
COMMENT ON COLUMN estimate_line_items.estimate_id IS 'The parent''s id (estimates.id).';
COMMENT ON COLUMN estimate_line_items.id IS 'The line''s id as text.';
COMMENT ON COLUMN estimate_line_items.kind IS 'Item category name (invoice or estimate item category).';
COMMENT ON COLUMN estimate_line_items.description IS 'Line description; null when none.';
COMMENT ON COLUMN estimate_line_items.project_id IS 'Project id (projects.id); null when the line names none.';
COMMENT ON COLUMN estimate_line_items.quantity IS 'Quantity (hours or units), exact decimal.';
COMMENT ON COLUMN estimate_line_items.unit_price IS 'Price per unit, exact decimal.';
COMMENT ON COLUMN estimate_line_items.amount IS 'Line amount (quantity × unit price), exact decimal.';
COMMENT ON COLUMN estimate_line_items.taxed IS 'The first tax applies.';
COMMENT ON COLUMN estimate_line_items.taxed2 IS 'The second tax applies.';
COMMENT ON COLUMN estimate_line_items.raw IS 'The line as the source sent it, inside its parent.';
COMMENT ON COLUMN estimate_line_items.parent_hash IS 'The estimate''s content_hash these lines were taken from.';

CREATE TABLE estimate_messages (
    source        text        NOT NULL,
    id            text        NOT NULL,
    subject       text,
    estimate_id   text NOT NULL,
    sent_by_email text,
    event_type    text,
    updated_at    timestamptz NOT NULL,
    fetched_at    timestamptz NOT NULL,
    content_hash  bytea       NOT NULL,
    raw           jsonb       NOT NULL,
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz,
    PRIMARY KEY (source, id)
);
CREATE INDEX estimate_messages_estimate_id ON estimate_messages (source, estimate_id);
COMMENT ON TABLE estimate_messages IS 'Mirror of the messages sent about estimates.';
COMMENT ON COLUMN estimate_messages.subject IS 'Subject line; null when none.';
COMMENT ON COLUMN estimate_messages.estimate_id IS 'The estimate the message is about (estimates.id).';
COMMENT ON COLUMN estimate_messages.sent_by_email IS 'E-mail address of the sender.';
COMMENT ON COLUMN estimate_messages.event_type IS 'What the message recorded (send, close, re-open, view, accept, decline); null for a plain message.';
COMMENT ON COLUMN estimate_messages.source IS 'The configured source name (sources[].name).';
COMMENT ON COLUMN estimate_messages.id IS 'The provider''s id as text.';
COMMENT ON COLUMN estimate_messages.updated_at IS 'The source''s version stamp.';
COMMENT ON COLUMN estimate_messages.fetched_at IS 'When tidemark fetched this version; breaks ties between equal versions.';
COMMENT ON COLUMN estimate_messages.content_hash IS 'SHA-256 of the record in canonical JSON form.';
COMMENT ON COLUMN estimate_messages.raw IS 'The record as the source sent it.';
COMMENT ON COLUMN estimate_messages.first_seen_at IS 'When tidemark first stored this id; never changed afterwards.';
COMMENT ON COLUMN estimate_messages.deleted_at IS 'Set when the record was deleted at the source (tombstone); null while live.';

CREATE TABLE task_assignments (
    source        text        NOT NULL,
    id            text        NOT NULL,
    hourly_rate   numeric,
    project_id    text NOT NULL,
    task_id       text NOT NULL,
    billable      boolean NOT NULL,
    is_active     boolean NOT NULL,
    budget        numeric,
    updated_at    timestamptz NOT NULL,
    fetched_at    timestamptz NOT NULL,
    content_hash  bytea       NOT NULL,
    raw           jsonb       NOT NULL,
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz,
    PRIMARY KEY (source, id)
);
COMMENT ON TABLE task_assignments IS 'Mirror of the tasks assigned to projects, with their rates and budgets.';
COMMENT ON COLUMN task_assignments.hourly_rate IS 'Hourly rate, exact decimal; null when the default applies.';
COMMENT ON COLUMN task_assignments.project_id IS 'Project id (projects.id).';
COMMENT ON COLUMN task_assignments.task_id IS 'Task id (tasks.id).';
COMMENT ON COLUMN task_assignments.billable IS 'Time on this task is billable.';
COMMENT ON COLUMN task_assignments.is_active IS 'Active (not archived).';
COMMENT ON COLUMN task_assignments.budget IS 'Budget, exact decimal; null when none.';
COMMENT ON COLUMN task_assignments.source IS 'The configured source name (sources[].name).';
COMMENT ON COLUMN task_assignments.id IS 'The provider''s id as text.';
COMMENT ON COLUMN task_assignments.updated_at IS 'The source''s version stamp.';
COMMENT ON COLUMN task_assignments.fetched_at IS 'When tidemark fetched this version; breaks ties between equal versions.';
COMMENT ON COLUMN task_assignments.content_hash IS 'SHA-256 of the record in canonical JSON form.';
COMMENT ON COLUMN task_assignments.raw IS 'The record as the source sent it.';
COMMENT ON COLUMN task_assignments.first_seen_at IS 'When tidemark first stored this id; never changed afterwards.';
COMMENT ON COLUMN task_assignments.deleted_at IS 'Set when the record was deleted at the source (tombstone); null while live.';

CREATE TABLE user_assignments (
    source        text        NOT NULL,
    id            text        NOT NULL,
    hourly_rate   numeric,
    project_id    text NOT NULL,
    user_id       text NOT NULL,
    is_project_manager boolean NOT NULL,
    use_default_rates boolean NOT NULL,
    is_active     boolean NOT NULL,
    budget        numeric,
    updated_at    timestamptz NOT NULL,
    fetched_at    timestamptz NOT NULL,
    content_hash  bytea       NOT NULL,
    raw           jsonb       NOT NULL,
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz,
    PRIMARY KEY (source, id)
);
COMMENT ON TABLE user_assignments IS 'Mirror of the users assigned to projects, with their rates and budgets.';
COMMENT ON COLUMN user_assignments.hourly_rate IS 'Hourly rate, exact decimal; null when the default applies.';
COMMENT ON COLUMN user_assignments.project_id IS 'Project id (projects.id).';
COMMENT ON COLUMN user_assignments.user_id IS 'User id (users.id).';
COMMENT ON COLUMN user_assignments.is_project_manager IS 'The user manages the project.';
COMMENT ON COLUMN user_assignments.use_default_rates IS 'The user''s default rates apply, not hourly_rate.';
COMMENT ON COLUMN user_assignments.is_active IS 'Active (not archived).';
COMMENT ON COLUMN user_assignments.budget IS 'Budget, exact decimal; null when none.';
COMMENT ON COLUMN user_assignments.source IS 'The configured source name (sources[].name).';
COMMENT ON COLUMN user_assignments.id IS 'The provider''s id as text.';
COMMENT ON COLUMN user_assignments.updated_at IS 'The source''s version stamp.';
COMMENT ON COLUMN user_assignments.fetched_at IS 'When tidemark fetched this version; breaks ties between equal versions.';
COMMENT ON COLUMN user_assignments.content_hash IS 'SHA-256 of the record in canonical JSON form.';
COMMENT ON COLUMN user_assignments.raw IS 'The record as the source sent it.';
COMMENT ON COLUMN user_assignments.first_seen_at IS 'When tidemark first stored this id; never changed afterwards.';
COMMENT ON COLUMN user_assignments.deleted_at IS 'Set when the record was deleted at the source (tombstone); null while live.';

CREATE TABLE roles (
    source        text        NOT NULL,
    id            text        NOT NULL,
    name          text NOT NULL,
    user_ids      jsonb NOT NULL,
    updated_at    timestamptz NOT NULL,
    fetched_at    timestamptz NOT NULL,
    content_hash  bytea       NOT NULL,
    raw           jsonb       NOT NULL,
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz,
    PRIMARY KEY (source, id)
);
COMMENT ON TABLE roles IS 'Mirror of the tracker''s roles (groups of users).';
COMMENT ON COLUMN roles.name IS 'Name.';
COMMENT ON COLUMN roles.user_ids IS 'Ids of the users in the role, a JSON array.';
COMMENT ON COLUMN roles.source IS 'The configured source name (sources[].name).';
COMMENT ON COLUMN roles.id IS 'The provider''s id as text.';
COMMENT ON COLUMN roles.updated_at IS 'The source''s version stamp.';
COMMENT ON COLUMN roles.fetched_at IS 'When tidemark fetched this version; breaks ties between equal versions.';
COMMENT ON COLUMN roles.content_hash IS 'SHA-256 of the record in canonical JSON form.';
COMMENT ON COLUMN roles.raw IS 'The record as the source sent it.';
COMMENT ON COLUMN roles.first_seen_at IS 'When tidemark first stored this id; never changed afterwards.';
COMMENT ON COLUMN roles.deleted_at IS 'Set when the record was deleted at the source (tombstone); null while live.';

CREATE TABLE company (
    source        text        NOT NULL,
    id            text        NOT NULL,
    name          text NOT NULL,
    full_domain   text,
    is_active     boolean NOT NULL,
    week_start_day text,
    plan_type     text,
    approval_feature boolean NOT NULL,
    expense_feature boolean NOT NULL,
    invoice_feature boolean NOT NULL,
    estimate_feature boolean NOT NULL,
    updated_at    timestamptz NOT NULL,
    fetched_at    timestamptz NOT NULL,
    content_hash  bytea       NOT NULL,
    raw           jsonb       NOT NULL,
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz,
    PRIMARY KEY (source, id)
);
COMMENT ON TABLE company IS 'Mirror of the account''s company settings: one row per source, id the account id.';
COMMENT ON COLUMN company.name IS 'Name.';
COMMENT ON COLUMN company.full_domain IS 'The account''s domain.';
COMMENT ON COLUMN company.is_active IS 'Active (not archived).';
COMMENT ON COLUMN company.week_start_day IS 'First day of the week (Saturday, Sunday or Monday).';
COMMENT ON COLUMN company.plan_type IS 'The account''s plan.';
COMMENT ON COLUMN company.approval_feature IS 'Approvals are on: time and expenses are submitted and approved.';
COMMENT ON COLUMN company.expense_feature IS 'Expenses are on.';
COMMENT ON COLUMN company.invoice_feature IS 'Invoices are on.';
COMMENT ON COLUMN company.estimate_feature IS 'Estimates are on.';
COMMENT ON COLUMN company.source IS 'The configured source name (sources[].name).';
COMMENT ON COLUMN company.id IS 'The account id (one row per source).';
COMMENT ON COLUMN company.updated_at IS 'The source''s clock when the version was listed (the company has no version stamp).';
COMMENT ON COLUMN company.fetched_at IS 'When tidemark fetched this version; breaks ties between equal versions.';
COMMENT ON COLUMN company.content_hash IS 'SHA-256 of the record in canonical JSON form.';
COMMENT ON COLUMN company.raw IS 'The record as the source sent it.';
COMMENT ON COLUMN company.first_seen_at IS 'When tidemark first stored this id; never changed afterwards.';
COMMENT ON COLUMN company.deleted_at IS 'Set when the record was deleted at the source (tombstone); null while live.';

CREATE TABLE billable_rates (
    source        text        NOT NULL,
    id            text        NOT NULL,
    amount        numeric NOT NULL,
    user_id       text NOT NULL,
    start_date    date,
    end_date      date,
    updated_at    timestamptz NOT NULL,
    fetched_at    timestamptz NOT NULL,
    content_hash  bytea       NOT NULL,
    raw           jsonb       NOT NULL,
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz,
    PRIMARY KEY (source, id)
);
CREATE INDEX billable_rates_user_id ON billable_rates (source, user_id);
COMMENT ON TABLE billable_rates IS 'Mirror of each user''s billable rates over time.';
COMMENT ON COLUMN billable_rates.amount IS 'Hourly rate, exact decimal.';
COMMENT ON COLUMN billable_rates.user_id IS 'User the rate belongs to (users.id).';
COMMENT ON COLUMN billable_rates.start_date IS 'First day the rate applies; null: since ever.';
COMMENT ON COLUMN billable_rates.end_date IS 'Last day the rate applies; null: still current.';
COMMENT ON COLUMN billable_rates.source IS 'The configured source name (sources[].name).';
COMMENT ON COLUMN billable_rates.id IS 'The provider''s id as text.';
COMMENT ON COLUMN billable_rates.updated_at IS 'The source''s version stamp.';
COMMENT ON COLUMN billable_rates.fetched_at IS 'When tidemark fetched this version; breaks ties between equal versions.';
COMMENT ON COLUMN billable_rates.content_hash IS 'SHA-256 of the record in canonical JSON form.';
COMMENT ON COLUMN billable_rates.raw IS 'The record as the source sent it.';
COMMENT ON COLUMN billable_rates.first_seen_at IS 'When tidemark first stored this id; never changed afterwards.';
COMMENT ON COLUMN billable_rates.deleted_at IS 'Set when the record was deleted at the source (tombstone); null while live.';

CREATE TABLE cost_rates (
    source        text        NOT NULL,
    id            text        NOT NULL,
    amount        numeric NOT NULL,
    user_id       text NOT NULL,
    start_date    date,
    end_date      date,
    updated_at    timestamptz NOT NULL,
    fetched_at    timestamptz NOT NULL,
    content_hash  bytea       NOT NULL,
    raw           jsonb       NOT NULL,
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz,
    PRIMARY KEY (source, id)
);
CREATE INDEX cost_rates_user_id ON cost_rates (source, user_id);
COMMENT ON TABLE cost_rates IS 'Mirror of each user''s cost rates over time (what an hour costs the agency).';
COMMENT ON COLUMN cost_rates.amount IS 'Hourly rate, exact decimal.';
COMMENT ON COLUMN cost_rates.user_id IS 'User the rate belongs to (users.id).';
COMMENT ON COLUMN cost_rates.start_date IS 'First day the rate applies; null: since ever.';
COMMENT ON COLUMN cost_rates.end_date IS 'Last day the rate applies; null: still current.';
COMMENT ON COLUMN cost_rates.source IS 'The configured source name (sources[].name).';
COMMENT ON COLUMN cost_rates.id IS 'The provider''s id as text.';
COMMENT ON COLUMN cost_rates.updated_at IS 'The source''s version stamp.';
COMMENT ON COLUMN cost_rates.fetched_at IS 'When tidemark fetched this version; breaks ties between equal versions.';
COMMENT ON COLUMN cost_rates.content_hash IS 'SHA-256 of the record in canonical JSON form.';
COMMENT ON COLUMN cost_rates.raw IS 'The record as the source sent it.';
COMMENT ON COLUMN cost_rates.first_seen_at IS 'When tidemark first stored this id; never changed afterwards.';
COMMENT ON COLUMN cost_rates.deleted_at IS 'Set when the record was deleted at the source (tombstone); null while live.';

-- +goose Down
DROP TABLE cost_rates;
DROP TABLE billable_rates;
DROP TABLE company;
DROP TABLE roles;
DROP TABLE user_assignments;
DROP TABLE task_assignments;
DROP TABLE estimate_messages;
DROP TABLE estimate_line_items;
DROP TABLE estimates;
DROP TABLE invoice_messages;
DROP TABLE invoice_payments;
DROP TABLE invoice_line_items;
DROP TABLE invoices;
DROP TABLE estimate_item_categories;
DROP TABLE invoice_item_categories;
DROP TABLE expenses;
DROP TABLE expense_categories;
DROP TABLE contacts;
