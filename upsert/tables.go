package upsert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/schema"
)

// table is the upsert's view of one declared resource table (package
// schema). Every SQL identifier Apply and TombstoneMissing use comes from a
// registered declaration, whose names the registry holds to
// ^[a-z_][a-z0-9_]*$, never from input.
type table struct {
	name  string   // the resource table
	stage string   // the session's temporary staging table
	typed []column // typed columns, in row (and staging) order
	// neutral holds what a tombstone without content stores in each typed
	// column when its id was never stored (see schema.Fill); nil for the
	// columns that take the tombstone's version day.
	neutral []any
	byDate  string // the date column a range selects (TombstoneMissing From/To); "" none
	byUser  string // the user column a scope selects; "" none
	// historyBy are the declared columns the history's date index carries.
	historyBy []string
	resource  clients.Resource

	// children are the statements that keep the child tables (line items)
	// in line with this table's rows.
	children []childSQL

	// hist is the history's SQL (history.go), built on first use.
	histOnce sync.Once
	hist     *historySQL

	// SQL, built once from the fields above.
	createStage, lookup, insertNew, upsertExisting, updateTypeless, moveForward, clearStage, tombstoneMissing, missing string
}

type column struct {
	name      string
	typ       schema.Type
	nullable  bool
	emptyNull bool // "" is stored as NULL
	fill      schema.Fill
}

// tables holds the tables of every resource registered when the package
// was initialized; tableFor builds the others on first use.
var (
	tables = map[clients.Resource]*table{}
	late   sync.Map // clients.Resource → *table
)

func init() {
	for _, def := range schema.All() {
		tables[def.Name] = newTable(def)
	}
}

// tableFor returns the table of a registered resource.
func tableFor(r clients.Resource) (*table, bool) {
	if t, ok := tables[r]; ok {
		return t, true
	}
	if t, ok := late.Load(r); ok {
		return t.(*table), true
	}
	def, ok := schema.Lookup(r)
	if !ok {
		return nil, false
	}
	t, _ := late.LoadOrStore(r, newTable(def))
	return t.(*table), true
}

func newTable(def *schema.Table) *table {
	t := &table{name: string(def.Name), stage: "tidemark_stage_" + string(def.Name), resource: def.Name,
		byDate: def.ListBy, byUser: def.UserColumn, historyBy: def.HistoryBy, children: childStatements(def)}
	for _, c := range def.Columns {
		t.typed = append(t.typed, column{name: c.Name, typ: c.Type, nullable: c.Nullable, emptyNull: c.EmptyIsNull, fill: c.Tombstone})
		t.neutral = append(t.neutral, neutral(c))
	}
	t.build()
	return t
}

// neutral is what a tombstone without content stores in c (nil for NULL
// and for a column that takes the version's day, set per record).
func neutral(c schema.Column) any {
	if c.Nullable || c.Tombstone == schema.VersionDay {
		return nil
	}
	switch c.Type {
	case schema.Text:
		return ""
	case schema.Numeric:
		return pgtype.Numeric{Int: zero, Valid: true}
	case schema.Boolean:
		return false
	case schema.Bigint:
		return int64(0)
	case schema.JSONB:
		return json.RawMessage("{}")
	}
	return nil // not reached: the registry refuses other NOT NULL types without VersionDay
}

// values checks the record's row against the declared columns and appends
// the column values to dst, in the form the database takes them.
func (t *table) values(rec *clients.Record, dst []any) ([]any, bool, *RecordError) {
	if len(rec.Row) != len(t.typed) {
		if rec.Row == nil {
			return dst, false, &RecordError{Field: "row", Reason: "missing typed columns for a live record"}
		}
		return dst, false, &RecordError{Field: "row", Reason: fmt.Sprintf("%d values for the %d typed columns of %s (a row of another resource?)", len(rec.Row), len(t.typed), t.name)}
	}
	replaced := false
	for i := range t.typed {
		c := &t.typed[i]
		v, reason := c.value(rec.Row[i])
		if reason == replacedText {
			replaced, reason = true, ""
		}
		if reason != "" {
			return dst, false, &RecordError{Field: c.name, Reason: reason}
		}
		dst = append(dst, v)
	}
	return dst, replaced, nil
}

// replacedText is the reason column.value gives for a text value it stored
// with characters replaced: not an error.
const replacedText = "(replaced)"

// storableText replaces what a Postgres text column refuses (NUL, bytes
// that are not UTF-8) with U+FFFD.
func storableText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// value checks one row value against its column and returns it as the
// database takes it. Text and boolean values are passed on as they are
// (no allocation); dates and decimals are converted.
func (c *column) value(v any) (any, string) {
	if v == nil {
		if c.nullable {
			return nil, ""
		}
		return nil, "missing"
	}
	switch c.typ {
	case schema.Text:
		s, ok := v.(string)
		if !ok {
			break
		}
		if checkText(s) != "" {
			// NUL or not UTF-8: stored with U+FFFD in their place (the
			// raw column keeps the record as sent).
			return storableText(s), replacedText
		}
		if s == "" && c.emptyNull {
			return nil, ""
		}
		return v, ""
	case schema.Boolean:
		if _, ok := v.(bool); ok {
			return v, ""
		}
	case schema.Date:
		d, ok := v.(clients.Date)
		if !ok {
			break
		}
		if r := checkDate(d); r != "" {
			return nil, r
		}
		return pgtype.Date{Time: d.Time(), Valid: true}, ""
	case schema.Numeric:
		d, ok := v.(clients.Decimal)
		if !ok {
			break
		}
		n, r := parseDecimal(string(d))
		if r != "" {
			return nil, r
		}
		return n, ""
	case schema.Bigint:
		if _, ok := v.(int64); ok {
			return v, ""
		}
	case schema.Timestamptz:
		ts, ok := v.(time.Time)
		if !ok {
			break
		}
		if r := checkTime(ts); r != "" {
			return nil, r
		}
		return ts.Truncate(time.Microsecond), ""
	case schema.JSONB:
		j, ok := v.(json.RawMessage)
		if !ok {
			break
		}
		if !json.Valid(j) || !utf8.Valid(j) {
			return nil, "not JSON (or not UTF-8)"
		}
		if bytes.Contains(j, []byte(`\u`)) {
			// A \u0000 or unpaired surrogate escape, which jsonb refuses,
			// is kept as text (storable).
			if s := storable(j); !bytes.Equal(s, j) {
				return json.RawMessage(s), replacedText
			}
		}
		return v, ""
	}
	return nil, fmt.Sprintf("want a %s for %s, got %T", c.typ.GoType(), c.typ, v)
}

// appendValues appends it's typed column values to row: its own, or a
// tombstone's without content (typeless).
func (t *table) appendValues(row []any, it *item) []any {
	if it.typed != nil {
		return append(row, it.typed...)
	}
	return t.typeless(it.rec, row)
}

// typeless appends the typed values of a tombstone that carries none: NULL
// or the neutral value, and the version's day where the column says so.
func (t *table) typeless(rec *clients.Record, dst []any) []any {
	for i := range t.typed {
		c := &t.typed[i]
		if c.fill == schema.VersionDay && !c.nullable {
			if c.typ == schema.Date {
				dst = append(dst, pgtype.Date{Time: clients.DateOf(rec.Version.UTC()).Time(), Valid: true})
			} else {
				dst = append(dst, rec.Version.Truncate(time.Microsecond))
			}
			continue
		}
		dst = append(dst, t.neutral[i])
	}
	return dst
}

// Columns every resource table has, after the typed ones, in staging order.
var versionColumns = []column{
	{name: "updated_at", typ: "timestamptz"}, {name: "fetched_at", typ: "timestamptz"}, {name: "content_hash", typ: "bytea"},
	{name: "raw", typ: "jsonb"}, {name: "deleted_at", typ: "timestamptz"},
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
		ddl = append(ddl, c.name+" "+string(c.typ))
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
	// Tables not listed by date, or without a user column, still name $3
	// and $4, or $7 (always NULL there), so that every statement takes the
	// same parameters.
	dateFilter, userFilter := tombstoneNoDateSQL, tombstoneNoUserSQL
	if t.byDate != "" {
		dateFilter = fmt.Sprintf(tombstoneDateFilterSQL, t.byDate)
	}
	if t.byUser != "" {
		userFilter = fmt.Sprintf(tombstoneUserFilterSQL, t.byUser)
	}
	t.tombstoneMissing = fmt.Sprintf(tombstoneMissingSQL, t.name, dateFilter, userFilter)
	t.missing = fmt.Sprintf(missingSQL, t.name, dateFilter, userFilter)
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
	// clock ($9, the process's, the clock every record's FetchedAt comes
	// from; not the database's now(), which may be off from it): a listing fetched afterwards that still returns the record (one
	// a reconcile missed, say a page shifted by a deletion) then counts as
	// the same version fetched later with other content, and brings it back;
	// a page fetched before the mark stays stale.
	// With $8 it also returns what the change feed needs of each marked row.
	tombstoneMissingSQL = `WITH cand AS (
    SELECT t.id FROM %[1]s t
    WHERE t.source = $1 AND t.deleted_at IS NULL AND t.updated_at <= $2 %[2]s %[3]s
      AND NOT EXISTS (SELECT 1 FROM unnest($5::text[]) AS seen(id) WHERE seen.id = t.id)
), n AS (SELECT count(*) AS n FROM cand),
upd AS (
    UPDATE %[1]s t SET deleted_at = $2, fetched_at = GREATEST(t.fetched_at, $9::timestamptz),
        content_hash = sha256(t.content_hash)
    FROM cand
    WHERE t.source = $1 AND t.id = cand.id AND ($6::bigint <= 0 OR (SELECT n FROM n) <= $6::bigint)
      AND t.deleted_at IS NULL AND t.updated_at <= $2 %[2]s %[3]s
    RETURNING t.id, t.updated_at, t.content_hash
)
SELECT (SELECT n FROM n), (SELECT count(*) FROM upd),
    CASE WHEN $8::boolean THEN (SELECT array_agg(id ORDER BY id COLLATE "C") FROM upd) END,
    CASE WHEN $8::boolean THEN (SELECT array_agg(updated_at ORDER BY id COLLATE "C") FROM upd) END,
    CASE WHEN $8::boolean THEN (SELECT array_agg(content_hash ORDER BY id COLLATE "C") FROM upd) END`

	// missingSQL reads the ids tombstoneMissingSQL would mark, with the
	// same parameters ($6 a LIMIT, NULL for none; $8 and $9 unused).
	missingSQL = `SELECT t.id FROM %[1]s t
    WHERE t.source = $1 AND t.deleted_at IS NULL AND t.updated_at <= $2 %[2]s %[3]s
      AND NOT EXISTS (SELECT 1 FROM unnest($5::text[]) AS seen(id) WHERE seen.id = t.id)
    ORDER BY t.id COLLATE "C" LIMIT $6::bigint`

	tombstoneNoDateSQL = `AND $3::date IS NULL AND $4::date IS NULL`

	tombstoneDateFilterSQL = `
      AND ($3::date IS NULL OR t.%[1]s >= $3::date) AND ($4::date IS NULL OR t.%[1]s <= $4::date)`

	tombstoneNoUserSQL = `AND $7::text[] IS NULL`

	// tombstoneUserFilterSQL: $7 NULL is every user; an empty array, none.
	// The list is read by a subquery, which the plan hashes once, rather
	// than by = ANY ($7), which a generic plan searches for every row.
	tombstoneUserFilterSQL = `
      AND ($7::text[] IS NULL OR t.%s IN (SELECT unnest($7::text[])))`
)

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
