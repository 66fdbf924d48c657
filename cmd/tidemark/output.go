package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// writeJSON prints v as indented JSON (the --json of the listing commands).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table prints aligned columns, two spaces apart, under a header line.
type table struct{ tw *tabwriter.Writer }

// newTable starts a table; header names the columns, tab-separated.
func newTable(w io.Writer, header string) *table {
	t := &table{tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	fmt.Fprintln(t.tw, header)
	return t
}

// row adds a line: each cell as fmt.Print prints it.
func (t *table) row(cells ...any) {
	for i, c := range cells {
		if i > 0 {
			io.WriteString(t.tw, "\t")
		}
		fmt.Fprint(t.tw, c)
	}
	io.WriteString(t.tw, "\n")
}

// flush aligns and writes the lines added so far.
func (t *table) flush() error { return t.tw.Flush() }

// printTable prints rows as a table, one line each, its cells from cells.
func printTable[T any](w io.Writer, header string, rows []T, cells func(T) []any) error {
	t := newTable(w, header)
	for _, r := range rows {
		t.row(cells(r)...)
	}
	return t.flush()
}
