package main

import (
	"bytes"
	"io"
	"sync"
)

// termGate shares a terminal between a progress bar and log lines: a log
// line clears the bar's line, is written whole, and the bar is drawn again
// under it, so that no log line lands in the middle of the bar (the bar
// draws with a carriage return and no newline).
type termGate struct {
	mu  sync.Mutex
	out io.Writer
	fd  uintptr
	bar []byte // the bar's current drawing, from its last '\r'; nil: no bar
}

// gateStderr puts a termGate in front of g.stderr when it is a terminal and
// returns it; nil otherwise (no bar is drawn then).
func gateStderr(g *globals) *termGate {
	f, ok := g.stderr.(interface{ Fd() uintptr })
	if !ok || !isTerminal(g.stderr) {
		return nil
	}
	t := &termGate{out: g.stderr, fd: f.Fd()}
	g.stderr = t
	return t
}

// Fd lets the logger see the terminal behind the gate (console format).
func (t *termGate) Fd() uintptr { return t.fd }

// Write is the log side.
func (t *termGate) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.bar) > 0 {
		io.WriteString(t.out, "\r\x1b[K")
	}
	n, err := t.out.Write(p)
	if len(t.bar) > 0 {
		t.out.Write(t.bar)
	}
	return n, err
}

// Bar is the writer the progress bar draws through.
func (t *termGate) Bar() io.Writer { return barSide{t} }

type barSide struct{ t *termGate }

func (b barSide) Write(p []byte) (int, error) {
	t := b.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if i := bytes.LastIndexByte(p, '\r'); i >= 0 {
		t.bar = append(t.bar[:0], p[i:]...)
	} else {
		t.bar = append(t.bar, p...)
	}
	return t.out.Write(p)
}

// Done ends the bar's line: log lines go on below it.
func (t *termGate) Done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.bar) > 0 {
		io.WriteString(t.out, "\n")
	}
	t.bar = nil
}
