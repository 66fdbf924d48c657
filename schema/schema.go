// Package schema owns the declarations of the mirrored resources. A resource
// is one Table value: its name (the table's, and the clients.Resource that
// names it everywhere), a doc line, its typed columns in order (SQL type,
// nullability, the JSON path the value usually comes from, the COMMENT), how
// it is listed (by a date range or whole), its parent for nested lists, and
// how deletions are found. The declarations are registered in a Registry
// that refuses bad or duplicate ones; the upsert's SQL and row values, the
// verify and cursors resource lists, the configuration's `resources:` check
// and the README's schema table follow from it. A test holds every
// declaration against the migrated database.
//
// # Rows
//
// A clients.Record carries its typed columns in Record.Row, one value per
// declared column, in the declaration's order. The Go type of a value
// follows the column's SQL type:
//
//	text         string
//	date         clients.Date
//	numeric      clients.Decimal (exact decimal text)
//	boolean      bool
//	bigint       int64
//	timestamptz  time.Time
//	jsonb        json.RawMessage (one JSON value)
//
// nil is SQL NULL and is accepted only in a nullable column. A nullable text
// column declared EmptyIsNull also stores "" as NULL. Any other Go type is
// refused by upsert with an error naming the column. A Record without a Row
// is a tombstone that carries no content (see Fill).
//
// Decoders resolve a column's position once (var spentDate =
// schema.TimeEntries.Index("spent_date"); the core resources' positions
// are here, schema.TE.SpentDate) and write row[spentDate]; the
// name-based accessors (Table.Text, Table.Date, ...) are for tests and cold
// paths, At for hot ones.
package schema

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
)

// Type is a column's SQL type, spelled as in the migrations.
type Type string

// The column types a declaration may use.
const (
	Text        Type = "text"
	Date        Type = "date"
	Numeric     Type = "numeric"
	Boolean     Type = "boolean"
	Bigint      Type = "bigint"
	Timestamptz Type = "timestamptz"
	JSONB       Type = "jsonb"
	// Bytea is used by the common column content_hash only.
	Bytea Type = "bytea"
)

// zeros are the column types a typed column may have, each with the Go zero
// value of its row values: what Row stores in a NOT NULL column left out,
// and the Go type GoType names and Accepts checks.
var zeros = map[Type]any{
	Text: "", Date: clients.Date{}, Numeric: clients.Decimal(""), Boolean: false,
	Bigint: int64(0), Timestamptz: time.Time{}, JSONB: json.RawMessage(nil),
}

// GoType names the Go type of a row value of type t ("" for a type a typed
// column cannot have), for messages and docs.
func (t Type) GoType() string {
	z, ok := zeros[t]
	if !ok {
		return ""
	}
	return reflect.TypeOf(z).String()
}

// Fill says what a tombstone that carries no content (a Record with
// DeletedAt and no Row) stores in a NOT NULL column when its id was never
// stored. Nullable columns store NULL.
type Fill uint8

const (
	// Neutral stores the type's neutral value: "" for text, 0 for numeric
	// and bigint, false for boolean, {} for jsonb.
	Neutral Fill = iota
	// VersionDay stores the day (date) or the instant (timestamptz) of the
	// tombstone's version, in UTC. A NOT NULL date or timestamptz column
	// must declare it: those types have no neutral value.
	VersionDay
)

// Column is one typed column of a table.
type Column struct {
	// Name is the column's name: ^[a-z_][a-z0-9_]*$.
	Name string
	Type Type
	// Nullable columns accept nil in a row (NULL).
	Nullable bool
	// EmptyIsNull stores "" as NULL in a nullable text column: the optional
	// ids and names that sources send empty, as null, or not at all.
	EmptyIsNull bool
	// Path is where the value usually comes from in the source's JSON, as
	// Harvest (the reference dialect) names it, e.g. "project.id".
	// Documentation only: each provider's decoder maps its own dialect.
	Path string
	// Doc is the column's COMMENT in the database, word for word.
	Doc string
	// Tombstone is what a tombstone without content stores here (NOT NULL
	// columns only).
	Tombstone Fill
}

// Deletions says how the deletions of a table's records are found. A table
// may declare both.
type Deletions uint8

const (
	// Reported: a source may report deletions; they arrive as records with
	// DeletedAt set and are written as tombstones (Toggl's
	// server_deleted_at, Clockify's deletion feed).
	Reported Deletions = 1 << iota
	// Reconciled: a reconcile pass re-lists the table (a recent date range,
	// or whole) and tombstones the stored rows the source no longer returns
	// (Harvest reports none).
	Reconciled
)

func (d Deletions) String() string {
	switch d {
	case Reported:
		return "reported by the source"
	case Reconciled:
		return "reconcile"
	case Reported | Reconciled:
		return "reported by the source when it does; else reconcile"
	}
	return fmt.Sprintf("Deletions(%d)", uint8(d))
}

// Table declares one mirrored resource and its table.
type Table struct {
	// Name is the table's name and the resource's: ^[a-z_][a-z0-9_]*$.
	Name clients.Resource
	// Doc is the table's COMMENT in the database, word for word.
	Doc string
	// Columns are the typed columns, in row order. The common columns
	// (Common) are not declared here.
	Columns []Column
	// ListBy names the NOT NULL date column that a backfill or reconcile
	// range selects (time_entries: spent_date); "" means the resource is
	// small and listed whole.
	ListBy string
	// UserColumn names the text column that holds the user a scoped listing
	// covers (time_entries: user_id); "" means listings are never scoped by
	// user.
	UserColumn string
	// Parent names the resource whose rows a nested list is listed under
	// (e.g. a project's assignments); "" for a top-level list. A parent is
	// registered before its children.
	Parent clients.Resource
	// ParentColumn names the text column that holds the parent's id, for a
	// resource with a Parent: the listing fills it, the record does not
	// carry it (a rate listed under /users/{id} names no user).
	ParentColumn string
	// NoSince means the source has no filter by change for this resource:
	// every incremental pass lists it whole, and the content hash drops
	// what did not change (Harvest's roles and company).
	NoSince bool
	// Singleton means the source serves one record, not a list (Harvest's
	// company): its id is the account's, its version the page's Date.
	Singleton bool
	// Children are arrays inside each record mirrored as tables of their
	// own, keyed by (source, parent id, line id), replaced as a whole in
	// the parent's transaction whenever its stored content changes.
	Children []*Child
	// Deletions says how deletions are found.
	Deletions Deletions
	// HistoryBy names declared columns that the history's index by
	// ListBy also carries (upsert, history.go): an as-of query of one
	// project's or one person's month then reads only its rows.
	HistoryBy []string

	index map[string]int // column name → position, built by Register
}

// Child declares an array inside a parent's records mirrored as its own
// table (an invoice's line_items). Its rows are derived from the parent's
// stored raw, so they are written only when the parent's content changes,
// in the same transaction, and never disagree with it.
type Child struct {
	// Name is the child table's name.
	Name clients.Resource
	// Doc is its COMMENT.
	Doc string
	// Path is the array's key in the parent's record ("line_items").
	Path string
	// ParentColumn names the column holding the parent's id ("invoice_id").
	ParentColumn string
	// Columns are the typed columns; Path is relative to one element.
	Columns []Column

	index map[string]int
}

// ChildCommon are the columns every child table has besides its typed
// ones (and the parent column, which follows source).
var ChildCommon = []CommonColumn{
	{"source", Text, false, "the configured source name (sources[].name)"},
	{"id", Text, false, "the line's id as text"},
	{"raw", JSONB, false, "the line as the source sent it, inside its parent"},
	{"parent_hash", Bytea, false, "the parent's content_hash these lines were taken from"},
}

// Index returns the position of the named column of c.
func (c *Child) Index(name string) int {
	i, ok := c.index[name]
	if !ok {
		panic(fmt.Sprintf("schema: %s has no column %q", c.Name, name))
	}
	return i
}

// ListedByDate reports whether the resource is listed by a date range.
func (t *Table) ListedByDate() bool { return t.ListBy != "" }

// Index returns the position of the named column in a row. It panics on a
// name the table does not declare: call it once, in a package-level var,
// so that a typo fails at start-up and never per record.
func (t *Table) Index(name string) int {
	i, ok := t.index[name]
	if !ok {
		panic(fmt.Sprintf("schema: %s has no column %q", t.Name, name))
	}
	return i
}

// Column returns the named column.
func (t *Table) Column(name string) (Column, bool) {
	i, ok := t.index[name]
	if !ok {
		return Column{}, false
	}
	return t.Columns[i], true
}

// Width is the number of values in a row of t.
func (t *Table) Width() int { return len(t.Columns) }

// Values are a row's values by column name, for Row.
type Values map[string]any

// Row builds a row from values by column name, for tests and cold paths
// (decoders write values by index). A NOT NULL column left out gets the Go
// zero value of its type ("", false, clients.Date{}, ...) as a struct field
// would; a nullable one gets nil, and so does "" in an EmptyIsNull column.
// It panics on an unknown column or a value of the wrong Go type: the
// caller's mistake, not the source's.
func (t *Table) Row(vs Values) []any {
	row := make([]any, len(t.Columns))
	for i, c := range t.Columns {
		if !c.Nullable {
			row[i] = zeros[c.Type]
		}
	}
	for name, v := range vs {
		i, ok := t.index[name]
		if !ok {
			panic(fmt.Sprintf("schema: %s has no column %q", t.Name, name))
		}
		c := t.Columns[i]
		if v != nil && !Accepts(c.Type, v) {
			panic(fmt.Sprintf("schema: %s.%s is %s: want a %s, got %T", t.Name, name, c.Type, c.Type.GoType(), v))
		}
		if s, ok := v.(string); ok && s == "" && c.EmptyIsNull {
			v = nil
		}
		row[i] = v
	}
	return row
}

// OrNull returns s, or nil (NULL) when s is empty: how a decoder fills an
// EmptyIsNull column, so that its rows compare equal to Row's.
func OrNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Accepts reports whether v has the Go type of a row value of type t (nil
// is not a value of any type).
func Accepts(t Type, v any) bool {
	z, ok := zeros[t]
	return ok && v != nil && reflect.TypeOf(v) == reflect.TypeOf(z)
}

// At returns the value at position i of rec's row as a T; the zero T when
// the record has no row or the value is NULL or of another type. For hot
// paths, with i resolved once by Index.
func At[T any](rec *clients.Record, i int) T {
	var v T
	if i < len(rec.Row) {
		v, _ = rec.Row[i].(T)
	}
	return v
}

// Get returns the value of the named column in rec's row: nil when the
// record has no row or the value is NULL. It panics on an unknown column.
func (t *Table) Get(rec clients.Record, name string) any {
	i := t.Index(name)
	if i >= len(rec.Row) {
		return nil
	}
	return rec.Row[i]
}

// IsNull reports whether the named column of rec's row is NULL (or the
// record has no row).
func (t *Table) IsNull(rec clients.Record, name string) bool { return t.Get(rec, name) == nil }

// Text returns a text column's value; "" when NULL.
func (t *Table) Text(rec clients.Record, name string) string {
	s, _ := t.Get(rec, name).(string)
	return s
}

// Date returns a date column's value; the zero Date when NULL.
func (t *Table) Date(rec clients.Record, name string) clients.Date {
	d, _ := t.Get(rec, name).(clients.Date)
	return d
}

// Decimal returns a numeric column's value; "" when NULL.
func (t *Table) Decimal(rec clients.Record, name string) clients.Decimal {
	d, _ := t.Get(rec, name).(clients.Decimal)
	return d
}

// Bool returns a boolean column's value; false when NULL.
func (t *Table) Bool(rec clients.Record, name string) bool { b, _ := t.Get(rec, name).(bool); return b }

// TextPtr returns a nullable text column's value, nil when NULL.
func (t *Table) TextPtr(rec clients.Record, name string) *string {
	if s, ok := t.Get(rec, name).(string); ok {
		return &s
	}
	return nil
}

// CommonColumn is a column every resource table has besides its typed
// ones. Its COMMENT differs from table to table, so only its presence is
// checked.
type CommonColumn struct {
	Name     string
	Type     Type
	Nullable bool
	Doc      string // what it holds (the README's words)
}

// Common are the columns every resource table has, in table order around
// the typed columns: source and id first, the rest after.
var Common = []CommonColumn{
	{"source", Text, false, "the configured source name (sources[].name)"},
	{"id", Text, false, "the provider's id as text"},
	{"updated_at", Timestamptz, false, "the source's version stamp"},
	{"fetched_at", Timestamptz, false, "when tidemark fetched this version; breaks ties between equal versions"},
	{"content_hash", Bytea, false, "SHA-256 of the record in canonical JSON form"},
	{"raw", JSONB, false, "the record as the source sent it"},
	{"first_seen_at", Timestamptz, false, "when tidemark first stored this id; never changed afterwards"},
	{"deleted_at", Timestamptz, true, "set when the record was deleted at the source (tombstone); null while live"},
}
