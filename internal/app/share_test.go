package app_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/internal/app"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/fakeapi/harvestfake"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/lease"
	"github.com/tidemarkhq/tidemark/poller"
)

// shareReplica is one `tidemark run` of the fleet, in this process.
type shareReplica struct {
	id      string
	a       *app.App
	sigs    chan os.Signal
	reloads chan os.Signal // nil: no reloads
	done    chan error
	stopped bool
}

func (r *shareReplica) stop(t *testing.T) {
	t.Helper()
	if r.stopped {
		return
	}
	r.stopped = true
	r.sigs <- syscall.SIGTERM
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("%s: %v", r.id, err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("%s did not stop", r.id)
	}
	r.a.Close() // its leases go, as when the process exits
}

// seriesSources names the sources that have metric series in a's registry.
func seriesSources(t *testing.T, a *app.App) []string {
	t.Helper()
	fams, err := a.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "source" {
					seen[l.GetValue()] = true
				}
			}
		}
	}
	var out []string
	for s := range seen {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// TestReplicaHoldsItsShare: 3 replicas of the daemon (internal/app's
// RunDaemon, as `tidemark run`) over 30 Harvest sources. Each replica holds
// a client and metric series for the sources it owns and for no other;
// when a replica stops, the others build the clients of the sources they
// take, and when it comes back they release, client and series, the
// sources they hand over to it.
func TestReplicaHoldsItsShare(t *testing.T) {
	t.Parallel()
	const n = 30
	fake := harvestfake.New(harvestfake.Options{NoRateLimit: true})
	t.Cleanup(fake.Close)
	now := time.Now().UTC().Add(-time.Hour)
	fake.PutClient(harvestfake.Client{ID: 1, Name: "Acme", Currency: "EUR", IsActive: true, CreatedAt: now, UpdatedAt: now})
	u := pgtest.URL(t)
	var y strings.Builder
	y.WriteString("contact: test@tidemark.invalid\nsources:\n")
	var names, leases []string
	for i := range n {
		name := fmt.Sprintf("src%02d", i)
		names, leases = append(names, name), append(leases, poller.OwnerLease(name))
		fmt.Fprintf(&y, "  - {name: %s, kind: harvest, base_url: %q, account_id: %q, token: %q, schedule: \"@every 1s\", resources: [clients, users]}\n",
			name, fake.URL(), fake.AccountID(), fake.Token())
	}
	cfg, err := config.Parse("share.yaml", []byte(y.String()), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	start := func(id string) *shareReplica {
		t.Helper()
		a, err := app.Open(context.Background(), cfg, u, "v0.0.0-test", zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel))
		if err != nil {
			t.Fatal(err)
		}
		a.Fleet = poller.FleetParams{Member: lease.Member{ID: id, Host: "test", PID: 1}, Heartbeat: 500 * time.Millisecond}
		r := &shareReplica{id: id, a: a, sigs: make(chan os.Signal, 1), done: make(chan error, 1)}
		started := make(chan struct{})
		go func() {
			r.done <- a.RunDaemon(context.Background(), "", r.sigs, 3, func(*poller.Poller) { close(started) })
		}()
		select {
		case <-started:
		case err := <-r.done:
			t.Fatalf("%s: %v", id, err)
		}
		t.Cleanup(func() { r.stop(t) })
		return r
	}
	// settled waits until the replicas given own every source between them,
	// each at most ⌈N/R⌉+1, and each holds clients and metric series for
	// exactly the sources it owns; it returns what each owns.
	settled := func(what string, reps ...*shareReplica) map[string][]string {
		t.Helper()
		var owned map[string][]string
		var diag []string
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			holders, err := lease.Holders(context.Background(), admin, leases)
			if err != nil {
				t.Fatal(err)
			}
			owned = map[string][]string{}
			for i, l := range leases {
				if who, ok := holders[l]; ok {
					owned[who] = append(owned[who], names[i])
				}
			}
			ok := len(holders) == n && len(owned) == len(reps)
			diag = append(diag[:0], fmt.Sprintf("%d of %d sources owned, by %d members", len(holders), n, len(owned)))
			limit := (n+len(reps)-1)/len(reps) + 1 // lease.Assign's bound: the shares have settled
			for _, r := range reps {
				built, series := r.a.BuiltSources(), seriesSources(t, r.a)
				ok = ok && len(owned[r.id]) > 0 && len(owned[r.id]) <= limit && slices.Equal(owned[r.id], built) && slices.Equal(owned[r.id], series)
				diag = append(diag, fmt.Sprintf("%s owns %v, has clients of %v and series of %v", r.id, owned[r.id], built, series))
			}
			if ok {
				for _, r := range reps {
					t.Logf("%s: %s owns %d sources, holds their %d clients and no other", what, r.id, len(owned[r.id]), len(r.a.BuiltSources()))
				}
				return owned
			}
		}
		t.Fatalf("%s: not settled in 30 s:\n%s", what, strings.Join(diag, "\n"))
		return nil
	}

	a, b, c := start("replica-a"), start("replica-b"), start("replica-c")
	shares := settled("three replicas", a, b, c)
	c.stop(t)
	took := settled("replica-c stopped", a, b)
	for _, r := range []*shareReplica{a, b} {
		if len(took[r.id]) <= len(shares[r.id]) {
			t.Errorf("%s took none of replica-c's sources: %d before, %d after", r.id, len(shares[r.id]), len(took[r.id]))
		}
	}
	c2 := start("replica-c2")
	back := settled("replica-c2 joined", a, b, c2)
	for _, r := range []*shareReplica{a, b} {
		if len(back[r.id]) >= len(took[r.id]) {
			t.Errorf("%s handed nothing over to replica-c2: %d before, %d after", r.id, len(took[r.id]), len(back[r.id]))
		}
	}
}
