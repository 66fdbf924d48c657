package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"
	"golang.org/x/term"
)

// The demo on a terminal: one screen that fits the terminal (80x24 and
// up), sized at each draw and redrawn on resize, with one line per
// resource that needs a look, the resources in sync folded into a count
// when they do not all fit, and at the bottom the warnings and errors
// logged meanwhile, each kept until it is resolved.

// demoIssue is a warning or error the daemon logged.
type demoIssue struct {
	At               time.Time
	Level            string // "WRN", "ERR"
	Source, Resource string
	Text             string
}

// String is the issue's line: its time, level, where and what.
func (is demoIssue) String() string {
	where := ""
	if is.Source != "" {
		where = strings.TrimSuffix(is.Source+"/"+is.Resource, "/") + ": "
	}
	return fmt.Sprintf("%s %s %s%s", is.At.Local().Format(time.TimeOnly), is.Level, where, is.Text)
}

// demoLog takes the daemon's JSON log lines in place of the terminal and
// keeps the warnings and errors for the screen.
type demoLog struct {
	mu     sync.Mutex
	issues []demoIssue
}

const demoLogKeep = 50

func (l *demoLog) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimSpace(p), []byte("\n")) {
		var e struct {
			Level, Message, Source, Resource, Error string
			Time                                    time.Time
		}
		is := demoIssue{At: time.Now(), Level: "WRN", Text: string(line)}
		if json.Unmarshal(line, &e) == nil {
			switch e.Level {
			case "warn":
				is.Level = "WRN"
			case "error", "fatal", "panic":
				is.Level = "ERR"
			default:
				continue
			}
			is.Source, is.Resource, is.Text = e.Source, e.Resource, e.Message
			if e.Error != "" {
				is.Text += ": " + e.Error
			}
			if !e.Time.IsZero() {
				is.At = e.Time
			}
		}
		l.mu.Lock()
		l.issues = append(l.issues, is)
		if len(l.issues) > demoLogKeep {
			l.issues = l.issues[len(l.issues)-demoLogKeep:]
		}
		l.mu.Unlock()
	}
	return len(p), nil
}

// open drops the issues that rows show resolved and returns the others:
// one of a resource is resolved by a complete pass of it after the issue
// (the log's times are to the second: strictly after its second), one of
// a source by a complete pass of each of its resources. Others stay.
func (l *demoLog) open(rows []cursorJSON) []demoIssue {
	l.mu.Lock()
	defer l.mu.Unlock()
	okAfter := func(source, resource string, at time.Time) bool {
		n := 0
		for _, r := range rows {
			if r.Source != source || (resource != "" && r.Resource != resource) {
				continue
			}
			if r.LastOKAt == nil || !r.LastOKAt.After(at.Truncate(time.Second).Add(time.Second)) {
				return false
			}
			n++
		}
		return n > 0
	}
	kept := l.issues[:0]
	for _, is := range l.issues {
		if is.Source != "" && okAfter(is.Source, is.Resource, is.At) {
			continue
		}
		kept = append(kept, is)
	}
	l.issues = kept
	return append([]demoIssue(nil), kept...)
}

// demoLogger is the demo's logger: on a terminal, JSON into a demoLog that
// the screen shows (log lines between frames would be wiped by the next);
// elsewhere the usual one (dl nil).
func demoLogger(g *globals) (zerolog.Logger, *demoLog, error) {
	if !isTerminal(g.stdout) {
		log, err := g.logger()
		return log, nil, err
	}
	lvl, err := zerolog.ParseLevel(strings.ToLower(g.logLevel))
	if err != nil || g.logLevel == "" {
		return zerolog.Nop(), nil, usagef("--log-level %q: want debug, info, warn or error", g.logLevel)
	}
	dl := &demoLog{}
	return zerolog.New(dl).Level(lvl).With().Timestamp().Logger(), dl, nil
}

// demoScreen draws the demo's frames on a terminal.
type demoScreen struct {
	mu        sync.Mutex
	g         *globals
	a         *app
	log       *demoLog
	statusURL string
}

// draw draws one frame, sized to the terminal now.
func (s *demoScreen) draw(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	rows, err := cursorRows(ctx, s.a, "", now)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Write([]byte(fmt.Sprintf(`{"level":"error","message":"status","error":%q}`, err.Error())))
		}
		return
	}
	var issues []demoIssue
	if s.log != nil {
		issues = s.log.open(rows)
	}
	cols, height := screenSize(s.g.stdout)
	fmt.Fprint(s.g.stdout, drawFrame(demoFrame(now, rows, demoChecks(ctx, s.a, rows), issues, s.statusURL, demoHistory(ctx, s.a), cols, height)))
}

// close leaves the screen: the cursor under the frame, and the issues
// still open printed on stderr, where they outlive the screen.
func (s *demoScreen) close(w io.Writer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprint(s.g.stdout, "\r\n")
	if s.log == nil {
		return
	}
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	for _, is := range s.log.issues {
		fmt.Fprintln(w, is.String())
	}
}

// screenSize is the terminal's size (80x24 when it cannot be told).
func screenSize(w any) (cols, rows int) {
	if f, ok := w.(interface{ Fd() uintptr }); ok {
		if c, r, err := term.GetSize(int(f.Fd())); err == nil && c > 0 && r > 0 {
			return c, r
		}
	}
	return 80, 24
}

// onResize calls fn on every SIGWINCH until ctx ends.
func onResize(ctx context.Context, fn func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGWINCH)
	defer signal.Stop(ch)
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
			fn()
		}
	}
}

// demoFrame lays out one screen of cols x rows: at most rows lines, none
// wider than cols-1 columns (a full last column wraps on some terminals).
func demoFrame(now time.Time, rows []cursorJSON, checks []demoCheck, issues []demoIssue, statusURL, history string, cols, height int) []string {
	w := max(cols-1, 20)
	var out []string
	add := func(s string) { out = append(out, fitCols(s, w)) }
	title := fmt.Sprintf("tidemark demo %s · Ctrl-C to stop", now.Format(time.TimeOnly))
	if statusURL != "" {
		title += " · " + statusURL
	}
	add(title)
	if history != "" {
		add(history)
	}

	check := map[string]demoCheck{}
	for _, c := range checks {
		check[c.Key] = c
	}
	type line struct {
		text  string
		quiet bool // in sync or caught up, nothing to look at: may be folded
		red   bool
	}
	wide := w >= 110
	header := fmt.Sprintf("%-24s %-8s %-11s %-7s %s", "RESOURCE", "BEHIND", "NEWEST", "ROWS", "CHECK")
	if wide {
		header = fmt.Sprintf("%-28s %-8s %-11s %-7s %-22s %-24s %s", "RESOURCE", "BEHIND", "NEWEST", "ROWS", "LAST PASS", "FETCHED/INS/UPD/TOMB", "CHECK")
	}
	var lines []line
	inSync := 0
	oneSource := true
	for _, r := range rows {
		oneSource = oneSource && r.Source == rows[0].Source
	}
	for _, r := range rows {
		key := r.Source + "/" + r.Resource
		c := check[key]
		behind, newest := lagCells(r)
		state, quiet := c.Short, c.Agrees && !r.Late && r.BackoffUntil == nil && r.LastRunStatus != "failed"
		if r.BackoffUntil != nil {
			state = fmt.Sprintf("backing off (%d failures); %s", r.Failures, state)
		} else if r.LastRunStatus == "failed" {
			state = "last pass failed; " + state
		}
		name := r.Resource
		if !oneSource {
			name = key
		}
		text := fmt.Sprintf("%-24s %-8s %-11s %-7d %s", name, behind, newest, c.Live, state)
		if wide {
			last := "-"
			if r.LastRunKind != "" {
				last = r.LastRunKind + " " + r.LastRunStatus
			}
			cn := r.LastRunCounts
			text = fmt.Sprintf("%-28s %-8s %-11s %-7d %-22s %-24s %s", name, behind, newest, c.Live, last,
				fmt.Sprintf("%d/%d/%d/%d", cn.Fetched, cn.Inserted, cn.Updated, cn.Tombstoned), state)
		}
		if quiet {
			inSync++
		}
		lines = append(lines, line{text: text, quiet: quiet, red: c.Diverged})
	}

	// The bottom: the open issues, newest last, up to a third of the
	// screen (at least 3 lines when there are some).
	var bottom []string
	if len(issues) > 0 {
		n := min(len(issues), max(2, height/3-1))
		bottom = append(bottom, fitCols(fmt.Sprintf("── %d warning(s)/error(s), kept until resolved ──", len(issues)), w))
		for _, is := range issues[len(issues)-n:] {
			bottom = append(bottom, fitCols(is.String(), w))
		}
	}

	room := height - len(out) - 1 - len(bottom) // the header line
	add(header)
	if len(lines) <= room {
		for _, l := range lines {
			out = append(out, colorIf(fitCols(l.text, w), l.red))
		}
	} else {
		// Fold the quiet ones into one line; list the others as room allows.
		var loud []line
		for _, l := range lines {
			if !l.quiet {
				loud = append(loud, l)
			}
		}
		shown := min(len(loud), max(room-1, 0))
		for _, l := range loud[:shown] {
			out = append(out, colorIf(fitCols(l.text, w), l.red))
		}
		if room > 0 {
			more := ""
			if len(loud) > shown {
				more = fmt.Sprintf(", %d more need a look", len(loud)-shown)
			}
			add(fmt.Sprintf("… and %d more in sync or caught up (taller terminal: one line each)%s", inSync, more))
		}
	}
	out = append(out, bottom...)
	if len(out) > height {
		out = out[:height]
	}
	return out
}

func colorIf(s string, red bool) string {
	if red {
		return "\x1b[31m" + s + "\x1b[0m"
	}
	return s
}

// fitCols cuts s to n columns, never inside a rune.
func fitCols(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// drawFrame writes lines over the screen from its top: each line cleared
// to its end, the rest of the screen cleared, no newline after the last
// (a full screen never scrolls).
func drawFrame(lines []string) string {
	var b strings.Builder
	b.WriteString("\x1b[H")
	for i, l := range lines {
		if i > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString(l + "\x1b[K")
	}
	b.WriteString("\x1b[J")
	return b.String()
}
