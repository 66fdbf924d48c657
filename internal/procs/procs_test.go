package procs

import (
	"runtime"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestGovernorDecides(t *testing.T) {
	p := Policy{Every: time.Second, Up: 0.5, UpFor: 2 * time.Second, Down: 0.2, Settle: 3 * time.Second}
	g := &governor{policy: p}
	step := func(used float64, wantDown, wantUp bool) {
		t.Helper()
		down, up := g.observe(used, time.Second)
		if down != wantDown || up != wantUp {
			t.Fatalf("observe(%.2f) = down %v up %v, want %v %v", used, down, up, wantDown, wantUp)
		}
	}
	// Quiet for less than Settle: nothing; a busy sample starts it again.
	step(0.05, false, false)
	step(0.05, false, false)
	step(0.3, false, false)
	step(0.05, false, false)
	step(0.05, false, false)
	step(0.05, true, false) // three quiet seconds in a row
	// On one P: a burst of one sample stays; so do samples between the
	// thresholds; over Up on average for UpFor goes back.
	step(0.9, false, false)
	step(0.05, false, false)
	step(0.4, false, false)
	step(0.45, false, false)
	step(0.9, false, true) // 0.45 and 0.9: 0.675 over the last 2 s
	// Back on the default, the quiet time counts from nothing, and the
	// samples before count for nothing on one P again.
	step(0.05, false, false)
	step(0.05, false, false)
	step(0.05, true, false)
	step(0.9, false, false)
}

// TestGovernDownAndBack runs the governor on this process: idle, it goes to
// one P; busy, it gives the default back; stopped, it leaves the default.
func TestGovernDownAndBack(t *testing.T) {
	def := runtime.GOMAXPROCS(0)
	if def <= 1 {
		t.Skip("one CPU: nothing to govern")
	}
	t.Setenv("GOMAXPROCS", "") // an operator's setting turns it off
	// Thresholds low enough for a machine busy with other work: a loop here
	// gets well over a tenth of a core, an idle test binary well under 5 %.
	stop := Govern(Policy{Every: 20 * time.Millisecond, Up: 0.1, UpFor: 60 * time.Millisecond, Down: 0.05, Settle: 100 * time.Millisecond}, zerolog.Nop())
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	waitProcs(t, func(n int) bool { return n == 1 }, "one P while idle")

	// Busy: a loop on the one P uses the whole core.
	quit := make(chan struct{})
	go func() {
		for {
			select {
			case <-quit:
				return
			default:
			}
			for i := 0; i < 1e5; i++ {
				_ = i * i
			}
		}
	}()
	waitProcs(t, func(n int) bool { return n == def }, "the default back while busy")
	close(quit)
	waitProcs(t, func(n int) bool { return n == 1 }, "one P once idle again")
	stop()
	stopped = true
	if n := runtime.GOMAXPROCS(0); n != def {
		t.Fatalf("after stop: %d Ps, want the default %d", n, def)
	}
}

func TestGovernLeavesAnOperatorsSetting(t *testing.T) {
	def := runtime.GOMAXPROCS(0)
	t.Setenv("GOMAXPROCS", "2")
	stop := Govern(Policy{Every: 5 * time.Millisecond, Up: 0.5, Down: 0.2, Settle: 10 * time.Millisecond}, zerolog.Nop())
	defer stop()
	time.Sleep(100 * time.Millisecond) // several whole settles: a governor would have acted
	if n := runtime.GOMAXPROCS(0); n != def {
		t.Fatalf("GOMAXPROCS set by the operator: %d Ps, want %d untouched", n, def)
	}
}

func waitProcs(t *testing.T, ok func(int) bool, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok(runtime.GOMAXPROCS(0)) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s: %d Ps after 30 s", what, runtime.GOMAXPROCS(0))
		}
		time.Sleep(5 * time.Millisecond)
	}
}
