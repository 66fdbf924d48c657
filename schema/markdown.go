package schema

import (
	"fmt"
	"strings"
)

// Markdown renders the tables of r as the README's schema table: one line
// per table with its typed columns, how it is kept current and how
// deletions are found.
func (r *Registry) Markdown() string {
	var b strings.Builder
	b.WriteString("| table | typed columns | kept current by | deletions |\n")
	b.WriteString("|---|---|---|---|\n")
	for _, t := range r.All() {
		listing := "incremental passes by version; backfill and reconcile list it whole"
		switch {
		case t.ListedByDate():
			listing = fmt.Sprintf("incremental passes by version; backfill and reconcile by `%s` range", t.ListBy)
		case t.Singleton:
			listing = "one record, read whole every pass (no version: the page's `Date`); the content hash drops an unchanged one"
		case t.NoSince:
			listing = "listed whole every pass (no change filter); the content hash drops what did not change"
		case t.Parent != "":
			listing = fmt.Sprintf("listed per `%s` row: each pass, under the `%s` changed since the cursor; backfill and reconcile under every one", t.Parent, t.Parent)
		}
		deletions := t.Deletions.String()
		if t.Singleton {
			deletions = "none (the account itself)"
		} else if t.Parent != "" {
			deletions += fmt.Sprintf(" under every `%s` row; they vanish with their parent", t.Parent)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", t.Name, columnList(t.Columns), listing, deletions)
		for _, c := range t.Children {
			fmt.Fprintf(&b, "| `%s` | `%s` text, %s | lines of `%s.%s`, keyed by (`%s`, `id`); replaced as a whole in the write of their `%s` row whenever its content changes | with their `%s` row's content: a line it no longer has is deleted |\n",
				c.Name, c.ParentColumn, columnList(c.Columns), t.Name, c.Path, c.ParentColumn, t.Name, t.Name)
		}
	}
	return b.String()
}

func columnList(cs []Column) string {
	cols := make([]string, len(cs))
	for i, c := range cs {
		null := ""
		if c.Nullable {
			null = " null"
		}
		cols[i] = fmt.Sprintf("`%s` %s%s", c.Name, c.Type, null)
	}
	return strings.Join(cols, ", ")
}

// Markdown renders the default registry's schema table.
func Markdown() string { return Default.Markdown() }
