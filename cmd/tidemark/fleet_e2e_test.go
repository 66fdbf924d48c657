package main

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients/simulated"
)

// Two `tidemark run` processes on one database share four sources, and
// `cursors` names each source's owner; one killed with SIGKILL, the other
// owns all four within two heartbeats (5 s each) and a margin.
func TestE2EFleetSharesAndCursorsShowOwners(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tr := newTracker(t, simulated.Params{Seed: 11})
	cfg := e.writeConfig(source{name: "s1", tr: tr}, source{name: "s2", tr: tr}, source{name: "s3", tr: tr}, source{name: "s4", tr: tr})
	a, b := e.daemon(cfg), e.daemon(cfg)
	owners := func() map[string]string {
		out, errOut, code := e.cli("cursors", "--config", cfg, "--json")
		if code != 0 {
			t.Fatalf("cursors: exit %d: %s", code, errOut)
		}
		var rows []struct {
			Source string `json:"source"`
			Owner  string `json:"owner"`
		}
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, r := range rows {
			m[r.Source] = r.Owner
		}
		return m
	}
	shares := func(m map[string]string) map[string]int {
		n := map[string]int{}
		for _, o := range m {
			if o != "" {
				n[o]++
			}
		}
		return n
	}
	settle := func(what string, members int, within time.Duration) map[string]string {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			m := owners()
			n := shares(m)
			ok := len(m) == 4 && len(n) == members
			for _, c := range n {
				ok = ok && c <= (4+members-1)/members+1
			}
			for _, o := range m {
				ok = ok && strings.Contains(o, "/") // host/pid: a fleet member
			}
			if ok {
				t.Logf("%s: owners %v", what, m)
				return m
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: owners %v after %v", what, m, within)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	settle("two replicas", 2, 30*time.Second)
	b.signal(syscall.SIGKILL)
	b.wait(10 * time.Second)
	settle("one killed", 1, 2*5*time.Second+5*time.Second)
	if !a.running() {
		t.Fatal("the surviving replica stopped")
	}
}
