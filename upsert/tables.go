package upsert

import (
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tidemarkhq/tidemark/clients"
)

// table describes one resource table. Every SQL identifier Apply and
// TombstoneMissing use comes from the fixed tables below, never from input.
type table struct {
	name  string   // the resource table
	stage string   // the session's temporary staging table
	typed []column // typed columns, in staging order
	// values checks the record's typed fields and appends their column values
	// to dst; typeless appends defaults for a tombstone that carries none.
	values   func(rec *clients.Record, dst []any) ([]any, *RecordError)
	typeless func(rec *clients.Record, dst []any) []any
	byDate   bool // has spent_date: TombstoneMissing accepts From/To
	byUser   bool // has user_id: TombstoneMissing accepts a user scope

	// SQL, built once from the fields above.
	createStage, lookup, insertNew, upsertExisting, updateTypeless, moveForward, clearStage, tombstoneMissing string
}

type column struct{ name, typ string }

var tables = map[clients.Resource]*table{
	clients.TimeEntries: {
		name: "time_entries",
		typed: []column{
			{"spent_date", "date"}, {"hours", "numeric"}, {"notes", "text"}, {"user_id", "text"},
			{"project_id", "text"}, {"task_id", "text"}, {"client_id", "text"}, {"billable", "boolean"},
			{"is_locked", "boolean"}, {"is_closed", "boolean"}, {"is_billed", "boolean"},
			{"is_running", "boolean"}, {"invoice_id", "text"},
		},
		byDate: true,
		byUser: true,
		values: func(rec *clients.Record, dst []any) ([]any, *RecordError) {
			e := rec.TimeEntry
			if e == nil {
				return dst, &RecordError{Field: "TimeEntry", Reason: "missing typed fields for a live record"}
			}
			if err := checkDate(e.SpentDate); err != "" {
				return dst, &RecordError{Field: "spent_date", Reason: err}
			}
			hours, reason := parseDecimal(string(e.Hours))
			if reason != "" {
				return dst, &RecordError{Field: "hours", Reason: reason}
			}
			var notes any
			if e.Notes != nil {
				if r := checkText(*e.Notes); r != "" {
					return dst, &RecordError{Field: "notes", Reason: r}
				}
				notes = *e.Notes
			}
			for _, f := range [...]struct{ name, v string }{
				{"user_id", e.UserID}, {"project_id", e.ProjectID}, {"task_id", e.TaskID},
				{"client_id", e.ClientID}, {"invoice_id", e.InvoiceID},
			} {
				if r := checkText(f.v); r != "" {
					return dst, &RecordError{Field: f.name, Reason: r}
				}
			}
			return append(dst, pgtype.Date{Time: e.SpentDate.Time(), Valid: true}, hours, notes,
				e.UserID, e.ProjectID, nullable(e.TaskID), nullable(e.ClientID), e.Billable,
				e.IsLocked, e.IsClosed, e.IsBilled, e.IsRunning, nullable(e.InvoiceID)), nil
		},
		typeless: func(rec *clients.Record, dst []any) []any {
			// NOT NULL columns get neutral values: the day of the deletion
			// version, zero hours, empty ids, false flags.
			d := clients.DateOf(rec.Version.UTC())
			return append(dst, pgtype.Date{Time: d.Time(), Valid: true}, pgtype.Numeric{Int: zero, Valid: true}, nil,
				"", "", nil, nil, false, false, false, false, false, nil)
		},
	},
	clients.Projects: {
		name: "projects",
		typed: []column{
			{"name", "text"}, {"code", "text"}, {"client_id", "text"}, {"is_active", "boolean"}, {"is_billable", "boolean"},
		},
		values: func(rec *clients.Record, dst []any) ([]any, *RecordError) {
			p := rec.Project
			if p == nil {
				return dst, &RecordError{Field: "Project", Reason: "missing typed fields for a live record"}
			}
			if re := checkTexts("name", p.Name, "code", p.Code, "client_id", p.ClientID); re != nil {
				return dst, re
			}
			return append(dst, p.Name, nullable(p.Code), nullable(p.ClientID), p.IsActive, p.IsBillable), nil
		},
		typeless: func(rec *clients.Record, dst []any) []any {
			return append(dst, "", nil, nil, false, false)
		},
	},
	clients.Clients: {
		name:  "clients",
		typed: []column{{"name", "text"}, {"currency", "text"}, {"is_active", "boolean"}},
		values: func(rec *clients.Record, dst []any) ([]any, *RecordError) {
			c := rec.Client
			if c == nil {
				return dst, &RecordError{Field: "Client", Reason: "missing typed fields for a live record"}
			}
			if re := checkTexts("name", c.Name, "currency", c.Currency); re != nil {
				return dst, re
			}
			return append(dst, c.Name, nullable(c.Currency), c.IsActive), nil
		},
		typeless: func(rec *clients.Record, dst []any) []any { return append(dst, "", nil, false) },
	},
	clients.Users: {
		name:  "users",
		typed: []column{{"first_name", "text"}, {"last_name", "text"}, {"email", "text"}, {"is_active", "boolean"}},
		values: func(rec *clients.Record, dst []any) ([]any, *RecordError) {
			u := rec.User
			if u == nil {
				return dst, &RecordError{Field: "User", Reason: "missing typed fields for a live record"}
			}
			if re := checkTexts("first_name", u.FirstName, "last_name", u.LastName, "email", u.Email); re != nil {
				return dst, re
			}
			return append(dst, nullable(u.FirstName), nullable(u.LastName), nullable(u.Email), u.IsActive), nil
		},
		typeless: func(rec *clients.Record, dst []any) []any { return append(dst, nil, nil, nil, false) },
	},
	clients.Tasks: {
		name:  "tasks",
		typed: []column{{"name", "text"}, {"is_active", "boolean"}},
		values: func(rec *clients.Record, dst []any) ([]any, *RecordError) {
			t := rec.Task
			if t == nil {
				return dst, &RecordError{Field: "Task", Reason: "missing typed fields for a live record"}
			}
			if re := checkTexts("name", t.Name); re != nil {
				return dst, re
			}
			return append(dst, t.Name, t.IsActive), nil
		},
		typeless: func(rec *clients.Record, dst []any) []any { return append(dst, "", false) },
	},
}

// Columns every resource table has, after the typed ones, in staging order.
var versionColumns = []column{
	{"updated_at", "timestamptz"}, {"fetched_at", "timestamptz"}, {"content_hash", "bytea"},
	{"raw", "jsonb"}, {"deleted_at", "timestamptz"},
}

func init() {
	for _, t := range tables {
		t.stage = "tidemark_stage_" + t.name
		t.build()
	}
}

// stageColumns are the staging table's columns in COPY order.
func (t *table) stageColumns() []string {
	cols := []string{"id"}
	for _, c := range t.typed {
		cols = append(cols, c.name)
	}
	for _, c := range versionColumns {
		cols = append(cols, c.name)
	}
	return append(cols, "is_new")
}

// copyColumns are the table's columns a COPY of new rows fills;
// first_seen_at takes its default, now().
func (t *table) copyColumns() []string {
	cols := []string{"source", "id"}
	for _, c := range t.typed {
		cols = append(cols, c.name)
	}
	for _, c := range versionColumns {
		cols = append(cols, c.name)
	}
	return cols
}

func (t *table) build() {
	var ddl, ins, sel, set []string
	ddl = append(ddl, "id text")
	for _, c := range append(append([]column{}, t.typed...), versionColumns...) {
		ddl = append(ddl, c.name+" "+c.typ)
		ins = append(ins, c.name)
		sel = append(sel, "s."+c.name)
		set = append(set, c.name+" = EXCLUDED."+c.name)
	}
	ddl = append(ddl, "is_new boolean")

	t.createStage = fmt.Sprintf(createStageSQL, t.stage, strings.Join(ddl, ", "))
	t.lookup = fmt.Sprintf(lookupSQL, t.name)
	t.insertNew = fmt.Sprintf(insertNewSQL, t.name, strings.Join(ins, ", "), strings.Join(sel, ", "), t.stage)
	t.upsertExisting = fmt.Sprintf(upsertExistingSQL, t.name, strings.Join(ins, ", "), strings.Join(sel, ", "), t.stage, strings.Join(set, ",\n    "))
	t.updateTypeless = fmt.Sprintf(updateTypelessSQL, t.name)
	t.moveForward = fmt.Sprintf(moveForwardSQL, t.name)
	t.clearStage = fmt.Sprintf(clearStageSQL, t.stage)
	// Tables without spent_date or user_id still name $3 and $4, or $7
	// (always NULL there), so that every statement takes the same parameters.
	dateFilter, userFilter := tombstoneNoDateSQL, tombstoneNoUserSQL
	if t.byDate {
		dateFilter = tombstoneDateFilterSQL
	}
	if t.byUser {
		userFilter = tombstoneUserFilterSQL
	}
	t.tombstoneMissing = fmt.Sprintf(tombstoneMissingSQL, t.name, dateFilter, userFilter)
}

// The statements, with %s for identifiers from the fixed table above.
const (
	// createStageSQL: one staging table per session and resource. Rows vanish
	// at commit; Apply also clears it, since one transaction may apply
	// several pages.
	createStageSQL = `CREATE TEMP TABLE IF NOT EXISTS %s (%s) ON COMMIT DELETE ROWS`

	// lookupSQL reads the stored version and hash of a page's ids, so that Go
	// splits the page into new, newer and skipped rows before any write:
	// unchanged and stale rows are never written, locked or WAL-logged.
	lookupSQL = `SELECT id, updated_at, fetched_at, content_hash FROM %s WHERE source = $1 AND id = ANY($2::text[])`

	// insertNewSQL inserts the rows the lookup did not find. A row another
	// writer inserted meanwhile conflicts and is not returned; Apply looks it
	// up again and treats it like any stored row. Rows go in id order so that
	// concurrent appliers take row locks in one order (no deadlock).
	insertNewSQL = `INSERT INTO %s AS t (source, id, %s)
SELECT $1, s.id, %s FROM pg_temp.%s s WHERE s.is_new ORDER BY s.id COLLATE "C"
ON CONFLICT (source, id) DO NOTHING
RETURNING t.id`

	// upsertExistingSQL writes the rows the lookup found older. The guard
	// repeats the write rule against the row as it is now, so that a newer
	// version written meanwhile by another applier is never overwritten.
	upsertExistingSQL = `INSERT INTO %s AS t (source, id, %s)
SELECT $1, s.id, %s FROM pg_temp.%s s WHERE NOT s.is_new ORDER BY s.id COLLATE "C"
ON CONFLICT (source, id) DO UPDATE SET
    %s
WHERE (t.updated_at, t.fetched_at) < (EXCLUDED.updated_at, EXCLUDED.fetched_at)
  AND t.content_hash <> EXCLUDED.content_hash
RETURNING t.id`

	// updateTypelessSQL writes a tombstone that carries no typed fields over a
	// stored row: the typed columns keep their stored values.
	updateTypelessSQL = `UPDATE %s AS t SET updated_at = u.updated_at, fetched_at = u.fetched_at,
    content_hash = u.content_hash, raw = u.raw::jsonb, deleted_at = u.deleted_at
FROM unnest($2::text[], $3::timestamptz[], $4::timestamptz[], $5::bytea[], $6::text[], $7::timestamptz[])
    AS u(id, updated_at, fetched_at, content_hash, raw, deleted_at)
WHERE t.source = $1 AND t.id = u.id
  AND (t.updated_at, t.fetched_at) < (u.updated_at, u.fetched_at)
  AND t.content_hash <> u.content_hash
RETURNING t.id`

	// moveForwardSQL moves the stored version of rows whose content is
	// unchanged to the newer version a page brought (a source whose version
	// is not part of the record sends the same content under a newer
	// version), so that an older, different state arriving later is refused.
	// Only updated_at and fetched_at change: typed columns, raw, deleted_at
	// and the hash are the stored content's. The guard repeats the rule
	// against the row as it is now; a row another applier changed meanwhile
	// is not returned and Apply looks at it again.
	moveForwardSQL = `UPDATE %s AS t SET updated_at = u.updated_at, fetched_at = u.fetched_at
FROM unnest($2::text[], $3::timestamptz[], $4::timestamptz[], $5::bytea[])
    AS u(id, updated_at, fetched_at, content_hash)
WHERE t.source = $1 AND t.id = u.id
  AND t.updated_at < u.updated_at
  AND t.content_hash = u.content_hash
RETURNING t.id`

	clearStageSQL = `DELETE FROM pg_temp.%s`

	// tombstoneMissingSQL counts and marks in one statement, so that the
	// ceiling is checked against exactly the rows it would mark: only rows
	// inside the listed scope (range, users) count and can be marked. The
	// UPDATE re-checks the row as it is now (a concurrent newer version
	// wins; a row moved out of the scope meanwhile is kept).
	// The mark changes the content hash and stamps fetched_at with our
	// clock: a listing fetched afterwards that still returns the record (one
	// a reconcile missed, say a page shifted by a deletion) then counts as
	// the same version fetched later with other content, and brings it back;
	// a page fetched before the mark stays stale.
	tombstoneMissingSQL = `WITH cand AS (
    SELECT t.id FROM %[1]s t
    WHERE t.source = $1 AND t.deleted_at IS NULL AND t.updated_at <= $2 %[2]s %[3]s
      AND NOT EXISTS (SELECT 1 FROM unnest($5::text[]) AS seen(id) WHERE seen.id = t.id)
), n AS (SELECT count(*) AS n FROM cand),
upd AS (
    UPDATE %[1]s t SET deleted_at = $2, fetched_at = GREATEST(t.fetched_at, now()),
        content_hash = sha256(t.content_hash)
    FROM cand
    WHERE t.source = $1 AND t.id = cand.id AND ($6::bigint <= 0 OR (SELECT n FROM n) <= $6::bigint)
      AND t.deleted_at IS NULL AND t.updated_at <= $2 %[2]s %[3]s
    RETURNING 1
)
SELECT (SELECT n FROM n), (SELECT count(*) FROM upd)`

	tombstoneNoDateSQL = `AND $3::date IS NULL AND $4::date IS NULL`

	tombstoneDateFilterSQL = `
      AND ($3::date IS NULL OR t.spent_date >= $3::date) AND ($4::date IS NULL OR t.spent_date <= $4::date)`

	tombstoneNoUserSQL = `AND $7::text[] IS NULL`

	// tombstoneUserFilterSQL: $7 NULL is every user; an empty array, none.
	// The list is read by a subquery, which the plan hashes once, rather
	// than by = ANY ($7), which a generic plan searches for every row.
	tombstoneUserFilterSQL = `
      AND ($7::text[] IS NULL OR t.user_id IN (SELECT unnest($7::text[])))`
)

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func checkTexts(kv ...string) *RecordError {
	for i := 0; i+1 < len(kv); i += 2 {
		if r := checkText(kv[i+1]); r != "" {
			return &RecordError{Field: kv[i], Reason: r}
		}
	}
	return nil
}

func checkDate(d clients.Date) string {
	if d.IsZero() {
		return "missing"
	}
	if d.Year < 1 || d.Year > 9999 || clients.DateOf(d.Time()) != d {
		return fmt.Sprintf("not a calendar date: %04d-%02d-%02d", d.Year, int(d.Month), d.Day)
	}
	return ""
}

func checkTime(t time.Time) string {
	if t.IsZero() {
		return "missing"
	}
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		return fmt.Sprintf("year %d out of range", y)
	}
	return ""
}
