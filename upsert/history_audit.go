package upsert

import "github.com/tidemarkhq/tidemark/clients"

// The late-edit audit (issue 32): views over a resource's history that list
// the changes made after the record was invoiced, approved, locked, its
// month closed, or (invoices) sent. They are declared with the history of
// their resource. An edit is a version after a live one that changes more
// than the record's status (approving or invoicing is no edit): an update,
// a deletion not healed by the next version (a reconcile's false deletion
// comes back with the content it had, and is no edit), or a restore after a
// real deletion.
//
// They read the store alone: a change, the version before it and the one
// after have a predecessor or a successor, so none of them is a first
// version still kept in its mirror row.

// auditDDL are the audit views of a resource's history, by resource.
var auditDDL = map[clients.Resource][]string{
	clients.TimeEntries: {timeEntryLateEditsSQL},
	"invoices":          {invoiceLateEditsSQL},
}

const (
	timeEntryLateEditsSQL = `CREATE OR REPLACE VIEW time_entry_late_edits AS
WITH c AS (
  -- Each change with the live version before it (base): the previous
  -- version, or for a restore the one before the deletion.
  SELECT c.*, CASE WHEN c.change = 'restored' THEN pp.seq ELSE p.seq END AS base_seq,
    n.change = 'restored' AND n.content_hash = p.content_hash AS healed
  FROM time_entries_history_store c
  JOIN time_entries_history_store p ON p.source = c.source AND p.id = c.id AND p.seq = c.prev_seq
  LEFT JOIN time_entries_history_store pp ON pp.source = c.source AND pp.id = c.id AND pp.seq = p.prev_seq AND c.change = 'restored'
  LEFT JOIN time_entries_history_store n ON n.source = c.source AND n.id = c.id AND n.prev_seq = c.seq AND c.change = 'deleted'
  WHERE c.change IN ('updated', 'deleted', 'restored')
),
e AS (
  SELECT c.source, c.id, c.seq, c.change, c.valid_from AS edited_at, c.recorded_from AS learned_at, c.run_id,
    b.spent_date, b.project_id, b.user_id, b.invoice_id,
    array_remove(ARRAY[
      CASE WHEN b.is_billed OR b.invoice_id IS NOT NULL THEN 'invoiced' END,
      CASE WHEN b.is_closed OR b.approval_status = 'approved' THEN 'approved' END,
      CASE WHEN b.is_locked THEN 'locked' END,
      CASE WHEN c.valid_from >= (date_trunc('month', b.spent_date) + interval '1 month')::timestamp
        AT TIME ZONE coalesce(b.time_zone, 'UTC') THEN 'month_closed' END], NULL) AS reasons,
    CASE WHEN c.change = 'restored' THEN 0 ELSE b.hours END AS hours_before,
    CASE WHEN c.deleted THEN 0 ELSE c.hours END AS hours_after,
    CASE WHEN b.billable AND c.change <> 'restored' THEN b.hours ELSE 0 END AS billable_before,
    CASE WHEN c.billable AND NOT c.deleted THEN c.hours ELSE 0 END AS billable_after,
    -- What was edited: a status change alone (approving, invoicing,
    -- locking, a timer) is not an edit.
    c.change <> 'updated' OR (to_jsonb(c) - ARRAY['is_billed', 'is_closed', 'is_locked', 'invoice_id', 'approval_status', 'is_running'])
      - ARRAY['seq', 'prev_seq', 'base_seq', 'healed', 'updated_at', 'fetched_at', 'content_hash', 'change', 'valid_from', 'valid_to', 'recorded_from', 'recorded_to', 'run_id']
      IS DISTINCT FROM (to_jsonb(b) - ARRAY['is_billed', 'is_closed', 'is_locked', 'invoice_id', 'approval_status', 'is_running'])
      - ARRAY['seq', 'prev_seq', 'updated_at', 'fetched_at', 'content_hash', 'change', 'valid_from', 'valid_to', 'recorded_from', 'recorded_to', 'run_id'] AS edited
  FROM c JOIN time_entries_history_store b ON b.source = c.source AND b.id = c.id AND b.seq = c.base_seq
  WHERE NOT b.deleted AND NOT coalesce(c.healed, false)
    AND NOT (c.change = 'restored' AND c.content_hash = b.content_hash)
)
SELECT e.source, e.id, e.seq, e.change, e.edited_at, e.learned_at, e.run_id, e.reasons,
  e.spent_date, e.project_id, e.user_id, e.invoice_id,
  e.hours_before, e.hours_after, e.hours_after - e.hours_before AS hours_change,
  r.billable_rate, (e.billable_after - e.billable_before) * r.billable_rate AS amount_change
FROM e LEFT JOIN LATERAL (
  SELECT CASE WHEN jsonb_typeof(m.raw -> 'billable_rate') = 'number' THEN (m.raw ->> 'billable_rate')::numeric END AS billable_rate
  FROM time_entries m WHERE m.source = e.source AND m.id = e.id) r ON true
WHERE e.edited AND cardinality(e.reasons) > 0;
COMMENT ON VIEW time_entry_late_edits IS 'Time entries changed (or deleted) after they were invoiced, approved, locked or their month closed, with the change in hours and billable amount (hours × the entry''s billable_rate as the mirror holds it; null when the provider sends none). From time_entries_history.'`

	invoiceLateEditsSQL = `CREATE OR REPLACE VIEW invoice_late_edits AS
WITH e AS (
  SELECT c.source, c.id, c.seq, c.change, c.valid_from AS edited_at, c.recorded_from AS learned_at, c.run_id,
    p.number, p.sent_at, p.state AS state_before, c.state AS state_after,
    p.amount AS amount_before, CASE WHEN c.deleted THEN 0 ELSE c.amount END AS amount_after,
    ARRAY(SELECT k FROM jsonb_each(to_jsonb(p) - ARRAY['seq', 'prev_seq', 'updated_at', 'fetched_at', 'content_hash', 'raw',
        'deleted_at', 'deleted', 'change', 'valid_from', 'valid_to', 'recorded_from', 'recorded_to', 'run_id',
        'state', 'due_amount', 'paid_at', 'sent_at']) AS pv(k, v)
      WHERE pv.v IS DISTINCT FROM to_jsonb(c) -> pv.k ORDER BY k)
    || CASE WHEN p.raw -> 'line_items' IS DISTINCT FROM c.raw -> 'line_items' THEN ARRAY['line_items'] ELSE '{}' END
    || CASE WHEN c.deleted THEN ARRAY['deleted'] ELSE '{}' END AS changed
  FROM invoices_history_store c
  JOIN invoices_history_store p ON p.source = c.source AND p.id = c.id AND p.seq = c.prev_seq
  WHERE NOT p.deleted AND (p.sent_at IS NOT NULL OR p.state <> 'draft')
    AND (c.change = 'updated' OR c.change = 'deleted' AND NOT EXISTS (
    SELECT 1 FROM invoices_history_store n WHERE n.source = c.source AND n.id = c.id AND n.prev_seq = c.seq
      AND n.change = 'restored' AND n.content_hash = p.content_hash))
)
SELECT e.*, e.amount_after - e.amount_before AS amount_change FROM e WHERE cardinality(e.changed) > 0;
COMMENT ON VIEW invoice_late_edits IS 'Invoices whose content changed (or that were deleted) after they were sent: which columns (line_items for their lines), and the change in amount; payments (state, due_amount, paid_at) are not edits. From invoices_history.'`
)
