package config

import (
	"strings"
	"testing"
	"time"
)

const runsGood = good + `runs:
  keep: 336h
  keep_idle: 12h
`

func TestRunsConfig(t *testing.T) {
	c := mustParse(t, runsGood)
	if c.Runs.Keep.D() != 336*time.Hour || c.Runs.KeepIdle.D() != 12*time.Hour {
		t.Fatalf("runs %s %s", c.Runs.Keep.D(), c.Runs.KeepIdle.D())
	}
	c = mustParse(t, good)
	if c.Runs.Keep.D() != DefaultRunsKeep || c.Runs.KeepIdle.D() != DefaultRunsKeepIdle {
		t.Fatalf("defaults: runs %s %s", c.Runs.Keep.D(), c.Runs.KeepIdle.D())
	}
	// keep_idle alone may not exceed the default keep.
	c = mustParse(t, good+"runs: {keep_idle: 720h}\n")
	if c.Runs.KeepIdle.D() != DefaultRunsKeep {
		t.Fatalf("keep_idle %s", c.Runs.KeepIdle.D())
	}
}

func TestRunsConfigErrors(t *testing.T) {
	cases := []struct{ name, from, to, want string }{
		{"not a duration", "keep: 336h", "keep: 30d", `t.yaml:14: runs.keep: invalid duration "30d" (want e.g. 30s, 10m, 1h)`},
		{"bad keep_idle", "keep_idle: 12h", "keep_idle: soon", `t.yaml:15: runs.keep_idle: invalid duration "soon"`},
		{"negative", "keep: 336h", "keep: -1h", `t.yaml:14: runs.keep: -1h0m0s is shorter than 1h0m0s`},
		{"too short", "keep_idle: 12h", "keep_idle: 5m", `t.yaml:15: runs.keep_idle: 5m0s is shorter than 1h0m0s`},
		{"idle longer than keep", "keep_idle: 12h", "keep_idle: 400h", `t.yaml:15: runs.keep_idle: 400h0m0s is longer than runs.keep (336h0m0s)`},
		{"unknown key", "keep_idle: 12h", "keep_failed: 12h", `runs.keep_failed`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(strings.Replace(runsGood, tc.from, tc.to, 1)), fullEnv)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
