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
	pathA := write("a.yaml", source("s", "10m")+source("u", "10m"))
	pathB := write("b.yaml", source("s", "11m"))
	a := startReloadable(t, u, "replica-a", pathA)
	waitHolder(t, admin, "A alone", "replica-a")
	startReloadable(t, u, "replica-b", pathB)
	waitHolder(t, admin, "B's newer config of s", "replica-b")

	// A reloads for u alone; its config of s is the same, older one.
	was := configAt(t, admin, "replica-a")
	write("a.yaml", source("s", "10m")+source("u", "12m"))
	a.reloads <- syscall.SIGHUP
	for deadline := time.Now().Add(30 * time.Second); !configAt(t, admin, "replica-a").After(was); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("replica-a's reload never reached the fleet")
		}
	}
	keepsB(t, admin, "A reloaded for u", 8, "replica-a", "replica-b")

	// A restarts with that config: a new member, its config loaded now.
	a.stop(t)
	startReloadable(t, u, "replica-a2", pathA)
	keepsB(t, admin, "A restarted", 8, "replica-a2", "replica-b")
}

// startReloadable runs a daemon of the config at path as fleet member id,
// reloaded by what is sent on its reloads.
func startReloadable(t *testing.T, u, id, path string) *shareReplica {
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
	r := &shareReplica{id: id, a: a, sigs: make(chan os.Signal, 1), reloads: make(chan os.Signal, 1), done: make(chan error, 1)}
	a.Reloads = r.reloads
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

func configAt(t *testing.T, admin *pgxpool.Pool, id string) time.Time {
	t.Helper()
	var at time.Time
	if err := admin.QueryRow(context.Background(), `SELECT config_at FROM fleet_members WHERE id = $1`, id).Scan(&at); err != nil {
		t.Fatal(err)
	}
	return at
}

// holderOfS is the fleet member that holds source s ("": none).
func holderOfS(t *testing.T, admin *pgxpool.Pool) string {
	t.Helper()
	h, err := lease.Holders(context.Background(), admin, []string{poller.OwnerLease("s")})
	if err != nil {
		t.Fatal(err)
	}
	return h[poller.OwnerLease("s")]
}

func waitHolder(t *testing.T, admin *pgxpool.Pool, what, want string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if holderOfS(t, admin) == want {
			return
		}
	}
	t.Fatalf("%s: s held by %q, want %s", what, holderOfS(t, admin), want)
}

// keepsB checks that replica-b holds s while every member named heartbeats
// n times more (the daemons' own clock, not ours).
func keepsB(t *testing.T, admin *pgxpool.Pool, what string, n int, ids ...string) {
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
	seen, last := map[string]int{}, beats()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if h := holderOfS(t, admin); h != "replica-b" && h != "" {
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
