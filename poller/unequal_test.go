package poller_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/lease"
	"github.com/tidemarkhq/tidemark/poller"
)

// listings counts, per replica and source, the listings each replica ran,
// and listings of one source that overlapped (two replicas at once).
type listings struct {
	mu       sync.Mutex
	by       map[string]int // "replica/source"
	inflight map[string]int // source
	overlaps atomic.Int32
}

func (l *listings) count(rep, source string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.by[rep+"/"+source]
}

// taggedSource is a fakeSource of one replica that records its listings.
type taggedSource struct {
	*fakeSource
	rep string
	l   *listings
}

func (s taggedSource) List(ctx context.Context, r clients.Resource, w clients.Window, fn func(context.Context, clients.Page) error) error {
	s.l.mu.Lock()
	s.l.by[s.rep+"/"+s.name]++
	if s.l.inflight[s.name]++; s.l.inflight[s.name] > 1 {
		s.l.overlaps.Add(1)
	}
	s.l.mu.Unlock()
	defer func() {
		s.l.mu.Lock()
		s.l.inflight[s.name]--
		s.l.mu.Unlock()
	}()
	time.Sleep(20 * time.Millisecond) // a pass takes a moment, so overlaps would show
	return s.fakeSource.List(ctx, r, w, fn)
}

// TestFleetOfUnequalReplicas (issue 25): replica A has sources {a, b},
// replica B {b, c}. Every source is polled by exactly one replica that has
// it, at every moment: while both run, while B is down and after it comes
// back, and after A's config changes (b's config changed there, d added):
// A's newer config of b wins, so B hands b over and polls only c.
func TestFleetOfUnequalReplicas(t *testing.T) {
	t.Parallel()
	const beat = 300 * time.Millisecond
	url := pgtest.URL(t)
	admin := newPool(t, url, 2)
	l := &listings{by: map[string]int{}, inflight: map[string]int{}}
	src := func(rep, name string) poller.Source {
		f := newFakeSource(name, t0)
		f.put(1, day, "x")
		return poller.Source{Source: taggedSource{fakeSource: f, rep: rep, l: l}}
	}
	sched := func(name string) poller.Schedule { return poller.Schedule{Source: name, Incremental: "@every 1s"} }
	startA := func() *replica {
		return startReplica(t, url, "replica-a", []poller.Source{src("A", "a"), src("A", "b")}, []poller.Schedule{sched("a"), sched("b")}, beat)
	}
	startB := func(id string) *replica {
		return startReplica(t, url, id, []poller.Source{src("B", "b"), src("B", "c")}, []poller.Schedule{sched("b"), sched("c")}, beat)
	}
	leases := map[string]string{}
	for _, n := range []string{"a", "b", "c", "d"} {
		leases[n] = poller.OwnerLease(n)
	}
	// owners waits until the sources have the owners want (a source
	// mapped to "" may have either replica that has it) and each has been
	// listed again by its owner since the wait began.
	owners := func(what string, want map[string]string, listedBy map[string]string) {
		t.Helper()
		before := map[string]int{}
		for s, rep := range listedBy {
			before[s] = l.count(rep, s)
		}
		var got map[string]string
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			var names, ls []string
			for n, ln := range leases {
				names, ls = append(names, n), append(ls, ln)
			}
			h, err := lease.Holders(context.Background(), admin, ls)
			if err != nil {
				t.Fatal(err)
			}
			got = map[string]string{}
			for _, n := range names {
				got[n] = h[leases[n]]
			}
			ok := true
			for s, who := range want {
				ok = ok && (got[s] == who || (who == "*" && got[s] != ""))
			}
			for s, rep := range listedBy {
				ok = ok && l.count(rep, s) > before[s]
			}
			if ok {
				t.Logf("%s: owners %v", what, got)
				return
			}
		}
		t.Fatalf("%s: owners %v, want %v; listings %v", what, got, want, l.by)
	}

	a, b := startA(), startB("replica-b")
	owners("A {a,b}, B {b,c}", map[string]string{"a": "replica-a", "b": "*", "c": "replica-b", "d": ""},
		map[string]string{"a": "A", "c": "B"})

	// B restarts: b goes to A (the only one left that has it); c has no
	// owner while B is down, and B's new process takes it back.
	b.kill()
	owners("B down", map[string]string{"a": "replica-a", "b": "replica-a", "c": ""}, map[string]string{"a": "A", "b": "A"})
	startB("replica-b2")
	owners("B back", map[string]string{"a": "replica-a", "b": "*", "c": "replica-b2"}, map[string]string{"c": "B"})

	// A's config changes: b's config is another (a newer fingerprint)
	// and d is added. A's newer config of b wins: B hands b over.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.d.RemoveSource(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"b", "d"} {
		if err := a.d.AddSource(src("A", n), sched(n)); err != nil {
			t.Fatal(err)
		}
	}
	a.d.SetFleetSources(map[string]string{"a": "", "b": "v2", "d": ""}, time.Now())
	owners("A's config changed", map[string]string{"a": "replica-a", "b": "replica-a", "c": "replica-b2", "d": "replica-a"},
		map[string]string{"b": "A", "d": "A", "c": "B"})
	// From now on B does not poll b.
	was := l.count("B", "b")
	owners("a while later", map[string]string{"b": "replica-a"}, map[string]string{"b": "A", "c": "B"})
	owners("and later", map[string]string{"b": "replica-a"}, map[string]string{"b": "A", "c": "B"})
	if now := l.count("B", "b"); now != was {
		t.Errorf("B polled b %d times after A's newer config of b took it", now-was)
	}
	if o := l.overlaps.Load(); o != 0 {
		t.Fatalf("%d listings of a source ran while another replica listed it", o)
	}
	t.Log(fmt.Sprint(l.by))
}
