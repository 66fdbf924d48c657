package schema

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/tidemarkhq/tidemark/clients"
)

// Registry holds table declarations, in registration order. Its methods are
// safe for concurrent use. The package's own declarations live in the
// default registry, which the package-level functions use.
type Registry struct {
	mu     sync.RWMutex
	tables []*Table
	byName map[clients.Resource]*Table
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{byName: map[clients.Resource]*Table{}} }

var identRE = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// reserved are the names of the common columns (and the upsert's staging
// flag): a typed column may not take them.
var reserved = func() map[string]bool {
	m := map[string]bool{"is_new": true}
	for _, c := range Common {
		m[c.Name] = true
	}
	return m
}()

// Register validates t and adds it. It refuses a duplicate or invalid name,
// an unknown column type, a duplicate or reserved column, a missing doc, an
// attribute that does not fit its column, and a parent not registered yet.
// The registry keeps its own copy; the returned *Table is the registered
// declaration, with its column index built.
func (r *Registry) Register(t Table) (*Table, error) {
	if err := validate(&t); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byName == nil {
		r.byName = map[clients.Resource]*Table{}
	}
	if _, dup := r.byName[t.Name]; dup {
		return nil, fmt.Errorf("schema: table %s is already registered", t.Name)
	}
	if t.Parent != "" {
		if t.Parent == t.Name {
			return nil, fmt.Errorf("schema: table %s: parent is itself", t.Name)
		}
		if _, ok := r.byName[t.Parent]; !ok {
			return nil, fmt.Errorf("schema: table %s: parent %s is not registered (register it first)", t.Name, t.Parent)
		}
	}
	for _, c := range t.Children {
		if _, dup := r.byName[c.Name]; dup {
			return nil, fmt.Errorf("schema: table %s: child %s is already registered", t.Name, c.Name)
		}
	}
	t.Columns = append([]Column(nil), t.Columns...)
	t.index = indexOf(t.Columns)
	kids := make([]*Child, len(t.Children))
	for i, c := range t.Children {
		cc := *c
		cc.Columns = append([]Column(nil), c.Columns...)
		cc.index = indexOf(cc.Columns)
		kids[i] = &cc
	}
	t.Children = kids
	p := &t
	r.tables = append(r.tables, p)
	r.byName[t.Name] = p
	return p, nil
}

// MustRegister is Register that panics on an invalid declaration: for
// package-level declarations, checked at start-up.
func (r *Registry) MustRegister(t Table) *Table {
	p, err := r.Register(t)
	if err != nil {
		panic(err)
	}
	return p
}

func indexOf(cols []Column) map[string]int {
	m := make(map[string]int, len(cols))
	for i, c := range cols {
		m[c.Name] = i
	}
	return m
}

func validate(t *Table) error {
	if !identRE.MatchString(string(t.Name)) {
		return fmt.Errorf("schema: table name %q: want ^[a-z_][a-z0-9_]*$", t.Name)
	}
	where := "schema: table " + string(t.Name)
	if strings.TrimSpace(t.Doc) == "" {
		return errors.New(where + ": no doc (it is the table's COMMENT)")
	}
	if err := validateColumns(where, t.Columns); err != nil {
		return err
	}
	for i, c := range t.Children {
		at := fmt.Sprintf("%s: child %d (%q)", where, i, c.Name)
		switch {
		case !identRE.MatchString(string(c.Name)) || c.Name == t.Name:
			return errors.New(at + ": want a table name of its own matching ^[a-z_][a-z0-9_]*$")
		case strings.TrimSpace(c.Doc) == "":
			return errors.New(at + ": no doc (it is the table's COMMENT)")
		case c.Path == "" || !identRE.MatchString(c.ParentColumn):
			return errors.New(at + ": want the array's Path and a ParentColumn")
		}
		for _, cc := range c.Columns {
			if cc.Name == c.ParentColumn || cc.Name == "parent_hash" {
				return fmt.Errorf("%s: column %q is a common column of a child table", at, cc.Name)
			}
			if !cc.Nullable && (cc.Type == Date || cc.Type == Timestamptz) {
				return fmt.Errorf("%s: column %q: a child's date and timestamptz columns must be nullable", at, cc.Name)
			}
		}
		if err := validateColumns(at, c.Columns); err != nil {
			return err
		}
	}
	col := func(name string) (Column, bool) {
		for _, c := range t.Columns {
			if c.Name == name {
				return c, true
			}
		}
		return Column{}, false
	}
	if t.ParentColumn != "" {
		if c, ok := col(t.ParentColumn); !ok || c.Type != Text || c.Nullable || t.Parent == "" {
			return fmt.Errorf("%s: ParentColumn %q: want a declared NOT NULL text column and a Parent", where, t.ParentColumn)
		}
	}
	if t.ListBy != "" {
		if c, ok := col(t.ListBy); !ok || c.Type != Date || c.Nullable {
			return fmt.Errorf("%s: ListBy %q: want a declared NOT NULL date column", where, t.ListBy)
		}
	}
	if t.UserColumn != "" {
		if c, ok := col(t.UserColumn); !ok || c.Type != Text {
			return fmt.Errorf("%s: UserColumn %q: want a declared text column", where, t.UserColumn)
		}
	}
	if t.Deletions == 0 || t.Deletions&^(Reported|Reconciled) != 0 {
		return fmt.Errorf("%s: Deletions: want Reported, Reconciled or both", where)
	}
	return nil
}

// validateColumns checks one table's typed columns.
func validateColumns(where string, cols []Column) error {
	if len(cols) == 0 {
		return errors.New(where + ": no typed columns")
	}
	seen := map[string]bool{}
	for i, c := range cols {
		at := fmt.Sprintf("%s: column %d (%q)", where, i, c.Name)
		switch {
		case !identRE.MatchString(c.Name):
			return errors.New(at + ": want a name matching ^[a-z_][a-z0-9_]*$")
		case reserved[c.Name]:
			return errors.New(at + ": a common column of every table, not declared per table")
		case seen[c.Name]:
			return errors.New(at + ": declared twice")
		case c.Type.GoType() == "":
			return fmt.Errorf("%s: unknown type %q (want one of text, date, numeric, boolean, bigint, timestamptz, jsonb)", at, c.Type)
		case strings.TrimSpace(c.Doc) == "":
			return errors.New(at + ": no doc (it is the column's COMMENT)")
		case c.EmptyIsNull && (c.Type != Text || !c.Nullable):
			return errors.New(at + ": EmptyIsNull applies to a nullable text column only")
		case c.Tombstone == VersionDay && (c.Type != Date && c.Type != Timestamptz || c.Nullable):
			return errors.New(at + ": Tombstone VersionDay applies to a NOT NULL date or timestamptz column only")
		case c.Tombstone > VersionDay:
			return fmt.Errorf("%s: unknown Tombstone fill %d", at, c.Tombstone)
		case !c.Nullable && (c.Type == Date || c.Type == Timestamptz) && c.Tombstone != VersionDay:
			return errors.New(at + ": a NOT NULL " + string(c.Type) + " column has no neutral value for a tombstone; declare Tombstone: VersionDay")
		}
		seen[c.Name] = true
	}
	return nil
}

// Lookup returns the table of a resource.
func (r *Registry) Lookup(name clients.Resource) (*Table, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.byName[name]
	return t, ok
}

// All returns every table in registration order, which is pass order:
// reference data first (clients, users, projects, tasks), so that a reader
// never sees an entry pointing at an id it cannot join, then time_entries.
func (r *Registry) All() []*Table {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]*Table(nil), r.tables...)
}

// Resources returns every table's name, in pass order.
func (r *Registry) Resources() []clients.Resource {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]clients.Resource, len(r.tables))
	for i, t := range r.tables {
		out[i] = t.Name
	}
	return out
}

// UnknownError is returned by Parse for a name that is not a registered
// resource.
type UnknownError struct {
	Name  string
	Valid []clients.Resource
}

func (e *UnknownError) Error() string {
	names := make([]string, len(e.Valid))
	for i, r := range e.Valid {
		names[i] = string(r)
	}
	return fmt.Sprintf("unknown resource %q (want one of %s)", e.Name, strings.Join(names, ", "))
}

// Parse returns the table named by s, a name given by a user (a flag, a
// config entry). An unknown name is an *UnknownError that lists the valid
// names.
func (r *Registry) Parse(s string) (*Table, error) {
	if t, ok := r.Lookup(clients.Resource(s)); ok {
		return t, nil
	}
	return nil, &UnknownError{Name: s, Valid: r.Resources()}
}

// Check refuses the first resource of rs that is not registered.
func (r *Registry) Check(rs []clients.Resource) error {
	for _, name := range rs {
		if _, err := r.Parse(string(name)); err != nil {
			return err
		}
	}
	return nil
}

// Default is the registry of the package's declarations.
var Default = NewRegistry()

// Register adds t to the default registry (see Registry.Register).
func Register(t Table) (*Table, error) { return Default.Register(t) }

// MustRegister adds t to the default registry and panics on an invalid
// declaration.
func MustRegister(t Table) *Table { return Default.MustRegister(t) }

// Lookup returns the table of a resource from the default registry.
func Lookup(name clients.Resource) (*Table, bool) { return Default.Lookup(name) }

// All returns the default registry's tables in pass order.
func All() []*Table { return Default.All() }

// Resources returns the default registry's resource names in pass order.
func Resources() []clients.Resource { return Default.Resources() }

// Parse returns the table named by a user-given string, from the default
// registry.
func Parse(s string) (*Table, error) { return Default.Parse(s) }

// Check refuses the first resource of rs the default registry does not
// know.
func Check(rs []clients.Resource) error { return Default.Check(rs) }
