-- +goose Up
-- What the mirror is for (issue 12): documented views over the live rows
-- (deleted_at IS NULL) of the account's tables. Amounts are exact numerics;
-- money is never summed across currencies.

CREATE VIEW uninvoiced_billable AS
SELECT te.source,
       te.client_id,
       c.name                                        AS client_name,
       te.project_id,
       p.name                                        AS project_name,
       count(*)                                      AS entries,
       sum(te.hours)                                 AS hours,
       sum(te.hours * (te.raw->>'billable_rate')::numeric) AS amount,
       count(*) FILTER (WHERE te.raw->>'billable_rate' IS NULL) AS entries_without_rate
FROM time_entries te
LEFT JOIN clients  c ON c.source = te.source AND c.id = te.client_id AND c.deleted_at IS NULL
LEFT JOIN projects p ON p.source = te.source AND p.id = te.project_id AND p.deleted_at IS NULL
WHERE te.deleted_at IS NULL AND te.billable AND NOT te.is_billed AND te.invoice_id IS NULL
GROUP BY te.source, te.client_id, c.name, te.project_id, p.name;
COMMENT ON VIEW uninvoiced_billable IS 'Billable time not invoiced yet, per source, client and project: live time entries that are billable and not billed.';
COMMENT ON COLUMN uninvoiced_billable.source IS 'The configured source name (sources[].name).';
COMMENT ON COLUMN uninvoiced_billable.client_id IS 'Client id (clients.id); null for entries without a client.';
COMMENT ON COLUMN uninvoiced_billable.client_name IS 'Client name; null when the client is not mirrored or deleted.';
COMMENT ON COLUMN uninvoiced_billable.project_id IS 'Project id (projects.id).';
COMMENT ON COLUMN uninvoiced_billable.project_name IS 'Project name; null when the project is not mirrored or deleted.';
COMMENT ON COLUMN uninvoiced_billable.entries IS 'Number of time entries.';
COMMENT ON COLUMN uninvoiced_billable.hours IS 'Sum of their hours, exact decimal.';
COMMENT ON COLUMN uninvoiced_billable.amount IS 'Sum of hours × the billable rate the tracker applied to each entry (Harvest''s billable_rate, from raw); entries without a rate add nothing (see entries_without_rate).';
COMMENT ON COLUMN uninvoiced_billable.entries_without_rate IS 'Entries whose source sent no billable rate: their hours count, their amount does not.';

CREATE VIEW approval_hours_weekly AS
SELECT source,
       user_id,
       to_char(spent_date, 'IYYY-"W"IW')                   AS iso_week,
       date_trunc('week', spent_date)::date                AS week_start,
       coalesce(sum(hours) FILTER (WHERE coalesce(approval_status, CASE WHEN is_closed THEN 'approved' ELSE 'unsubmitted' END) = 'approved'), 0)    AS approved_hours,
       coalesce(sum(hours) FILTER (WHERE approval_status = 'submitted'), 0)                                                                          AS submitted_hours,
       coalesce(sum(hours) FILTER (WHERE coalesce(approval_status, CASE WHEN is_closed THEN 'approved' ELSE 'unsubmitted' END) = 'unsubmitted'), 0) AS unsubmitted_hours
FROM time_entries
WHERE deleted_at IS NULL
GROUP BY source, user_id, to_char(spent_date, 'IYYY-"W"IW'), date_trunc('week', spent_date)::date;
COMMENT ON VIEW approval_hours_weekly IS 'Hours per user and ISO week by approval state: approved, submitted (awaiting approval) and unsubmitted. Without approval_status (other trackers), is_closed counts as approved.';
COMMENT ON COLUMN approval_hours_weekly.source IS 'The configured source name (sources[].name).';
COMMENT ON COLUMN approval_hours_weekly.user_id IS 'User id (users.id).';
COMMENT ON COLUMN approval_hours_weekly.iso_week IS 'ISO 8601 week of spent_date, e.g. 2026-W09.';
COMMENT ON COLUMN approval_hours_weekly.week_start IS 'Monday of that ISO week.';
COMMENT ON COLUMN approval_hours_weekly.approved_hours IS 'Hours approved, exact decimal.';
COMMENT ON COLUMN approval_hours_weekly.submitted_hours IS 'Hours submitted and awaiting approval, exact decimal.';
COMMENT ON COLUMN approval_hours_weekly.unsubmitted_hours IS 'Hours not submitted yet, exact decimal.';

CREATE VIEW client_invoiced_paid AS
WITH inv AS (
    SELECT source, id, client_id, currency, amount, due_amount
    FROM invoices
    WHERE deleted_at IS NULL AND state <> 'draft'
), paid AS (
    SELECT pay.source, pay.invoice_id, sum(pay.amount) AS paid
    FROM invoice_payments pay
    WHERE pay.deleted_at IS NULL
    GROUP BY pay.source, pay.invoice_id
)
SELECT inv.source,
       inv.client_id,
       c.name                             AS client_name,
       inv.currency,
       count(*)                           AS invoices,
       sum(inv.amount)                    AS invoiced,
       coalesce(sum(paid.paid), 0)        AS paid,
       sum(inv.due_amount)                AS due
FROM inv
LEFT JOIN paid ON paid.source = inv.source AND paid.invoice_id = inv.id
LEFT JOIN clients c ON c.source = inv.source AND c.id = inv.client_id AND c.deleted_at IS NULL
GROUP BY inv.source, inv.client_id, c.name, inv.currency;
COMMENT ON VIEW client_invoiced_paid IS 'Invoiced versus paid per client and currency: live invoices that are not drafts, and the live payments recorded against them.';
COMMENT ON COLUMN client_invoiced_paid.source IS 'The configured source name (sources[].name).';
COMMENT ON COLUMN client_invoiced_paid.client_id IS 'Client id (clients.id).';
COMMENT ON COLUMN client_invoiced_paid.client_name IS 'Client name; null when the client is not mirrored or deleted.';
COMMENT ON COLUMN client_invoiced_paid.currency IS 'Currency of the invoices (ISO 4217); amounts are never summed across currencies.';
COMMENT ON COLUMN client_invoiced_paid.invoices IS 'Number of invoices.';
COMMENT ON COLUMN client_invoiced_paid.invoiced IS 'Sum of the invoice totals, exact decimal.';
COMMENT ON COLUMN client_invoiced_paid.paid IS 'Sum of the payments recorded against them, exact decimal.';
COMMENT ON COLUMN client_invoiced_paid.due IS 'Sum of what the tracker says is still due, exact decimal.';

-- +goose Down
DROP VIEW client_invoiced_paid;
DROP VIEW approval_hours_weekly;
DROP VIEW uninvoiced_billable;
