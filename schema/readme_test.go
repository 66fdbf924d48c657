package schema_test

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/tidemarkhq/tidemark/schema"
)

var update = flag.Bool("update", false, "rewrite the README's schema table from the registry")

const (
	readme      = "../README.md"
	beginMarker = "<!-- schema table: generated from package schema; go test ./schema -update -->\n"
	endMarker   = "<!-- end of schema table -->\n"
)

// TestREADMESchemaTable: the README's schema table is the registry's. Run
// `go test ./schema -run README -update` after changing a declaration.
func TestREADMESchemaTable(t *testing.T) {
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, beginMarker)
	j := strings.Index(text, endMarker)
	if i < 0 || j < i {
		t.Fatalf("%s: no schema table between %q and %q", readme, strings.TrimSpace(beginMarker), strings.TrimSpace(endMarker))
	}
	have := text[i+len(beginMarker) : j]
	want := schema.Markdown()
	if have == want {
		return
	}
	if *update {
		text = text[:i+len(beginMarker)] + want + text[j:]
		if err := os.WriteFile(readme, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: the schema table is out of date with the registry; run go test ./schema -run README -update\nhave:\n%s\nwant:\n%s", readme, have, want)
}
