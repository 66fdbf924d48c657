package migrations

import (
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"sync"
)

var createTable = regexp.MustCompile(`(?i)\bCREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([a-z_][a-z0-9_]*)`)

var tables = sync.OnceValue(func() []string {
	out := []string{VersionTable}
	files, _ := fs.Glob(Files, "*.sql")
	for _, f := range files {
		b, _ := fs.ReadFile(Files, f)
		for _, m := range createTable.FindAllStringSubmatch(string(b), -1) {
			out = append(out, strings.ToLower(m[1]))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
})

// Tables names every table Tidemark's migrations create, and goose's
// version table, sorted: what a database may hold that is Tidemark's own.
func Tables() []string { return slices.Clone(tables()) }

// Owns reports whether table belongs to Tidemark's schema: one of Tables,
// or River's (river_*, whose schema River's migrator owns, upRiver).
func Owns(table string) bool {
	_, ok := slices.BinarySearch(tables(), table)
	return ok || strings.HasPrefix(table, "river_")
}
