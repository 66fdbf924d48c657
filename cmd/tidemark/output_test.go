package main

import (
	"bytes"
	"fmt"
	"testing"
	"text/tabwriter"
	"time"
)

// The table printer writes what the commands' hand-written tabwriter code
// wrote before it: the listings' output is a contract (e2e tests read it).
func TestPrintTableMatchesTabwriter(t *testing.T) {
	type row struct {
		name  string
		n     int64
		age   time.Duration
		state string
	}
	rows := []row{{"billing", 12, 90 * time.Second, "active"}, {"a-much-longer-name", 3, 0, "disabled: by hand"}, {"…", -1, time.Hour, ""}}
	var want bytes.Buffer
	tw := tabwriter.NewWriter(&want, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tN\tAGE\tSTATE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", r.name, r.n, r.age, r.state)
	}
	tw.Flush()

	var got bytes.Buffer
	if err := printTable(&got, "NAME\tN\tAGE\tSTATE", rows, func(r row) []any { return []any{r.name, r.n, r.age, r.state} }); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Errorf("printTable:\n%s\nwant:\n%s", got.String(), want.String())
	}

	// Rows added one at a time and flushed as they come (events tail
	// --follow) align within each flush.
	var inc bytes.Buffer
	tb := newTable(&inc, "NAME\tN\tAGE\tSTATE")
	for _, r := range rows {
		tb.row(r.name, r.n, r.age, r.state)
	}
	if err := tb.flush(); err != nil {
		t.Fatal(err)
	}
	if inc.String() != want.String() {
		t.Errorf("table rows:\n%s\nwant:\n%s", inc.String(), want.String())
	}
}
