package app_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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

// TestNewerSourceConfigKeepsItsSource (issue 30, item 8), through two
// daemons (app.Open, RunDaemon): replica A has source s in one form and u;
// replica B, started later with s in a newer form, serves s. A reloaded for
// u alone, then A restarted, still holds s in its older form: neither takes
// s back from B.
func TestNewerSourceConfigKeepsItsSource(t *testing.T) {
	t.Parallel()
	fake := harvestfake.New(harvestfake.Options{NoRateLimit: true})
	t.Cleanup(fake.Close)
	u := pgtest.URL(t)
	admin, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	dir := t.TempDir()
	source := func(name, overlap string) string {
		return fmt.Sprintf("  - {name: %s, kind: harvest, base_url: %q, account_id: %q, token: %q, schedule: \"@every 1s\", overlap: %s, resources: [clients]}\n",
			name, fake.URL(), fake.AccountID(), fake.Token(), overlap)
	}
	write := func(file, body string) string {
		p := filepath.Join(dir, file)
		if err := os.WriteFile(p, []byte("contact: test@tidemark.invalid\nsources:\n"+body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	start := func(id, path string) *shareReplica {
		t.Helper()
		cfg, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		a, err := app.Open(context.Background(), cfg, u, "v0.0.0-test", zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel))
		if err != nil {
			t.Fatal(err)
		}
		a.Fleet = poller.FleetParams{Member: lease.Member{ID: id, Host: "test", PID: 1}, Heartbeat: 300 * time.Millisecond}
		r := &shareReplica{id: id, a: a, sigs: make(chan os.Signal, 1), done: make(chan error, 1)}
		reloads := make(chan os.Signal, 1)
		a.Reloads = reloads
		r.reloads = reloads
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
	holder := func() string {
		h, err := lease.Holders(context.Background(), admin, []string{poller.OwnerLease("s")})
		if err != nil {
			t.Fatal(err)
		}
		return h[poller.OwnerLease("s")]
	}
	waitHolder := func(what, want string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if holder() == want {
				return
			}
		}
		t.Fatalf("%s: s held by %q, want %s", what, holder(), want)
	}
	// keeps checks that B holds s while every member named heartbeats n
	// times more (the daemons' own clock, not ours).
	keeps := func(what string, n int, ids ...string) {
		t.Helper()
		beats := func() map[string]time.Time {
			out := map[string]time.Time{}
			for _, id := range ids {
				var at time.Time
				if err := admin.QueryRow(context.Background(), `SELECT heartbeat_at FROM fleet_members WHERE id = $1`, id).Scan(&at); err != nil {
					t.Fatal(err)
				}
				out[id] = at
			}
			return out
		}
		seen := map[string]int{}
		last := beats()
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if h := holder(); h != "replica-b" && h != "" {
				t.Fatalf("%s: %s took s from replica-b (its config of s is the older one)", what, h)
			}
			done := true
			for id, at := range beats() {
				if !at.Equal(last[id]) {
					seen[id]++
					last[id] = at
				}
				done = done && seen[id] >= n
			}
			if done {
				return
			}
		}
		t.Fatalf("%s: the members did not heartbeat %d times: %v", what, n, seen)
	}
	pathA := write("a.yaml", source("s", "10m")+source("u", "10m"))
	pathB := write("b.yaml", source("s", "11m"))
	a := start("replica-a", pathA)
	waitHolder("A alone", "replica-a")
	start("replica-b", pathB)
	waitHolder("B's newer config of s", "replica-b")

	// A reloads for u alone; its config of s is the same, older one.
	var was time.Time
	if err := admin.QueryRow(context.Background(), `SELECT config_at FROM fleet_members WHERE id = 'replica-a'`).Scan(&was); err != nil {
		t.Fatal(err)
	}
	write("a.yaml", source("s", "10m")+source("u", "12m"))
	a.reloads <- syscall.SIGHUP
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var at time.Time
		if err := admin.QueryRow(context.Background(), `SELECT config_at FROM fleet_members WHERE id = 'replica-a'`).Scan(&at); err != nil {
			t.Fatal(err)
		}
		if at.After(was) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("replica-a's reload never reached the fleet")
		}
	}
	keeps("A reloaded for u", 8, "replica-a", "replica-b")

	// A restarts with that config: a new member, its config loaded now.
	a.stop(t)
	start("replica-a2", pathA)
	keeps("A restarted", 8, "replica-a2", "replica-b")
}
