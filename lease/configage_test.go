package lease_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/lease"
)

// TestNewerConfigIsPerSource (issue 30, item 8): of two members with
// different configs of one source, the config that appeared later serves
// it. A member reloaded for another source, or restarted, with its older
// config of s, does not take s back: the time is the source config's, not
// the member's load time.
func TestNewerConfigIsPerSource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	a, b := newLeaser(t, url), newLeaser(t, url)
	t0 := time.Now()
	ma := lease.Member{ID: "a/1", Host: "a", PID: 1, Sources: map[string]string{"s": "old", "u": "1"}, ConfigAt: t0}
	mb := lease.Member{ID: "b/2", Host: "b", PID: 2, Sources: map[string]string{"s": "new"}, ConfigAt: t0.Add(time.Second)}
	servers := func(what string, l *lease.Leaser, m lease.Member) {
		t.Helper()
		peers, err := l.HeartbeatPeers(ctx, m, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if got := lease.Servers(peers)["s"]; !slices.Equal(got, []string{"b/2"}) {
			t.Errorf("%s: s served by %v, want b/2 (the newer config of s)", what, got)
		}
	}
	if _, err := a.HeartbeatPeers(ctx, ma, time.Minute); err != nil {
		t.Fatal(err)
	}
	servers("b's newer config", b, mb)
	// a reloads: u changed, s did not.
	ma.Sources, ma.ConfigAt = map[string]string{"s": "old", "u": "2"}, t0.Add(time.Minute)
	servers("a reloaded for u", a, ma)
	servers("a reloaded for u, seen by b", b, mb)
	// a restarts with the same config: a new member, loaded now.
	a.Close()
	a2 := newLeaser(t, url)
	ma2 := lease.Member{ID: "a/3", Host: "a", PID: 3, Sources: map[string]string{"s": "old", "u": "2"}, ConfigAt: t0.Add(2 * time.Minute)}
	servers("a restarted", a2, ma2)
	// A config of s newer than b's, on a: a serves it.
	ma2.Sources = map[string]string{"s": "newest", "u": "2"}
	peers, err := a2.HeartbeatPeers(ctx, ma2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := lease.Servers(peers)["s"]; !slices.Equal(got, []string{"a/3"}) {
		t.Errorf("a's newest config of s: served by %v, want a/3", got)
	}
}
