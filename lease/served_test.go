package lease_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/lease"
)

// A source goes only to a member that has it configured; of two configs of
// one source, the newer one's members serve it; a member that says nothing
// of its sources (older) may serve any.
func TestAssignServed(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	peers := []lease.Peer{
		{ID: "a", Sources: map[string]string{"x": "1", "y": "1"}, ConfigAt: t0},
		{ID: "b", Sources: map[string]string{"y": "1", "z": "1"}, ConfigAt: t0},
	}
	for range 3 { // and the same answer every time
		got := lease.AssignServed(peers)
		if got["x"] != "a" || got["z"] != "b" || (got["y"] != "a" && got["y"] != "b") || len(got) != 3 {
			t.Fatalf("assign %v", got)
		}
	}
	// b's config of y is newer and another: b alone serves it.
	peers[1].Sources["y"], peers[1].ConfigAt = "2", t0.Add(time.Minute)
	if s := lease.Servers(peers); !slices.Equal(s["y"], []string{"b"}) || !slices.Equal(s["x"], []string{"a"}) {
		t.Fatalf("servers %v", s)
	}
	if got := lease.AssignServed(peers); got["y"] != "b" {
		t.Fatalf("newer config: %v", got)
	}
	// An older member (no sources said) may serve every source named.
	peers = append(peers, lease.Peer{ID: "old"})
	if s := lease.Servers(peers); !slices.Equal(s["x"], []string{"a", "old"}) {
		t.Fatalf("with an older member: %v", s)
	}
	// Bounded loads never give a source to a member without it: 30 sources
	// only a has, 1 that b has.
	many := []lease.Peer{{ID: "a", Sources: map[string]string{}}, {ID: "b", Sources: map[string]string{"only-b": ""}}}
	for i := range 30 {
		many[0].Sources[string(rune('A'+i))] = ""
	}
	for n, m := range lease.AssignServed(many) {
		if _, ok := map[string]map[string]string{"a": many[0].Sources, "b": many[1].Sources}[m][n]; !ok {
			t.Fatalf("%s assigned to %s, which does not have it", n, m)
		}
	}
}

// The members' sources go through the table: each member reads the others'
// (and LivePeers, for `cursors`, too), and a change is read again.
func TestHeartbeatPeersSources(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	a, b := newLeaser(t, url), newLeaser(t, url)
	at := time.Now().Truncate(time.Millisecond)
	ma := lease.Member{ID: "a/1", Host: "a", PID: 1, Sources: map[string]string{"x": "f1"}, ConfigAt: at}
	mb := lease.Member{ID: "b/2", Host: "b", PID: 2, Sources: map[string]string{"y": "f2"}, ConfigAt: at}
	if _, err := a.HeartbeatPeers(ctx, ma, time.Minute); err != nil {
		t.Fatal(err)
	}
	peers, err := b.HeartbeatPeers(ctx, mb, time.Minute)
	if err != nil || len(peers) != 2 || !maps.Equal(peers[0].Sources, ma.Sources) || !maps.Equal(peers[1].Sources, mb.Sources) {
		t.Fatalf("peers %+v %v", peers, err)
	}
	ma.Sources = map[string]string{"x": "f1", "z": "f3"}
	if _, err := a.HeartbeatPeers(ctx, ma, time.Minute); err != nil {
		t.Fatal(err)
	}
	if peers, err = b.HeartbeatPeers(ctx, mb, time.Minute); err != nil || !maps.Equal(peers[0].Sources, ma.Sources) {
		t.Fatalf("after a's change: %+v %v", peers, err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	live, err := lease.LivePeers(ctx, pool, time.Minute)
	if err != nil || len(live) != 2 || !maps.Equal(live[0].Sources, ma.Sources) || !live[1].ConfigAt.Equal(at) {
		t.Fatalf("live peers %+v %v", live, err)
	}
}

// BenchmarkHeartbeatPeers: a member's heartbeat in a fleet of 3 members of
// 3,000 sources each; steady, the sources are not read nor written again
// (their digests are unchanged), changed, they are.
func BenchmarkHeartbeatPeers(b *testing.B) {
	ctx := context.Background()
	url := pgtest.URL(b)
	srcs := map[string]string{}
	for i := range 3000 {
		srcs[fmt.Sprintf("source-%04d", i)] = "0123456789abcdef"
	}
	var ls []*lease.Leaser
	var ms []lease.Member
	for i := range 3 {
		l := lease.New(url)
		b.Cleanup(l.Close)
		m := lease.Member{ID: fmt.Sprintf("host-%d/1", i), Host: "h", PID: 1, Sources: srcs, ConfigAt: time.Now()}
		if _, err := l.HeartbeatPeers(ctx, m, time.Minute); err != nil {
			b.Fatal(err)
		}
		ls, ms = append(ls, l), append(ms, m)
	}
	b.Run("no-sources", func(b *testing.B) { // as before issue 25
		m := lease.Member{ID: "host-x/1", Host: "h", PID: 1}
		for b.Loop() {
			if _, err := ls[2].HeartbeatPeers(ctx, m, time.Minute); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("steady", func(b *testing.B) {
		for b.Loop() {
			if _, err := ls[0].HeartbeatPeers(ctx, ms[0], time.Minute); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("changed", func(b *testing.B) {
		for b.Loop() {
			ms[1].ConfigAt = ms[1].ConfigAt.Add(time.Second) // b's row changes: a reads it again
			if _, err := ls[1].HeartbeatPeers(ctx, ms[1], time.Minute); err != nil {
				b.Fatal(err)
			}
			if _, err := ls[0].HeartbeatPeers(ctx, ms[0], time.Minute); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A member's row deleted by hand while its session lives is written again
// whole at the next heartbeat, sources included.
func TestHeartbeatRewritesADeletedRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	a, b := newLeaser(t, url), newLeaser(t, url)
	ma := lease.Member{ID: "a/1", Host: "a", PID: 1, Sources: map[string]string{"x": "f1"}, ConfigAt: time.Now()}
	mb := lease.Member{ID: "b/2", Host: "b", PID: 2, Sources: map[string]string{}}
	for range 2 {
		if _, err := a.HeartbeatPeers(ctx, ma, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `DELETE FROM fleet_members`); err != nil {
		t.Fatal(err)
	}
	if _, err := a.HeartbeatPeers(ctx, ma, time.Minute); err != nil {
		t.Fatal(err)
	}
	peers, err := b.HeartbeatPeers(ctx, mb, time.Minute)
	if err != nil || len(peers) != 2 || !maps.Equal(peers[0].Sources, ma.Sources) {
		t.Fatalf("peers after the row was deleted: %+v %v", peers, err)
	}
}
