package main

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFitLines(t *testing.T) {
	head := "backfill acme/estimate_item_categories 2026-10-08..2026-12-07:"
	counts := "1234567" + nbsp + "fetched, 1234567" + nbsp + "inserted, 0" + nbsp + "updated, 0" + nbsp + "unchanged, 0" + nbsp + "stale in" + nbsp + "1m2s"
	for _, tc := range []struct {
		width int
		want  string
	}{
		{0, head + " " + strings.ReplaceAll(counts, nbsp, " ")}, // not a terminal: one line
		{200, head + " " + strings.ReplaceAll(counts, nbsp, " ")},
		{80, head + "\n  1234567 fetched, 1234567 inserted, 0 updated, 0 unchanged, 0 stale in 1m2s"},
		{60, "backfill acme/estimate_item_categories\n  2026-10-08..2026-12-07:\n  1234567 fetched, 1234567 inserted, 0 updated,\n  0 unchanged, 0 stale in 1m2s"},
	} {
		got := fitLines(tc.width, head, counts)
		if got != tc.want {
			t.Errorf("width %d:\n%s\nwant\n%s", tc.width, got, tc.want)
		}
		for _, l := range strings.Split(got, "\n") {
			if n := utf8.RuneCountInString(l); tc.width > 0 && n >= tc.width {
				t.Errorf("width %d: a line of %d columns: %q", tc.width, n, l)
			}
		}
	}
}
