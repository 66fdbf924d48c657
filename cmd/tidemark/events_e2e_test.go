package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/simulated"
	"github.com/tidemarkhq/tidemark/events"
)

// TestE2EEventsKill9: daemons with `events: on`, killed with SIGKILL at
// random moments (mid-page included) while the tracker churns, then a
// backfill over everything: the feed holds, per record, only real changes
// (no two consecutive events of a record with the same version and content,
// versions never going back), each with the id derived from its change, and
// each record's last event is the row as the mirror holds it. `events tail`
// acknowledges every event once.
func TestE2EEventsKill9(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tr := newTracker(t, simulated.Params{Seed: 13})
	cfg := e.writeConfig(source{name: "acme", tr: tr, reconcile: true, events: true})
	stop := churn(tr, 100*time.Millisecond, 5)
	defer stop()
	e.killDaemons(cfg, 4, rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 13)), 50*time.Millisecond, 751*time.Millisecond)
	d := e.daemon(cfg)
	time.Sleep(2 * time.Second)
	stop()
	e.waitConverged(tr, "acme", 30*time.Second, inSync)
	time.Sleep(3 * time.Second) // a reconcile after convergence: nothing to change
	before := countEvents(t, e)

	today := clients.DateOf(tr.Now().UTC())
	if out, errs, code := e.cli("backfill", "--config", cfg, "--source", "acme",
		"--from", today.AddDays(-70).String(), "--to", today.AddDays(1).String(), "--window-days", "10"); code != 0 {
		t.Fatalf("backfill exited %d\n%s%s", code, out, errs)
	}
	if after := countEvents(t, e); after != before {
		t.Fatalf("a backfill of unchanged records appended %d events", after-before)
	}
	checkFeedMatchesMirror(t, e)

	out, errs, code := e.cli("events", "tail", "--consumer", "e2e", "--json")
	if code != 0 {
		t.Fatalf("events tail exited %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != before {
		t.Fatalf("tail printed %d events, the feed has %d", len(lines), before)
	}
	var ev events.Event
	if err := json.Unmarshal([]byte(lines[0]), &ev); err != nil || !strings.HasPrefix(ev.ID, "evt_") || ev.Seq == 0 {
		t.Fatalf("first line %q: %v", lines[0], err)
	}
	if out, _, code := e.cli("events", "tail", "--consumer", "e2e", "--json"); code != 0 || strings.TrimSpace(out) != "" {
		t.Fatalf("second tail: exit %d, %q", code, out)
	}
	out, _, _ = e.cli("events", "consumers")
	if !strings.Contains(out, "e2e") || !strings.Contains(out, "active") {
		t.Fatalf("consumers: %q", out)
	}
	if !d.running() {
		t.Fatal("the daemon exited")
	}
}

func countEvents(t *testing.T, e *env) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM events`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no events")
	}
	return n
}

// checkFeedMatchesMirror checks the feed against the mirror tables.
func checkFeedMatchesMirror(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	type key struct{ resource, id string }
	type state struct {
		version time.Time
		hash    []byte
		kind    string
	}
	rows, err := e.pool.Query(ctx, `SELECT event_id, source, resource, record_id, kind, version, content_hash FROM events ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	last := map[key]state{}
	var id pgtype.UUID
	var c events.Change
	var res, kind string
	var hash []byte
	n := 0
	_, err = pgx.ForEachRow(rows, []any{&id, &c.Source, &res, &c.RecordID, &kind, &c.Version, &hash}, func() error {
		n++
		c.Resource = clients.Resource(res)
		copy(c.Hash[:], hash)
		if id.Bytes != c.ID() && id.Bytes != c.NthID(1) && id.Bytes != c.NthID(2) {
			t.Errorf("event %s of %s/%s is not derived from its change", events.FormatID(id.Bytes), res, c.RecordID)
		}
		k := key{res, c.RecordID}
		if p, ok := last[k]; ok {
			if c.Version.Before(p.version) {
				t.Errorf("%s/%s: event at version %s after one at %s", res, c.RecordID, c.Version, p.version)
			}
			if c.Version.Equal(p.version) && string(hash) == string(p.hash) {
				t.Errorf("%s/%s: two consecutive events of one state: a re-delivery made an event", res, c.RecordID)
			}
		} else if kind != "created" {
			t.Errorf("%s/%s: first event is %s", res, c.RecordID, kind)
		}
		last[k] = state{c.Version, append([]byte(nil), hash...), kind}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mirrored := 0
	for _, r := range []string{"clients", "users", "projects", "tasks", "time_entries"} {
		rows, err := e.pool.Query(ctx, `SELECT id, updated_at, content_hash, deleted_at IS NOT NULL FROM `+r)
		if err != nil {
			t.Fatal(err)
		}
		var rid string
		var v time.Time
		var h []byte
		var deleted bool
		_, err = pgx.ForEachRow(rows, []any{&rid, &v, &h, &deleted}, func() error {
			mirrored++
			s, ok := last[key{r, rid}]
			switch {
			case !ok:
				t.Errorf("%s/%s: mirrored, no event", r, rid)
			case !s.version.Equal(v) || string(s.hash) != string(h):
				t.Errorf("%s/%s: last event is not the row as mirrored", r, rid)
			case deleted != (s.kind == "deleted"):
				t.Errorf("%s/%s: deleted %v, last event %s", r, rid, deleted, s.kind)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d events for %d mirrored rows", n, mirrored)
}

// TestE2EEventsDaemonWebhooks: the daemon with `events: on` and a webhook
// in change_feed delivers every event to the endpoint once (verified with
// the Standard Webhooks reference library), `events tail --follow` prints
// them as they commit, and /metrics carries the consumers' position age.
func TestE2EEventsDaemonWebhooks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tr := newTracker(t, simulated.Params{Seed: 14, Users: 3, Days: 10})
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := wh.Verify(body, r.Header); err != nil {
			t.Errorf("delivery does not verify: %v", err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		mu.Lock()
		got[r.Header.Get("webhook-id")]++
		mu.Unlock()
	}))
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	ln.Close()
	cfg := e.writeConfig(source{name: "acme", tr: tr, events: true})
	b, _ := os.ReadFile(cfg)
	e.writeFile("tidemark.yaml", string(b)+fmt.Sprintf(`listen: %s
change_feed:
  retention: 72h
  webhooks:
    - name: billing
      url: %s
      secrets: [%s]
`, listen, srv.URL, secret))
	tail := e.start("tail", "events", "tail", "--consumer", "follower", "--follow", "--json")
	d := e.daemon(cfg)
	e.waitConverged(tr, "acme", 60*time.Second, inSync)
	deadline := time.Now().Add(60 * time.Second)
	var n int
	for {
		if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM events`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		delivered := len(got)
		mu.Unlock()
		if n > 0 && delivered == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events delivered", delivered, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	mu.Lock()
	for id, k := range got {
		if k != 1 {
			t.Errorf("%s delivered %d times to an endpoint that always accepts", id, k)
		}
	}
	mu.Unlock()
	waitLines := time.Now().Add(30 * time.Second)
	for {
		out, _ := os.ReadFile(tail.log)
		lines := 0
		for l := range strings.SplitSeq(string(out), "\n") {
			if strings.HasPrefix(l, `{"seq":`) {
				lines++
			}
		}
		if lines == n {
			break
		}
		if time.Now().After(waitLines) {
			t.Fatalf("tail --follow printed %d of %d events", lines, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	resp, err := http.Get("http://" + listen + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{`tidemark_events_position_age_seconds{consumer="billing"}`, `tidemark_events_position_age_horizon_ratio{consumer="follower"}`, "tidemark_events_retention_seconds 259200"} {
		if !strings.Contains(string(metrics), m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	if !d.running() {
		t.Fatal("the daemon exited")
	}
}
