package main

import (
	"context"
	"strings"
	"testing"
)

// Bad usage exits 2 and says what is wrong (issue 26, 7).
func TestBadUsageExits2(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"backfill", "--source", "acme", "--to", "2026-01-31"}, "--from is required"},
		{[]string{"backfill", "--source", "acme", "--from", "2026-01-01"}, "--to is required"},
		{[]string{"backfill", "--source", "acme", "--from", "2026-01-01", "--to", "2026-01-31", "--resource", "nope"}, "--resource"},
	} {
		var out, errs strings.Builder
		if code := run(context.Background(), tc.args, &out, &errs); code != exitUsage || !strings.Contains(errs.String(), tc.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 saying %q", tc.args, code, errs.String(), tc.want)
		}
	}
}
