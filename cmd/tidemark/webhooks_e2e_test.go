package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/clockify/clockifytest"
	"github.com/tidemarkhq/tidemark/clients/toggl/toggltest"
	"github.com/tidemarkhq/tidemark/webhooks"
)

// TestE2EWebhooksThroughTheCLI: `webhooks register` against each fake, the
// fake's PING answered by the daemon, a change at each fake in the mirror
// through its webhook (the schedule is a year away), `webhooks status`,
// `webhooks conflicts` and the last webhook in `cursors`.
func TestE2EWebhooksThroughTheCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tg := toggltest.New(toggltest.Options{})
	t.Cleanup(tg.Close)
	ck := clockifytest.New(clockifytest.Options{NoDeletionDelay: true})
	t.Cleanup(ck.Close)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := l.Addr().String()
	l.Close()
	e.vars = append(e.vars, "TG_TOKEN="+tg.Token(), "CK_TOKEN="+ck.Token())
	path := e.writeFile("webhooks.yaml", fmt.Sprintf(`database_url: ${DATABASE_URL}
listen: %s
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
  - name: ck
    kind: clockify
    plan: paid
    base_url: %s
    workspace_id: %s
    token: ${CK_TOKEN}
    schedule: "0 0 1 1 *"
    resources: [time_entries]
`, listen, tg.URL(), tg.WorkspaceID(), ck.URL(), ck.WorkspaceID()))
	hook := func(src string) string { return "http://" + listen + "/webhooks/" + src }

	_, errOut, code := e.cli("webhooks", "register", "--config", path, "--source", "tg", "--url", hook("tg"))
	if code != 2 || !strings.Contains(errOut, webhooks.KeyEnv) {
		t.Fatalf("register without the key: exit %d: %s", code, errOut)
	}
	e.vars = append(e.vars, webhooks.KeyEnv+"=MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
	e.daemon(path)
	waitUntil(t, "the daemon's listener", func() bool {
		resp, err := http.Get("http://" + listen + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	for _, src := range []string{"tg", "ck"} {
		out, errOut, code := e.cli("webhooks", "register", "--config", path, "--source", src, "--url", hook(src))
		if code != 0 || !strings.Contains(out, "created subscription") {
			t.Fatalf("register %s: exit %d\n%s%s", src, code, out, errOut)
		}
	}
	waitUntil(t, "Toggl's PING answered", func() bool {
		s := tg.Subscriptions()
		return len(s) == 1 && s[0].ValidatedAt != nil
	})
	if n := len(ck.Webhooks()); n != len(webhooks.ClockifyEvents[clients.TimeEntries]) {
		t.Fatalf("clockify webhooks: %d", n)
	}
	if out, _, code := e.cli("webhooks", "register", "--config", path, "--source", "tg", "--url", hook("tg")); code != 0 || !strings.Contains(out, "checked subscription") {
		t.Fatalf("register again: %d %s", code, out)
	}

	notes := "via webhook"
	start := time.Now().UTC().Add(-3 * time.Hour).Truncate(time.Second)
	stop := start.Add(time.Hour)
	tg.PutTimeEntry(toggltest.TimeEntry{ID: 42, UserID: 7, Description: &notes, Start: start, Stop: &stop, Duration: 3600})
	// Clockify's feed ends two minutes before its now: a change stamped
	// earlier is one the targeted pass can see.
	past := time.Now().UTC().Add(-10 * time.Minute)
	ck.PutTimeEntry(clockifytest.TimeEntry{ID: clockifytest.NewID(), UserID: "u1", Description: &notes, Start: start, End: &stop, CreatedAt: past, UpdatedAt: past})
	for _, src := range []string{"tg", "ck"} {
		waitUntil(t, src+"'s entry in the mirror", func() bool {
			var n int
			e.pool.QueryRow(context.Background(), `SELECT count(*) FROM time_entries WHERE source = $1 AND notes = $2`, src, notes).Scan(&n)
			return n == 1
		})
	}

	out, errOut, code := e.cli("webhooks", "status", "--config", path, "--json")
	delivered := map[string]bool{}
	for _, s := range decodeJSON[[]subStatusJSON](t, out) {
		if s.Provider != "enabled" {
			t.Fatalf("status of %s/%s: %s", s.Source, s.Subscription, s.Provider)
		}
		delivered[s.Source+"/"+s.Events[0]] = s.LastDeliveryAt != nil && s.Deliveries > 0
	}
	if code != 0 || !delivered["tg/time_entry"] || !delivered["ck/NEW_TIME_ENTRY"] || len(delivered) != 5 {
		t.Fatalf("status: exit %d %v\n%s%s", code, delivered, out, errOut)
	}

	// The same event id with another payload: a conflict for a person.
	body := `{"event_id":1,"payload":{"id":42,"description":"tampered"},"metadata":{"model":"time_entry"}}`
	req, _ := http.NewRequest(http.MethodPost, hook("tg"), strings.NewReader(body))
	req.Header.Set(webhooks.TogglSignatureHeader, webhooks.TogglSign(tg.Subscriptions()[0].Secret, []byte(body)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("conflicting delivery: %v %v", resp, err)
	}
	resp.Body.Close()
	out, _, code = e.cli("webhooks", "conflicts", "--config", path)
	if code != 0 || !strings.Contains(out, "toggl:1") {
		t.Fatalf("conflicts: %d\n%s", code, out)
	}
	var n int
	e.pool.QueryRow(context.Background(), `SELECT count(*) FROM time_entries WHERE notes = 'tampered'`).Scan(&n)
	if n != 0 {
		t.Fatal("a conflicting payload reached the mirror")
	}
	out, _, code = e.cli("cursors", "--config", path)
	if code != 0 || !strings.Contains(out, "tg: last webhook") || !strings.Contains(out, "ck: last webhook") {
		t.Fatalf("cursors: %d\n%s", code, out)
	}
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
