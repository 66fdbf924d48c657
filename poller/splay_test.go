package poller

import (
	"fmt"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	"pgregory.net/rapid"

	"github.com/tidemarkhq/tidemark/internal/config"
)

// Scheduled passes of many sources start spread over the splay, each source
// at the same offset every tick.
func TestSplaySpreadsSources(t *testing.T) {
	const n = 1000
	limit := 6 * time.Second // "* * * * *": a tenth of a minute
	buckets := make([]int, 6)
	for i := range n {
		src := fmt.Sprintf("src%05d", i)
		s := splayOf(src, limit)
		if s < 0 || s >= limit {
			t.Fatalf("splay of %s = %s, want within [0, %s)", src, s, limit)
		}
		if s != splayOf(src, limit) {
			t.Fatalf("splay of %s is not stable", src)
		}
		buckets[s/time.Second]++
	}
	for i, b := range buckets {
		if b < n/6/2 {
			t.Errorf("second %d of the splay holds %d of %d sources: not spread (%v)", i, b, n, buckets)
		}
	}
	if s := splayOf("acme", time.Hour); s >= MaxSplay {
		t.Errorf("splay %s over MaxSplay %s", s, MaxSplay)
	}
	if s := splayOf("acme", 0); s != 0 {
		t.Errorf("splay with no room = %s, want 0", s)
	}
}

// A splayed schedule activates splay after each activation of its schedule,
// always after the instant asked about, whatever that instant: cron asks
// for the next activation just after running one, a little late or not.
func TestSplayScheduleFiresSplayAfterEachTick(t *testing.T) {
	for _, spec := range []string{"* * * * *", "*/5 * * * *", "0 3 * * *", "@every 30s", "@every 1s"} {
		rapid.Check(t, func(rt *rapid.T) {
			inner, err := config.CronParser.Parse(spec)
			if err != nil {
				rt.Fatal(err)
			}
			splay := time.Duration(rapid.Int64Range(0, int64(MaxSplay)-1).Draw(rt, "splay"))
			s := splaySchedule{Schedule: inner, splay: splay}
			at := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC).Add(time.Duration(rapid.Int64Range(0, int64(48*time.Hour)).Draw(rt, "at")))
			next := s.Next(at)
			if !next.After(at) {
				rt.Fatalf("%s, splay %s: Next(%s) = %s, not after it", spec, splay, at, next)
			}
			if want := inner.Next(at.Add(-splay)).Add(splay); !next.Equal(want) {
				rt.Fatalf("%s, splay %s: Next(%s) = %s, want the tick after %s plus the splay, %s", spec, splay, at, next, at.Add(-splay), want)
			}
			if _, ok := inner.(*cron.SpecSchedule); ok {
				// next is a tick of the spec plus the splay, and the tick a
				// minute before it (a tick of "* * * * *") was not skipped.
				tick := next.Add(-splay)
				if !inner.Next(tick.Add(-time.Second)).Equal(tick) {
					rt.Fatalf("%s: %s is not a tick of the schedule", spec, tick)
				}
				if prev := tick.Add(-time.Minute); prev.Add(splay).After(at) && inner.Next(prev.Add(-time.Second)).Equal(prev) {
					rt.Fatalf("%s, splay %s: the tick %s plus the splay is after %s but was skipped", spec, splay, prev, at)
				}
			}
		})
	}
}
