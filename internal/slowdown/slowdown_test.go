package slowdown

import (
	"testing"
	"time"
)

func TestScale(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want time.Duration
		bad  bool
	}{
		{"", 10 * time.Second, false},
		{"1", 10 * time.Second, false},
		{"2.5", 25 * time.Second, false},
		{"0.5", 0, true},
		{"fast", 0, true},
	} {
		t.Setenv(Env, tc.env)
		factor = onceFactor() // read the variable again
		func() {
			defer func() {
				if r := recover(); (r != nil) != tc.bad {
					t.Errorf("%s=%q: panic %v, want a panic: %v", Env, tc.env, r, tc.bad)
				}
			}()
			if got := Scale(10 * time.Second); got != tc.want {
				t.Errorf("%s=%q: Scale(10s) = %s, want %s", Env, tc.env, got, tc.want)
			}
		}()
	}
}
