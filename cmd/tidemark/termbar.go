package main

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/tidemarkhq/tidemark/poller"
)

// backfillBar draws one backfill's progress on a terminal through a
// termGate: one line, sized to the terminal at each draw (so a resize
// never wraps it), cut on rune boundaries, and closed with a newline
// before anything else is printed under it. A nil *backfillBar draws
// nothing.
type backfillBar struct {
	gate  *termGate
	label string // "acme/time_entries"
	last  poller.BackfillProgress
	drawn bool
}

func newBackfillBar(gate *termGate, label string) *backfillBar {
	if gate == nil {
		return nil
	}
	return &backfillBar{gate: gate, label: label}
}

// progress draws pr.
func (b *backfillBar) progress(pr poller.BackfillProgress) {
	if b == nil {
		return
	}
	b.last, b.drawn = pr, true
	b.gate.Bar().Write([]byte("\r" + renderBar(b.label, pr, b.gate.width()) + "\x1b[K"))
}

// close ends the bar's line: what is printed next starts on a line of
// its own.
func (b *backfillBar) close() {
	if b == nil {
		return
	}
	b.gate.Done()
	b.drawn = false
}

// width is the terminal's width now (80 when it cannot be told).
func (t *termGate) width() int {
	if w, _, err := term.GetSize(int(t.fd)); err == nil && w > 0 {
		return w
	}
	return 80
}

// termWidth is the width of the terminal behind w, 0 when w is none (a
// pipe or a file: lines are then left whole, for scripts).
func termWidth(w any) int {
	f, ok := w.(interface{ Fd() uintptr })
	if !ok || !isTerminal(w) {
		return 0
	}
	if n, _, err := term.GetSize(int(f.Fd())); err == nil && n > 0 {
		return n
	}
	return 80
}

// nbsp joins words that fitLines keeps on one line ("1070 fetched").
const nbsp = "\u00a0"

// fitLines lays out a message made of groups for a terminal width columns
// wide: one line when it fits (always when width is 0), else each group
// starts a line, wrapped at spaces, every line after the first indented by
// two; like the bar, no line fills the last column.
func fitLines(width int, groups ...string) string {
	one := strings.Join(groups, " ")
	if width <= 0 || utf8.RuneCountInString(one) < width {
		return strings.ReplaceAll(one, nbsp, " ")
	}
	var lines []string
	for _, g := range groups {
		line := ""
		for _, word := range strings.Split(g, " ") {
			indent := 2
			if len(lines) == 0 {
				indent = 0
			}
			switch {
			case line == "":
				line = word
			case indent+utf8.RuneCountInString(line+" "+word) < width:
				line += " " + word
			default:
				lines = append(lines, line)
				line = word
			}
		}
		lines = append(lines, line)
	}
	return strings.ReplaceAll(strings.Join(lines, "\n  "), nbsp, " ")
}

// renderBar is the bar's line for a terminal width columns wide, one column
// short of it (a full last column makes some terminals wrap): the label, a
// gauge that shrinks to fit, the window count, the records and their rate,
// the time spent and left. What does not fit is dropped from the end.
func renderBar(label string, pr poller.BackfillProgress, width int) string {
	width = max(width-1, 10)
	pct := 0
	if pr.WindowsTotal > 0 {
		pct = 100 * pr.WindowsDone / pr.WindowsTotal
	}
	el := pr.Elapsed.Round(time.Second)
	rate := float64(pr.Records) / max(pr.Elapsed.Seconds(), 0.001)
	tail := fmt.Sprintf(" %d/%d windows, %d records, %.0f/s, %s", pr.WindowsDone, pr.WindowsTotal, pr.Records, rate, el)
	if pr.WindowsDone > 0 && pr.WindowsDone < pr.WindowsTotal {
		left := time.Duration(float64(pr.Elapsed) * float64(pr.WindowsTotal-pr.WindowsDone) / float64(pr.WindowsDone))
		tail += fmt.Sprintf(", ~%s left", left.Round(time.Second))
	}
	head := fmt.Sprintf("%s %3d%% ", label, pct)
	gauge := width - utf8.RuneCountInString(head) - utf8.RuneCountInString(tail) - 2
	gauge = min(gauge, 40)
	line := head
	if gauge >= 5 {
		full := gauge * pct / 100
		line += "|" + strings.Repeat("█", full) + strings.Repeat(" ", gauge-full) + "|"
	}
	return cutRunes(line+tail, width)
}

// cutRunes cuts s to at most n runes, never inside one.
func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n])
}
