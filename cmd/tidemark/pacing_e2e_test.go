package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients/simulated"
	"github.com/tidemarkhq/tidemark/clients/toggl/toggltest"
	"github.com/tidemarkhq/tidemark/webhooks"
)

// `webhooks register` and `webhooks status` ask the provider on the
// source's budget: they take their send slots from the source's shared
// pacer, after the ones a daemon has taken (issue 30, item 12: they spaced
// their calls with a limiter of their own, blind to the daemon's).
func TestE2EWebhooksCommandsTakeTheSourcesSlots(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tg := toggltest.New(toggltest.Options{})
	t.Cleanup(tg.Close)
	e.vars = append(e.vars, "TG_TOKEN="+tg.Token(), webhooks.KeyEnv+"=MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
	path := e.writeFile("pace.yaml", fmt.Sprintf(`database_url: ${DATABASE_URL}
sources:
  - name: tg
    kind: toggl
    plan: premium
    base_url: %s
    workspace_id: "%d"
    token: ${TG_TOKEN}
    schedule: "0 0 1 1 *"
    rate_limit: {requests: 100, per: 1s}
    resources: [time_entries]
`, tg.URL(), tg.WorkspaceID()))
	ctx := context.Background()
	// A daemon's slots: taken up to a second from now.
	taken := func() time.Time {
		t.Helper()
		var at time.Time
		if err := e.pool.QueryRow(ctx, `INSERT INTO source_budgets (source, next_at) VALUES ('tg', clock_timestamp() + interval '1 second')
ON CONFLICT (source) DO UPDATE SET next_at = greatest(source_budgets.next_at, clock_timestamp()) + interval '1 second' RETURNING next_at`).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	after := func(at time.Time, what string) {
		t.Helper()
		var next time.Time
		if err := e.pool.QueryRow(ctx, `SELECT next_at FROM source_budgets WHERE source = 'tg'`).Scan(&next); err != nil {
			t.Fatal(err)
		}
		if !next.After(at) {
			t.Fatalf("%s took no slot of the source's shared budget: next slot %s, the daemon's end at %s", what, next, at)
		}
	}
	at := taken()
	if out, errOut, code := e.cli("webhooks", "register", "--config", path, "--source", "tg", "--url", "http://127.0.0.1:9/webhooks/tg"); code != 0 || !strings.Contains(out, "subscription") {
		t.Fatalf("register: exit %d\n%s%s", code, out, errOut)
	}
	after(at, "webhooks register")
	at = taken()
	if out, errOut, code := e.cli("webhooks", "status", "--config", path, "--json"); code != 0 {
		t.Fatalf("status: exit %d\n%s%s", code, out, errOut)
	}
	after(at, "webhooks status")
}

// Back-to-back runs of the binary, each with a new process and so a new
// pacer holding its block of slots, never put more than the budget into
// any window at the provider: the slots are the source's, in the database.
func TestE2EBackToBackSyncsKeepTheWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tr := newTracker(t, simulated.Params{Seed: 30, Users: 2, Days: 7})
	target, _ := url.Parse(tr.URL())
	var mu sync.Mutex
	var at []time.Time
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	e.vars = append(e.vars, "TEST_TOKEN="+tr.Token())
	rl := struct {
		n   int
		per time.Duration
	}{4, time.Second}
	path := e.writeFile("b2b.yaml", fmt.Sprintf(`database_url: ${DATABASE_URL}
sources:
  - name: acme
    kind: harvest
    base_url: %s%s
    account_id: "%s"
    token: ${TEST_TOKEN}
    schedule: "0 0 1 1 *"
    rate_limit: {requests: %d, per: %s}
    resources: [clients, users, projects, tasks]
`, front.URL, target.Path, tr.AccountID(), rl.n, rl.per))
	for i := range 4 {
		if out, errOut, code := e.cli("sync", "--config", path, "--source", "acme"); code != 0 {
			t.Fatalf("sync %d: exit %d\n%s%s", i, code, out, errOut)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(at) < 4*4 {
		t.Fatalf("%d requests from 4 syncs of 4 resources", len(at))
	}
	for i := range at {
		n := 0
		for j := i; j < len(at) && at[j].Sub(at[i]) < rl.per; j++ {
			n++
		}
		if n > rl.n {
			t.Fatalf("%d requests within %s from request %d (budget %d): %v", n, rl.per, i, rl.n, at)
		}
	}
}
