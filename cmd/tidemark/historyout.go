package main

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tidemarkhq/tidemark/history"
	"github.com/tidemarkhq/tidemark/schema"
)

// width is what the human output of `history` fits in.
const width = 80

// clip cuts s to n runes, marking the cut with "…"; newlines become spaces.
func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:max(n-1, 0)]) + "…"
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func openStamp(t *time.Time) string {
	if t == nil {
		return "open"
	}
	return stamp(*t)
}

// nameWidth is the width of the column-name cell of t's lines.
func nameWidth(t *schema.Table) int {
	n := 0
	for _, c := range t.Columns {
		n = max(n, len(c.Name))
	}
	return min(n, 20)
}

// writeVersions prints one block per version: its header, its times, then
// every column not null (the first) or those that changed (the others).
func writeVersions(w io.Writer, source string, t *schema.Table, id string, vs []history.Version) error {
	fmt.Fprintf(w, "%s %s of %s: %d versions\n", t.Name, clip(id, 30), source, len(vs))
	nw := nameWidth(t)
	for i, v := range vs {
		run := "-"
		if v.RunID != nil {
			run = *v.RunID
		}
		fmt.Fprintf(w, "\nseq %d  %s  run %s\n", v.Seq, v.Change, clip(run, 40))
		fmt.Fprintf(w, "  valid     %s → %s\n", stamp(v.ValidFrom), openStamp(v.ValidTo))
		fmt.Fprintf(w, "  recorded  %s\n", stamp(v.RecordedFrom))
		if i == 0 {
			for _, c := range t.Columns {
				if x := history.Text(v.Values[c.Name]); x != "null" {
					writeValue(w, nw, c.Name, x)
				}
			}
			continue
		}
		writeChanges(w, t, nw, v.Changed, v.RawChanged)
	}
	return nil
}

// writeChanges prints the changed columns, in declared order, old → new.
func writeChanges(w io.Writer, t *schema.Table, nw int, ch map[string]history.Change, raw bool) {
	side := (width - 4 - nw - 3) / 2
	for _, c := range t.Columns {
		if x, ok := ch[c.Name]; ok {
			writeValue(w, nw, c.Name, clip(history.Text(x.From), side)+" → "+clip(history.Text(x.To), side))
		}
	}
	if raw {
		fmt.Fprintf(w, "    %-*s  %s\n", nw, "raw", "changed (lines or untyped fields)")
	} else if len(ch) == 0 {
		fmt.Fprintf(w, "    (no typed column changed)\n")
	}
}

func writeValue(w io.Writer, nw int, name, value string) {
	fmt.Fprintf(w, "    %-*s  %s\n", nw, clip(name, nw), clip(value, width-6-nw))
}

// summary is a record on one line: id and its non-null columns, clipped.
func summary(t *schema.Table, mark string, e history.Entry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %s %s ", mark, e.ID)
	for _, c := range t.Columns {
		if v := history.Text(e.Values[c.Name]); v != "null" {
			fmt.Fprintf(&b, " %s=%s", c.Name, v)
		}
	}
	return clip(b.String(), width)
}

// writeDiff prints the totals, then the records created, changed (with
// their columns old → new) and deleted.
func writeDiff(w io.Writer, t *schema.Table, d *history.Diff) error {
	fmt.Fprintf(w, "%s of %s, %s time\n", d.Resource, d.Source, d.Time)
	fmt.Fprintf(w, "from %s to %s\n", d.From.Format(time.RFC3339Nano), d.To.Format(time.RFC3339Nano))
	tot := d.Totals
	fmt.Fprintf(w, "created %d, changed %d, deleted %d\n", tot.Created, tot.Changed, tot.Deleted)
	if tot.HoursFrom != nil {
		delta := tot.HoursDelta.String()
		if !strings.HasPrefix(delta, "-") {
			delta = "+" + delta
		}
		fmt.Fprintf(w, "hours %s → %s (%s)\n", tot.HoursFrom, tot.HoursTo, delta)
	}
	nw := nameWidth(t)
	for _, s := range []struct {
		name, mark string
		es         []history.Entry
	}{{"created", "+", d.Created}, {"changed", "~", d.Changed}, {"deleted", "-", d.Deleted}} {
		if len(s.es) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s\n", s.name)
		for _, e := range s.es {
			if s.mark != "~" {
				fmt.Fprintln(w, summary(t, s.mark, e))
				continue
			}
			fmt.Fprintf(w, "  ~ %s\n", clip(e.ID, width-4))
			writeChanges(w, t, nw, e.Changed, e.RawChanged)
		}
	}
	return nil
}
