package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestHistoryConfig(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
		keep       time.Duration
	}{
		{"off by default", "", nil, 0},
		{"all", "    history: all\n", []string{"time_entries", "projects"}, 0},
		{"off", "    history: off\n", nil, 0},
		{"a list", "    history: [time_entries, projects]\n", []string{"time_entries", "projects"}, 0},
		{"with keep", "    history: {resources: [time_entries], keep: 730d}\n", []string{"time_entries"}, 730 * 24 * time.Hour},
		{"keep in hours", "    history:\n      resources: all\n      keep: 48h\n", []string{"time_entries", "projects"}, 48 * time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("t.yaml", []byte(good+tc.yaml), fullEnv)
			if err != nil {
				t.Fatal(err)
			}
			h := c.Sources[0].History
			if !slices.Equal([]string(h.Resources), tc.want) || h.Keep.D() != tc.keep {
				t.Fatalf("history = %+v, want %v keep %v", h, tc.want, tc.keep)
			}
		})
	}
}

func TestHistoryConfigErrors(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"bad word", "    history: sometimes\n", `t.yaml:13: sources[0].history: invalid value "sometimes"`},
		{"unknown resource", "    history: [time_entries, timesheets]\n", `sources[0].history[1]: unknown resource "timesheets"`},
		{"not mirrored", "    history: [time_entries, users]\n", `sources[0].history[1]: users is not among the source's resources (time_entries, projects)`},
		{"bad keep", "    history: {resources: all, keep: forever}\n", `sources[0].history.keep: invalid duration "forever"`},
		{"unknown key", "    history: {resources: all, kept: 3d}\n", `sources[0].history.kept: unknown key`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(good+tc.yaml), fullEnv)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
