// Package procs owns how many Ps (GOMAXPROCS) the daemon runs on: one
// while it idles, the runtime's default while it works.
//
// An idle daemon's work is a burst of small requests a tick, each waking a
// goroutine or two. With more than one P every wake-up also wakes an idle P
// to look for work (a thread woken and parked again through futex calls),
// and a collection runs idle mark workers on it: a fifth of a 1,000-source
// idle daemon's CPU (BENCHMARKS.md, issue 30: GOMAXPROCS=1 took it from
// 4.27-4.65 % of a core to 3.14-3.85 %). One P serves such a daemon at no
// loss; a first sync, a backfill or a burst of changes gets the default
// back within a sample.
package procs

import (
	"context"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// Policy says when to change the P count.
type Policy struct {
	// Every is how often the process's CPU time is sampled.
	Every time.Duration
	// Up: on one P, samples that used more than this share of one core
	// on average over UpFor give the default back. Averaged, so that a
	// tick's burst of passes (a few seconds) does not.
	Up    float64
	UpFor time.Duration
	// Down: every sample under this share for Settle goes down to one P.
	Down   float64
	Settle time.Duration
}

// DefaultPolicy samples every second, goes back to the default above 60 %
// of a core over 3 s and down to one P after 30 s under a fifth of one.
var DefaultPolicy = Policy{Every: time.Second, Up: 0.6, UpFor: 3 * time.Second, Down: 0.2, Settle: 30 * time.Second}

// governor is the decision, apart from the clock and the runtime.
type governor struct {
	policy Policy
	one    bool          // running on one P
	quiet  time.Duration // how long the samples stayed under Down
	recent []sample      // on one P, the samples of the last UpFor
}

type sample struct {
	used float64 // share of one core
	d    time.Duration
}

// observe takes one sample, the share of one core used over d, and says
// whether to go to one P (down) or back to the default (up).
func (g *governor) observe(used float64, d time.Duration) (down, up bool) {
	if g.one {
		if g.busy(sample{used, d}) {
			g.one, g.quiet, g.recent = false, 0, g.recent[:0]
			return false, true
		}
		return false, false
	}
	if used >= g.policy.Down {
		g.quiet = 0
		return false, false
	}
	g.quiet += d
	if g.quiet >= g.policy.Settle {
		g.one, g.quiet = true, 0
		return true, false
	}
	return false, false
}

// busy adds a sample taken on one P and reports whether the samples of the
// last UpFor used more than Up on average.
func (g *governor) busy(s sample) bool {
	g.recent = append(g.recent, s)
	var span time.Duration
	var cpu float64
	for i := len(g.recent) - 1; i >= 0; i-- {
		span += g.recent[i].d
		cpu += g.recent[i].used * float64(g.recent[i].d)
		if span >= g.policy.UpFor {
			g.recent = append(g.recent[:0], g.recent[i:]...)
			return cpu/float64(span) > g.policy.Up
		}
	}
	return false
}

var (
	mu    sync.Mutex
	users int
	stop  context.CancelFunc
	done  chan struct{}
)

// Govern runs the daemon's P count by policy until the returned function
// is called. It leaves the P count alone when an operator set GOMAXPROCS,
// or when the default is one P already. Several daemons in one process
// (tests, a fleet run in one process) share one governor; the last stop
// ends it and gives the default back.
func Govern(policy Policy, log zerolog.Logger) (stopFn func()) {
	if os.Getenv("GOMAXPROCS") != "" || runtime.GOMAXPROCS(0) <= 1 {
		return func() {}
	}
	mu.Lock()
	defer mu.Unlock()
	users++
	if users == 1 {
		var ctx context.Context
		ctx, stop = context.WithCancel(context.Background())
		done = make(chan struct{})
		go run(ctx, policy, log, done)
	}
	var once sync.Once
	return func() { once.Do(release) }
}

func release() {
	mu.Lock()
	defer mu.Unlock()
	if users--; users == 0 {
		stop()
		<-done
	}
}

// run samples the process's CPU time every policy.Every and applies the
// governor's decisions; it gives the default back as it ends.
func run(ctx context.Context, policy Policy, log zerolog.Logger, done chan struct{}) {
	defer close(done)
	g := &governor{policy: policy}
	defer func() {
		if g.one {
			runtime.SetDefaultGOMAXPROCS()
		}
	}()
	t := time.NewTicker(policy.Every)
	defer t.Stop()
	lastCPU, lastAt := cpuTime(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			cpu := cpuTime()
			d := now.Sub(lastAt)
			if d <= 0 {
				continue
			}
			down, up := g.observe(float64(cpu-lastCPU)/float64(d), d)
			lastCPU, lastAt = cpu, now
			switch {
			case down:
				runtime.GOMAXPROCS(1)
				log.Debug().Msg("idle: running on one P")
			case up:
				// The default, not a number kept from the start: the
				// runtime's own updates (a container's CPU limit) resume.
				runtime.SetDefaultGOMAXPROCS()
				log.Debug().Int("procs", runtime.GOMAXPROCS(0)).Msg("busy: back to the default P count")
			}
		}
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
