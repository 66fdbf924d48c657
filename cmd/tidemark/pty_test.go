package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/creack/pty"
	"github.com/jackc/pgx/v5"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/simulated"
)

// onPTY is a command running on a pseudo-terminal of a given size, its
// output collected.
type onPTY struct {
	t    *testing.T
	cmd  *exec.Cmd
	pt   *os.File // the terminal's master side
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

func startOnPTY(t *testing.T, c *exec.Cmd, cols, rows uint16) *onPTY {
	t.Helper()
	f, err := pty.StartWithSize(c, &pty.Winsize{Cols: cols, Rows: rows})
	if err != nil {
		t.Fatal(err)
	}
	p := &onPTY{t: t, cmd: c, pt: f, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			p.mu.Unlock()
			if err != nil { // EIO once the child has exited
				return
			}
		}
	}()
	t.Cleanup(func() {
		if c.ProcessState == nil {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
		f.Close()
	})
	return p
}

// wait waits for the command's end and the last of its output.
func (p *onPTY) wait(within time.Duration) (string, int) {
	p.t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- p.cmd.Wait() }()
	var err error
	select {
	case err = <-errc:
	case <-time.After(within):
		p.t.Fatalf("still running after %s:\n%s", within, p.output())
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
	return p.output(), exitCodeOf(err)
}

func (p *onPTY) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// resize resizes the terminal (the command gets SIGWINCH).
func (p *onPTY) resize(cols, rows uint16) {
	if err := pty.Setsize(p.pt, &pty.Winsize{Cols: cols, Rows: rows}); err != nil {
		p.t.Fatal(err)
	}
}

// waitFor waits until the output matches cond and returns its length then.
func (p *onPTY) waitFor(what string, within time.Duration, cond func(out string) bool) int {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for {
		out := p.output()
		if cond(out) {
			return len(out)
		}
		if time.Now().After(deadline) {
			tail := out[max(0, len(out)-3000):]
			p.t.Fatalf("no %s within %s; output ends:\n%q", what, within, tail)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var (
	ansiRE    = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)
	windowsRE = regexp.MustCompile(` (\d+)/(\d+) windows`)
	logLineRE = regexp.MustCompile(`^\S+ (DBG|INF|WRN|ERR) `) // zerolog's console format
)

// visible is s without ANSI sequences.
func visible(s string) string { return ansiRE.ReplaceAllString(s, "") }

// shownLines is what a terminal shows of out line by line: each line's
// text after its last carriage return, ANSI sequences removed.
func shownLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(strings.ReplaceAll(out, "\r\n", "\n"), "\n") {
		if i := strings.LastIndexByte(l, '\r'); i >= 0 {
			l = l[i+1:]
		}
		lines = append(lines, visible(l))
	}
	return lines
}

// On a terminal, backfill shows a bar in console format: no JSON, no line
// per window, every drawing fits the terminal and is whole UTF-8, and what
// is printed after the bar starts on a line of its own (also when the CLI
// follows a backfill that the daemon runs).
func TestBackfillOnATerminal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tr, cfg := e.acme(simulated.Params{Seed: 11}, source{})
	today := clients.DateOf(tr.Now().UTC())
	args := []string{"backfill", "--config", cfg, "--source", "acme",
		"--from", today.AddDays(-60).String(), "--to", today.String(), "--window-days", "3"}
	check := func(t *testing.T, out string, summaries ...string) {
		t.Helper()
		if !utf8.ValidString(out) {
			t.Errorf("output is not valid UTF-8 (a rune cut): %q", out)
		}
		if strings.Contains(out, `{"level"`) || strings.Contains(out, "window applied") {
			t.Errorf("JSON or per-window lines on a terminal:\n%s", out)
		}
		bars := 0
		for _, l := range strings.Split(strings.ReplaceAll(out, "\r\n", "\n"), "\n") {
			drawings := strings.Split(l, "\r")[1:] // drawings of the bar
			for _, d := range drawings {
				bars++
				if n := utf8.RuneCountInString(visible(d)); n >= 80 {
					t.Errorf("a drawing %d columns wide on an 80-column terminal: %q", n, d)
				}
			}
			// A bar left on screen is a finished backfill's: full, every
			// window counted (undated resources too: one window).
			if len(drawings) > 0 {
				last := visible(drawings[len(drawings)-1])
				m := windowsRE.FindStringSubmatch(last)
				if !strings.Contains(last, " 100% ") || m == nil || m[1] != m[2] {
					t.Errorf("a finished backfill's bar is left at %q", last)
				}
			}
		}
		// What the command prints itself (not log lines) fits 80 columns.
		for _, l := range shownLines(out) {
			if n := utf8.RuneCountInString(l); n >= 80 && !logLineRE.MatchString(l) {
				t.Errorf("a line %d columns wide on an 80-column terminal: %q", n, l)
			}
		}
		for _, s := range summaries {
			i := strings.Index(out, s)
			if i < 0 {
				t.Fatalf("no %q in\n%s", s, out)
			}
			if i > 0 && out[i-1] != '\n' {
				t.Errorf("%q written after the bar without ending its line: %q", s, out[max(0, i-80):i+len(s)])
			}
		}
		if bars == 0 {
			t.Errorf("no bar drawn:\n%s", out)
		}
		// The last thing shown is a summary (its second line, when it
		// wraps, indented under it), not a bar or a log line.
		lines := shownLines(strings.TrimRight(out, "\r\n"))
		last := len(lines) - 1
		for last > 0 && strings.HasPrefix(lines[last], "  ") {
			last--
		}
		if !strings.HasPrefix(lines[last], "backfill acme/") {
			t.Errorf("last lines shown: %q", lines[last:])
		}
	}

	t.Run("run here, every resource", func(t *testing.T) {
		c := e.command(context.Background(), append(args, "--resource", "all")...)
		p := startOnPTY(t, c, 80, 24)
		out, code := p.wait(2 * time.Minute)
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		// Parents before children: clients before projects before time_entries.
		ic, ip, it := strings.Index(out, "backfill acme/clients"), strings.Index(out, "backfill acme/projects"), strings.Index(out, "backfill acme/time_entries")
		if ic < 0 || ip < ic || it < ip {
			t.Errorf("resources not all backfilled in pass order (%d %d %d):\n%s", ic, ip, it, out)
		}
		check(t, out, "backfill acme/clients", "backfill acme/time_entries")
	})

	t.Run("followed in the daemon", func(t *testing.T) {
		d := e.daemon(cfg)
		d.waitLog(t, "this daemon now owns the source")
		// Info lines asked for: in console format, above the bar.
		c := e.command(context.Background(), append(args, "--log-level", "info")...)
		p := startOnPTY(t, c, 80, 24)
		out, code := p.wait(2 * time.Minute)
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		check(t, out, "backfill acme/time_entries")
		if !strings.Contains(out, "INF") {
			t.Errorf("no console log line:\n%s", out)
		}
		if !strings.Contains(out, "done by the daemon") {
			t.Errorf("not followed in the daemon:\n%s", out)
		}
	})
}

// demoFrames returns the frames complete in out[from:to]: each drawn from
// the top of the screen ("\x1b[H") to the clear of its rest ("\x1b[J").
func demoFrames(out string, from, to int) []string {
	var frames []string
	for {
		i := strings.Index(out[from:to], "\x1b[H")
		if i < 0 {
			return frames
		}
		start := from + i + len("\x1b[H")
		j := strings.Index(out[start:to], "\x1b[J")
		if j < 0 {
			return frames
		}
		frames = append(frames, out[start:start+j])
		from = start + j
	}
}

// frameFits fails t unless every frame has at most rows lines of fewer
// than cols columns.
func frameFits(t *testing.T, frames []string, cols, rows int) {
	t.Helper()
	if len(frames) == 0 {
		t.Fatalf("no frame at %dx%d", cols, rows)
	}
	for _, f := range frames {
		lines := strings.Split(strings.ReplaceAll(f, "\r", ""), "\n")
		if len(lines) > rows {
			t.Fatalf("a frame of %d lines on a %d-row terminal:\n%s", len(lines), rows, visible(f))
		}
		for _, l := range lines {
			if n := utf8.RuneCountInString(visible(l)); n >= cols {
				t.Fatalf("a line of %d columns on a %d-column terminal: %q", n, cols, visible(l))
			}
		}
	}
}

// The demo fits an 80x24 terminal and uses a larger one after a resize;
// a pass that fails shows at the bottom of every frame until the
// resource's next complete pass.
//
// Not parallel: the demo listens on the config's fixed address, which
// another demo test starting at the same moment would race for.
func TestDemoScreenFitsAndKeepsWarnings(t *testing.T) {
	tmp := clusterTmp(t)
	c := exec.Command(binary, "demo", "--every", "500ms")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "TMPDIR=") {
			c.Env = append(c.Env, kv)
		}
	}
	c.Env = append(c.Env, "TMPDIR="+tmp)
	p := startOnPTY(t, c, 80, 24)
	frameAfter := func(what string, from int, cond func(frame string) bool) int {
		t.Helper()
		return p.waitFor(what, 90*time.Second, func(out string) bool {
			for _, f := range demoFrames(out, from, len(out)) {
				if cond(visible(f)) {
					return true
				}
			}
			return false
		})
	}
	// The first pass done: every resource has a row count.
	synced := frameAfter("a frame after the first pass", 0, func(f string) bool {
		return (strings.Contains(f, "in sync") || strings.Contains(f, "caught up")) && !strings.Contains(f, "waiting for the first pass")
	})
	m := regexp.MustCompile(`PostgreSQL is at (\S+)`).FindStringSubmatch(visible(p.output()))
	if m == nil {
		t.Fatalf("no PostgreSQL URL in:\n%s", p.output())
	}
	frameFits(t, demoFrames(p.output(), 0, synced), 80, 24)

	// Break one resource: its passes fail until the table is back.
	ctx := context.Background()
	db, err := pgx.Connect(ctx, m[1])
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	if _, err := db.Exec(ctx, "ALTER TABLE clients RENAME TO clients_away"); err != nil {
		t.Fatal(err)
	}
	failed := frameAfter("the failed pass at the bottom", synced, func(f string) bool {
		return strings.Contains(f, "ERR demo/clients: pass failed")
	})
	// Taller and wider: the frames use the room, the error stays.
	resizedAt := len(p.output())
	p.resize(200, 50)
	wide := frameAfter("a 200-column frame", resizedAt, func(f string) bool {
		return strings.Contains(f, "FETCHED/INS/UPD/TOMB")
	})
	if _, err := db.Exec(ctx, "ALTER TABLE clients_away RENAME TO clients"); err != nil {
		t.Fatal(err)
	}
	resolved := frameAfter("the error resolved", wide, func(f string) bool {
		return !strings.Contains(f, "demo/clients: pass failed")
	})
	out := p.output()
	frameFits(t, demoFrames(out, 0, resizedAt), 80, 24)
	frameFits(t, demoFrames(out, resizedAt, len(out)), 200, 50)
	// Every frame from the failure to its resolution shows it (the last
	// one found is the first without it).
	between := demoFrames(out, failed, resolved)
	for _, f := range between[:len(between)-1] {
		if !strings.Contains(visible(f), "demo/clients: pass failed") {
			t.Fatalf("a frame before the resolution without the error:\n%s", visible(f))
		}
	}
	// Normal states are no warnings (issue 26, 5).
	for _, noise := range []string{"skipping", "webhook deliveries"} {
		if strings.Contains(out, noise) {
			t.Errorf("%q shown as a warning", noise)
		}
	}
	if err := c.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if _, code := p.wait(60 * time.Second); code != 0 {
		t.Fatalf("demo exited %d after Ctrl-C", code)
	}
}
