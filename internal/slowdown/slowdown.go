// Package slowdown scales the deadlines of tests that must run on real time
// (end-to-end tests: processes, servers, real schedules) by one factor, so
// that a busy or slow machine does not fail them. A deadline is a safety
// net, never the expected time: tests wait for a condition and fail only
// once the scaled deadline has passed.
//
// TIDEMARK_TEST_SLOWDOWN is the factor (a number ≥ 1, default 1). CI on a
// shared or slow runner may set it, e.g. TIDEMARK_TEST_SLOWDOWN=3.
package slowdown

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// Env is the variable that holds the factor.
const Env = "TIDEMARK_TEST_SLOWDOWN"

var factor = onceFactor()

func onceFactor() func() (float64, error) {
	return sync.OnceValues(func() (float64, error) {
		s := os.Getenv(Env)
		if s == "" {
			return 1, nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f < 1 || f > 1000 {
			return 1, fmt.Errorf("%s=%q: want a number from 1 to 1000", Env, s)
		}
		return f, nil
	})
}

// Factor returns TIDEMARK_TEST_SLOWDOWN, or 1 when it is unset. A value
// that is not a number from 1 to 1000 panics: a typo would otherwise
// silently keep the short deadlines.
func Factor() float64 {
	f, err := factor()
	if err != nil {
		panic(err)
	}
	return f
}

// Scale returns d times the factor.
func Scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) * Factor())
}
