package poller_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/internal/slowdown"
	"github.com/tidemarkhq/tidemark/lease"
	"github.com/tidemarkhq/tidemark/poller"
)

// watchedSource is a fakeSource that notices two listings of one source at
// once, from any replica.
type watchedSource struct {
	*fakeSource
	inflight *sync.Map // source name → *atomic.Int32
	overlaps *atomic.Int32
	lists    *atomic.Int64
}

func (w watchedSource) List(ctx context.Context, r clients.Resource, win clients.Window, fn func(context.Context, clients.Page) error) error {
	v, _ := w.inflight.LoadOrStore(w.name, new(atomic.Int32))
	n := v.(*atomic.Int32)
	if n.Add(1) > 1 {
		w.overlaps.Add(1)
	}
	defer n.Add(-1)
	w.lists.Add(1)
	time.Sleep(20 * time.Millisecond) // a pass takes a moment, so overlaps would show
	return w.fakeSource.List(ctx, r, win, fn)
}

type replica struct {
	id string
	p  *poller.Poller
	d  *poller.Daemon
}

// TestFleetSharesSources: 3 replicas, 300 sources, one killed and started
// again. Each replica holds at most ⌈N/R⌉+1 sources, every source has an
// owner within two heartbeats of a change (counted in the members' rounds,
// not in seconds), and no source is listed by two replicas at once.
func TestFleetSharesSources(t *testing.T) {
	t.Parallel()
	const n, beat = 300, time.Second
	url := pgtest.URL(t)
	watch := watchedSource{inflight: &sync.Map{}, overlaps: new(atomic.Int32), lists: new(atomic.Int64)}
	var names []string
	var scheds []poller.Schedule
	fakes := map[string]*fakeSource{}
	for i := range n {
		name := fmt.Sprintf("src-%03d", i)
		names = append(names, name)
		fakes[name] = newFakeSource(name, t0)
		fakes[name].put(1, day, "x")
		scheds = append(scheds, poller.Schedule{Source: name, Incremental: "@every 3s"})
	}
	admin := newPool(t, url, 2)

	var srcs []poller.Source
	for _, name := range names {
		w := watch
		w.fakeSource = fakes[name]
		srcs = append(srcs, poller.Source{Source: w})
	}
	start := func(id string) *replica { return startReplica(t, url, id, srcs, scheds, beat) }
	leases := make([]string, n)
	for i, name := range names {
		leases[i] = poller.OwnerLease(name)
	}
	// settled waits until every source is owned by one of want, each
	// holding at most ⌈N/R⌉+1. The guarantee is in heartbeats, so that is
	// what it counts: it fails when every member of want has run more than
	// maxRounds rounds since the change and the shares are still not
	// settled (on a busy machine a heartbeat comes late, and so may the
	// hand-over). The deadline is only a safety net.
	settled := func(what string, maxRounds int, want ...*replica) {
		t.Helper()
		var ids []string
		base := map[string]int{}
		for _, r := range want {
			ids = append(ids, r.id)
			base[r.id] = poller.FleetRounds(r.d)
		}
		limit := (n+len(want)-1)/len(want) + 1
		began := time.Now()
		var last map[string]int
		within := slowdown.Scale(90 * time.Second) // a safety net
		for time.Since(began) < within {
			// Rounds read before the look: each had finished when it began.
			rounds := maxRounds + 1
			for _, r := range want {
				rounds = min(rounds, poller.FleetRounds(r.d)-base[r.id])
			}
			var owned int
			owned, last = shares(t, admin, leases)
			ok := owned == n && len(last) == len(want)
			for _, id := range ids {
				ok = ok && last[id] > 0 && last[id] <= limit
			}
			if ok {
				t.Logf("%s: shares %v after %v", what, last, time.Since(began).Round(10*time.Millisecond))
				return
			}
			if rounds > maxRounds {
				t.Fatalf("%s: not settled after %d heartbeats of each member: owners %v (want each of %v holding at most %d)", what, rounds, last, ids, limit)
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s: not settled in %v: owners %v (want each of %v holding at most %d)", what, within, last, ids, limit)
	}

	a, b, c := start("replica-a"), start("replica-b"), start("replica-c")
	settled("three replicas", 10, a, b, c)

	// Two heartbeats: the one that notices the change (the round in flight
	// when it happened may have read the members before it), and the one
	// after a peer handed a source over; one more for the members' rounds
	// not being in step.
	c.kill() // its lease connection drops, as when the process dies
	settled("replica-c killed", 4, a, b)
	c2 := start("replica-c2") // the process started again: a new member
	settled("replica-c started again", 4, a, b, c2)
	// Passes on the new shares: every source listed at least once more.
	before := watch.lists.Load()
	waitFor(t, time.Minute, func() bool { return watch.lists.Load() >= before+n }, fmt.Sprintf("%d more listings on the new shares", n))
	if o := watch.overlaps.Load(); o != 0 {
		t.Fatalf("%d listings ran while another replica listed the same source", o)
	}
	if watch.lists.Load() < n {
		t.Fatalf("only %d listings: the replicas did not poll", watch.lists.Load())
	}
}

// startReplica starts a fleet member id over srcs, with its own pool on
// url, that runs its first passes at once; it is killed when the test ends.
func startReplica(t *testing.T, url, id string, srcs []poller.Source, scheds []poller.Schedule, beat time.Duration) *replica {
	t.Helper()
	p, err := poller.New(poller.Params{Pool: newPool(t, url, 4), Sources: srcs, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	d, err := poller.NewDaemon(p, config.CronParser, scheds)
	if err != nil {
		t.Fatal(err)
	}
	d.JoinFleet(poller.FleetParams{Member: lease.Member{ID: id, Host: "test", PID: 1}, Heartbeat: beat})
	d.Start(context.Background(), true)
	r := &replica{id: id, p: p, d: d}
	t.Cleanup(r.kill)
	return r
}

// shares returns how many of leases are held, and how many each holder
// holds.
func shares(t *testing.T, admin *pgxpool.Pool, leases []string) (owned int, byHolder map[string]int) {
	t.Helper()
	holders, err := lease.Holders(context.Background(), admin, leases)
	if err != nil {
		t.Fatal(err)
	}
	byHolder = map[string]int{}
	for _, who := range holders {
		byHolder[who]++
	}
	return len(holders), byHolder
}

func (r *replica) kill() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = r.d.Stop(ctx)
	r.p.Close()
}

func newPool(t *testing.T, url string, conns int32) *pgxpool.Pool {
	t.Helper()
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	pc.MaxConns = conns
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// busySource lists slowly: its passes follow each other with almost no
// idle moment between them.
type busySource struct{ *fakeSource }

func (b busySource) List(ctx context.Context, r clients.Resource, win clients.Window, fn func(context.Context, clients.Page) error) error {
	time.Sleep(1900 * time.Millisecond)
	return b.fakeSource.List(ctx, r, win, fn)
}

// TestFleetHandsOverABusySource: a member that joins gets its share even of
// sources whose passes run back to back (every second, each taking almost
// two): the owner hands a source over at its next tick instead of waiting
// for a heartbeat that finds it idle.
func TestFleetHandsOverABusySource(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	names := []string{"busy-1", "busy-2", "busy-3", "busy-4"}
	fakes := map[string]*fakeSource{}
	for _, name := range names {
		fakes[name] = newFakeSource(name, t0)
		fakes[name].put(1, day, "x")
	}
	var srcs []poller.Source
	var scheds []poller.Schedule
	for _, name := range names {
		srcs = append(srcs, poller.Source{Source: busySource{fakes[name]}})
		scheds = append(scheds, poller.Schedule{Source: name, Incremental: "@every 1s"})
	}
	start := func(id string) *replica { return startReplica(t, url, id, srcs, scheds, 500*time.Millisecond) }
	admin := newPool(t, url, 2)
	var leases []string
	for _, name := range names {
		leases = append(leases, poller.OwnerLease(name))
	}
	waitShares := func(within time.Duration, ok func(map[string]int) bool) map[string]int {
		t.Helper()
		var m map[string]int
		for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if _, m = shares(t, admin, leases); ok(m) {
				return m
			}
		}
		t.Fatalf("shares %v after %v", m, within)
		return nil
	}
	start("replica-a")
	waitShares(10*time.Second, func(m map[string]int) bool { return m["replica-a"] == len(names) })
	start("replica-b")
	// Within a pass and a tick or two of the join, not whenever a
	// heartbeat happens to fall between two passes.
	m := waitShares(6*time.Second, func(m map[string]int) bool { return m["replica-a"] > 0 && m["replica-b"] > 0 })
	t.Logf("shares after replica-b joined: %v", m)
}
