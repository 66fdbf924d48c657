package main

import (
	"bytes"
	"strings"
	"testing"
)

// A log line written while the bar is drawn clears the bar's line, starts
// at column 0, and the bar is drawn again below it: no "(4/25) [3s:11s]14:04:42
// INF …" any more.
func TestTermGateKeepsLogLinesOutOfTheBar(t *testing.T) {
	var out bytes.Buffer
	g := &termGate{out: &out}
	bar := g.Bar()
	bar.Write([]byte("\racme/time_entries  16% |███     | (4/25) [3s:11s]"))
	g.Write([]byte("14:04:42 INF backfill window applied\n"))
	bar.Write([]byte("\racme/time_entries  20% |████    | (5/25) [4s:10s]"))
	g.Done()
	g.Write([]byte("14:04:50 INF backfill done\n"))

	want := "\racme/time_entries  16% |███     | (4/25) [3s:11s]" +
		"\r\x1b[K14:04:42 INF backfill window applied\n" +
		"\racme/time_entries  16% |███     | (4/25) [3s:11s]" +
		"\racme/time_entries  20% |████    | (5/25) [4s:10s]" +
		"\n14:04:50 INF backfill done\n"
	if out.String() != want {
		t.Fatalf("terminal got\n%q\nwant\n%q", out.String(), want)
	}
	// Every log line starts at the beginning of a cleared line or a new one.
	for _, l := range []string{"14:04:42", "14:04:50"} {
		i := strings.Index(out.String(), l)
		if before := out.String()[:i]; !strings.HasSuffix(before, "\x1b[K") && !strings.HasSuffix(before, "\n") {
			t.Fatalf("log line %s written into the bar: %q", l, before[max(0, len(before)-20):])
		}
	}
}
