package main

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

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
