package schema_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/schema"
)

// TestPassOrder: reference data first, then time entries, then the rest
// of the account with parents before the resources listed under them.
func TestPassOrder(t *testing.T) {
	t.Parallel()
	want := []clients.Resource{"clients", "users", "projects", "tasks", "time_entries",
		"contacts", "expense_categories", "expenses", "invoice_item_categories", "estimate_item_categories",
		"invoices", "invoice_payments", "invoice_messages", "estimates", "estimate_messages",
		"task_assignments", "user_assignments", "roles", "company", "billable_rates", "cost_rates"}
	if got := schema.Resources(); !slices.Equal(got, want) {
		t.Fatalf("Resources() = %v, want %v", got, want)
	}
	for i, tb := range schema.All() {
		if tb.Name != want[i] {
			t.Errorf("All()[%d] = %s, want %s", i, tb.Name, want[i])
		}
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	tb, err := schema.Parse("time_entries")
	if err != nil || tb != schema.TimeEntries {
		t.Fatalf("Parse(time_entries) = %v, %v", tb, err)
	}
	_, err = schema.Parse("invoice")
	var ue *schema.UnknownError
	if !errors.As(err, &ue) || ue.Name != "invoice" {
		t.Fatalf("Parse(invoice) = %v, want an *UnknownError", err)
	}
	const want = `unknown resource "invoice" (want one of clients, users, projects, tasks, time_entries, contacts, `
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want %q", err, want)
	}
	if err := schema.Check([]clients.Resource{"users", "nope"}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("Check: %v, want an error naming nope", err)
	}
	if err := schema.Check(schema.Resources()); err != nil {
		t.Errorf("Check(all): %v", err)
	}
}

// TestRegisterRefuses: a registry refuses what would break the SQL built
// from a declaration, or the docs.
func TestRegisterRefuses(t *testing.T) {
	t.Parallel()
	ok := func() schema.Table {
		return schema.Table{Name: "widgets", Doc: "Widgets.", Deletions: schema.Reconciled,
			Columns: []schema.Column{
				{Name: "name", Type: schema.Text, Doc: "Name."},
				{Name: "made_on", Type: schema.Date, Tombstone: schema.VersionDay, Doc: "Day made."},
				{Name: "owner_id", Type: schema.Text, Nullable: true, EmptyIsNull: true, Doc: "Owner."},
			}}
	}
	cases := []struct {
		name, want string
		mutate     func(*schema.Table)
	}{
		{"bad table name", "want ^[a-z_]", func(t *schema.Table) { t.Name = "Widgets" }},
		{"table name with a quote", "want ^[a-z_]", func(t *schema.Table) { t.Name = `w"x` }},
		{"no doc", "no doc", func(t *schema.Table) { t.Doc = "" }},
		{"no columns", "no typed columns", func(t *schema.Table) { t.Columns = nil }},
		{"bad column name", "want a name", func(t *schema.Table) { t.Columns[0].Name = "Name" }},
		{"column name with a space", "want a name", func(t *schema.Table) { t.Columns[0].Name = "a b" }},
		{"duplicate column", "declared twice", func(t *schema.Table) { t.Columns[2].Name = "name" }},
		{"common column", "common column", func(t *schema.Table) { t.Columns[0].Name = "updated_at" }},
		{"unknown type", "unknown type", func(t *schema.Table) { t.Columns[0].Type = "varchar" }},
		{"bytea is not a typed column", "unknown type", func(t *schema.Table) { t.Columns[0].Type = schema.Bytea }},
		{"column without doc", "no doc", func(t *schema.Table) { t.Columns[1].Doc = " " }},
		{"EmptyIsNull on NOT NULL", "EmptyIsNull", func(t *schema.Table) { t.Columns[0].EmptyIsNull = true }},
		{"VersionDay on text", "VersionDay", func(t *schema.Table) { t.Columns[0].Tombstone = schema.VersionDay }},
		{"NOT NULL date without a fill", "no neutral value", func(t *schema.Table) { t.Columns[1].Tombstone = schema.Neutral }},
		{"ListBy a text column", "ListBy", func(t *schema.Table) { t.ListBy = "name" }},
		{"ListBy an unknown column", "ListBy", func(t *schema.Table) { t.ListBy = "nope" }},
		{"UserColumn a date", "UserColumn", func(t *schema.Table) { t.UserColumn = "made_on" }},
		{"no deletions", "Deletions", func(t *schema.Table) { t.Deletions = 0 }},
		{"unregistered parent", "not registered", func(t *schema.Table) { t.Parent = "gadgets" }},
		{"parent itself", "itself", func(t *schema.Table) { t.Parent = "widgets" }},
	}
	for _, tc := range cases {
		r := schema.NewRegistry()
		tb := ok()
		tc.mutate(&tb)
		if _, err := r.Register(tb); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Register = %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	r := schema.NewRegistry()
	if _, err := r.Register(ok()); err != nil {
		t.Fatalf("a valid declaration: %v", err)
	}
	if _, err := r.Register(ok()); err == nil || !strings.Contains(err.Error(), "already registered") {
		t.Errorf("duplicate: %v", err)
	}
	child := ok()
	child.Name, child.Parent, child.ListBy = "widget_parts", "widgets", "made_on"
	if _, err := r.Register(child); err != nil {
		t.Errorf("a child of a registered parent: %v", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("MustRegister of a duplicate did not panic")
			}
		}()
		r.MustRegister(ok())
	}()
}

// TestRegisterCopies: changing the declared value after registration does
// not change the registered table.
func TestRegisterCopies(t *testing.T) {
	t.Parallel()
	r := schema.NewRegistry()
	cols := []schema.Column{{Name: "name", Type: schema.Text, Doc: "Name."}}
	tb := r.MustRegister(schema.Table{Name: "widgets", Doc: "W.", Columns: cols, Deletions: schema.Reported})
	cols[0].Name = "changed"
	if tb.Columns[0].Name != "name" || tb.Index("name") != 0 {
		t.Fatalf("registered table changed with its declaration: %+v", tb.Columns)
	}
}

func TestRowAndAccessors(t *testing.T) {
	t.Parallel()
	te := schema.TimeEntries
	day := clients.Date{Year: 2026, Month: 3, Day: 1}
	rec := clients.Record{ID: "1", Row: te.Row(schema.Values{
		"spent_date": day, "hours": clients.Decimal("1.5"), "user_id": "7", "billable": true, "notes": "n",
	})}
	if len(rec.Row) != te.Width() || te.Width() != 19 {
		t.Fatalf("row of %d values, table of %d columns", len(rec.Row), te.Width())
	}
	if te.Date(rec, "spent_date") != day || te.Decimal(rec, "hours") != "1.5" || te.Text(rec, "user_id") != "7" ||
		!te.Bool(rec, "billable") || te.Bool(rec, "is_locked") {
		t.Errorf("accessors read %v", rec.Row)
	}
	// NOT NULL columns left out hold their Go zero value, nullable ones nil.
	if v := te.Get(rec, "project_id"); v != "" {
		t.Errorf("project_id = %#v, want \"\"", v)
	}
	if !te.IsNull(rec, "task_id") || te.TextPtr(rec, "task_id") != nil {
		t.Errorf("task_id = %#v, want nil", te.Get(rec, "task_id"))
	}
	if p := te.TextPtr(rec, "notes"); p == nil || *p != "n" {
		t.Errorf("notes = %v", p)
	}
	if got := schema.At[clients.Date](&rec, te.Index("spent_date")); got != day {
		t.Errorf("At = %v", got)
	}
	var tomb clients.Record
	if schema.At[clients.Date](&tomb, te.Index("spent_date")) != (clients.Date{}) || !te.IsNull(tomb, "user_id") {
		t.Error("a record without a row reads as zero values")
	}
	for _, bad := range []schema.Values{{"nope": 1}, {"hours": 1.5}, {"spent_date": "2026-03-01"}, {"billable": "true"}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Row(%v) did not panic", bad)
				}
			}()
			te.Row(bad)
		}()
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Index of an unknown column did not panic")
			}
		}()
		te.Index("nope")
	}()
}
