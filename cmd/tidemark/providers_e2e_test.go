package main

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/clockify/clockifytest"
	"github.com/tidemarkhq/tidemark/clients/toggl/toggltest"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
	"github.com/tidemarkhq/tidemark/internal/verify"
)

// TestE2ETogglAndClockifyThroughTheCLI checks the wiring of kind: toggl and
// kind: clockify: a config naming each fake, `tidemark sync` through the
// binary, a mirror equal to the fake, and a deletion arriving as a tombstone.
// The write rule and passes themselves are covered by internal/conformance.
func TestE2ETogglAndClockifyThroughTheCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tg := toggltest.New(toggltest.Options{})
	t.Cleanup(tg.Close)
	ckClock := fakeapi.NewClock(time.Now().UTC().Truncate(time.Second))
	ck := clockifytest.New(clockifytest.Options{NoDeletionDelay: true, Clock: ckClock.Now})
	t.Cleanup(ck.Close)

	// Stamped ten minutes ago: Clockify's feed ends two minutes before the
	// source's now.
	past := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Second)
	ckIDs := []string{}
	for i := 1; i <= 25; i++ {
		notes := fmt.Sprintf("entry %d", i)
		start := past.Add(-time.Duration(i) * time.Hour)
		stop := start.Add(90 * time.Minute)
		tg.PutTimeEntry(toggltest.TimeEntry{ID: int64(i), UserID: 7, Description: &notes, Start: start, Stop: &stop, Duration: 5400, At: past})
		id := clockifytest.NewID()
		ckIDs = append(ckIDs, id)
		ck.PutTimeEntry(clockifytest.TimeEntry{ID: id, UserID: "u1", Description: &notes, Start: start, End: &stop, CreatedAt: past, UpdatedAt: past})
	}
	e.vars = append(e.vars, "TG_TOKEN="+tg.Token(), "CK_TOKEN="+ck.Token())
	path := e.writeProviderConfig(fmt.Sprintf(`  - name: tg
    kind: toggl
    base_url: %s
    workspace_id: "%d"
    token: ${TG_TOKEN}
    rate_limit: {requests: 100, per: 1s}
    resources: [time_entries]
  - name: ck
    kind: clockify
    base_url: %s
    workspace_id: %s
    token: ${CK_TOKEN}
    rate_limit: {requests: 100, per: 1s}
    resources: [time_entries]
`, tg.URL(), tg.WorkspaceID(), ck.URL(), ck.WorkspaceID()))
	sync := func(src string) {
		t.Helper()
		if out, errOut, code := e.cli("sync", "--config", path, "--source", src, "--log-format", "json"); code != 0 {
			t.Fatalf("sync %s: exit %d\n%s%s", src, code, out, errOut)
		}
	}
	check := func(src string, truth map[string]time.Time) {
		t.Helper()
		rep, err := verify.Compare(t.Context(), e.pool, src, clients.TimeEntries, truth, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.InSync() || rep.Live == 0 {
			t.Fatalf("%s: %s %v", src, rep, rep.Examples)
		}
	}
	sync("tg")
	sync("ck")
	check("tg", tg.State().Versions(clients.TimeEntries))
	check("ck", ck.Versions(clients.TimeEntries))

	// No daemon owns the source: backfill runs here, and re-delivers
	// harmlessly what the sync already applied.
	from := clients.DateOf(past.Add(-30 * time.Hour)).String()
	to := clients.DateOf(past).String()
	out, errOut, code := e.cli("backfill", "--config", path, "--source", "tg", "--from", from, "--to", to)
	if code != 0 || !strings.Contains(out, "25 fetched, 0 inserted, 0 updated, 25 unchanged") || strings.Contains(out, "daemon") {
		t.Fatalf("local backfill: exit %d\n%s%s", code, out, errOut)
	}

	// Deletions: Toggl reports them in `since` listings, Clockify in its feed.
	tg.Delete(clients.TimeEntries, 3)
	ck.Delete(clients.TimeEntries, ckIDs[2])
	time.Sleep(1100 * time.Millisecond) // a new second for Toggl's stamps
	// Clockify's feed windows end two minutes before the source's now.
	ckClock.Advance(3 * time.Minute)
	sync("tg")
	sync("ck")
	check("tg", tg.State().Versions(clients.TimeEntries))
	check("ck", ck.Versions(clients.TimeEntries))
}

// TestE2ETogglQuotaShownInCursors spends a Toggl quota (402): the daemon
// waits for the quota window instead of failing, `cursors` says "waiting for
// quota until …", and SIGTERM still stops it at once.
func TestE2ETogglQuotaShownInCursors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tg := toggltest.New(toggltest.Options{Quota: 2, QuotaWindow: time.Hour})
	t.Cleanup(tg.Close)
	e.vars = append(e.vars, "TG_TOKEN="+tg.Token())
	path := e.writeFile("toggl.yaml", fmt.Sprintf(`database_url: ${DATABASE_URL}
sources:
  - name: tg
    kind: toggl
    base_url: %s
    workspace_id: "%d"
    token: ${TG_TOKEN}
    schedule: "@every 1m"
    rate_limit: {requests: 100, per: 1s}
    resources: [clients, projects, tasks, time_entries]
`, tg.URL(), tg.WorkspaceID()))
	d := e.daemon(path)
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _, code := e.cli("cursors", "--config", path, "--json")
		rows := decodeJSON[[]map[string]any](t, out)
		if code == 0 && len(rows) > 0 && rows[0]["waiting_reason"] == "quota" {
			if _, ok := rows[0]["waiting_until"].(string); !ok {
				t.Fatalf("no waiting_until: %v", rows[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cursors never showed the quota wait: %s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	out, _, _ := e.cli("cursors", "--config", path)
	if !strings.Contains(out, "waiting for quota until") {
		t.Fatalf("table does not show the wait:\n%s", out)
	}
	d.signal(syscall.SIGTERM)
	if code, exited := d.wait(30 * time.Second); !exited || code != 0 {
		t.Fatalf("daemon waiting for quota: exited %v code %d", exited, code)
	}
}
