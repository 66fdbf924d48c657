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
		cols := make([]string, len(t.Columns))
		for i, c := range t.Columns {
			null := ""
			if c.Nullable {
				null = " null"
			}
			cols[i] = fmt.Sprintf("`%s` %s%s", c.Name, c.Type, null)
		}
		listing := "incremental passes by version; backfill and reconcile list it whole"
		if t.ListedByDate() {
			listing = fmt.Sprintf("incremental passes by version; backfill and reconcile by `%s` range", t.ListBy)
		}
		if t.Parent != "" {
			listing += fmt.Sprintf(", per `%s` row", t.Parent)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", t.Name, strings.Join(cols, ", "), listing, t.Deletions)
	}
	return b.String()
}

// Markdown renders the default registry's schema table.
func Markdown() string { return Default.Markdown() }
