package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/lease"
	"github.com/tidemarkhq/tidemark/poller"
)

// simSource is a simulated source's config block, polled every second.
func simSource(name string, seed int, overlap string) string {
	return fmt.Sprintf(`  - name: %s
    kind: simulated
    simulated: {seed: %d, users: 2, days: 10}
    schedule: "@every 1s"
    overlap: %s
    resources: [clients, time_entries]
`, name, seed, overlap)
}

// runsOf counts a source's incremental runs.
func (e *env) runsOf(t *testing.T, source string) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM sync_runs WHERE source = $1 AND kind = 'incremental'`, source).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// polled waits until the source has had n more incremental runs than it had.
func (e *env) polled(t *testing.T, source string, more int) {
	t.Helper()
	was := e.runsOf(t, source)
	waitUntil(t, fmt.Sprintf("%d more runs of %s", more, source), func() bool { return e.runsOf(t, source) >= was+more })
}

// metric fetches one unlabelled series' value from a daemon's /metrics.
func metric(t *testing.T, base, name string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no %s in /metrics", name)
	}
	return string(m[1])
}

// listenOf reads the ops address from a daemon's JSON log.
func listenOf(t *testing.T, p *proc) string {
	t.Helper()
	p.waitLog(t, `"serving / (status)`)
	b, _ := os.ReadFile(p.log)
	m := regexp.MustCompile(`"listen":"([^"]+)"`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no listen address in the log")
	}
	return "http://" + string(m[1])
}

// TestE2EReloadOnSIGHUP (issue 25): under a running `tidemark run`, SIGHUP
// adds a source, changes one and removes one; the removed one is handed
// back (no more passes, its lease free). A broken config on the next
// SIGHUP is refused with the start-up error, and the running config keeps
// polling; the metric says the reload failed. SIGTERM still stops it.
func TestE2EReloadOnSIGHUP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	head := "database_url: ${DATABASE_URL}\nsources:\n"
	cfg := e.writeFile("reload.yaml", head+simSource("one", 1, "1m")+simSource("two", 2, "1m"))
	d := e.start("run", "run", "--config", cfg, "--log-format", "json", "--listen", "127.0.0.1:0")
	base := listenOf(t, d)
	e.polled(t, "one", 2)
	e.polled(t, "two", 2)

	// one changed (overlap), two removed, three added.
	e.writeFile("reload.yaml", head+simSource("one", 1, "2m")+simSource("three", 3, "1m"))
	d.signal(syscall.SIGHUP)
	d.waitLog(t, `"message":"config reloaded"`)
	for _, want := range []string{`"added":["three"]`, `"removed":["two"]`, `"changed":["one"]`} {
		d.waitLog(t, want)
	}
	e.polled(t, "three", 2)
	e.polled(t, "one", 2)
	holders, err := lease.Holders(context.Background(), e.pool, []string{poller.OwnerLease("two")})
	if err != nil || len(holders) != 0 {
		t.Fatalf("two's owner lease after its removal: %v %v", holders, err)
	}
	stopped := e.runsOf(t, "two")
	e.polled(t, "three", 2)                     // a few ticks later
	if n := e.runsOf(t, "two"); n > stopped+1 { // one may have been in flight
		t.Fatalf("two polled %d more times after its removal", n-stopped)
	}
	if v := metric(t, base, "tidemark_config_last_reload_successful"); v != "1" {
		t.Fatalf("tidemark_config_last_reload_successful %s after a good reload", v)
	}

	// `cursors` says nobody serves two any more (and who owns the others);
	// retired, two leaves the view; one, configured, cannot be retired.
	unserved := func() map[string]string {
		rows := cliJSON[[]struct {
			Source   string `json:"source"`
			Owner    string `json:"owner"`
			Unserved string `json:"unserved"`
		}](t, e, "cursors", "--config", cfg, "--json")
		m := map[string]string{}
		for _, r := range rows {
			m[r.Source] = r.Unserved
			if r.Source != "two" && (r.Owner == "" || r.Unserved != "") {
				t.Errorf("cursors: %+v", r)
			}
		}
		return m
	}
	if m := unserved(); m["two"] != "not served by any live replica" {
		t.Fatalf("cursors after two's removal: %v", m)
	}
	if out, errs, code := e.cli("cursor", "retire", "--config", cfg, "one"); code != 2 || !strings.Contains(errs, "configured on live replicas") {
		t.Fatalf("retire one: exit %d\n%s%s", code, out, errs)
	}
	if out, errs, code := e.cli("cursor", "retire", "--config", cfg, "two"); code != 0 {
		t.Fatalf("retire two: exit %d\n%s%s", code, out, errs)
	}
	if m := unserved(); len(m) != 2 {
		t.Fatalf("cursors after two was retired: %v", m)
	}

	// A broken config: refused with the error `run` gives at start, the
	// running one kept.
	e.writeFile("reload.yaml", head+simSource("one", 1, "2m")+"    bogus_key: 1\n")
	d.signal(syscall.SIGHUP)
	d.waitLog(t, `"message":"config reload refused: the running config is kept"`)
	d.waitLog(t, "bogus_key")
	e.polled(t, "three", 2)
	e.polled(t, "one", 1)
	if v := metric(t, base, "tidemark_config_last_reload_successful"); v != "0" {
		t.Fatalf("tidemark_config_last_reload_successful %s after a refused reload", v)
	}
	d.requireRunning(t)
	d.signal(syscall.SIGTERM)
	if code, exited := d.wait(30 * time.Second); !exited || code != 0 {
		t.Fatalf("after SIGTERM: exit %d (exited %v)", code, exited)
	}
}

// demoLines starts `tidemark demo` with args and DATABASE_URL on e's
// database, and returns its output lines as they come and its end.
func (e *env) demoLines(t *testing.T, env []string, args ...string) (*exec.Cmd, chan string, chan error) {
	t.Helper()
	c := e.command(context.Background(), append([]string{"demo", "--every", "1h"}, args...)...)
	c.Env = append(c.Env, env...)
	f, _ := e.logFile("demo")
	c.Stderr = f
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	lines, done := make(chan string, 1000), make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			fmt.Fprintln(f, sc.Text())
			lines <- sc.Text()
		}
		close(lines)
		done <- c.Wait()
		f.Close()
	}()
	t.Cleanup(func() { c.Process.Kill() })
	return c, lines, done
}

func drain(lines chan string) {
	for range lines {
	}
}

// waitLine reads lines until one contains s; it returns those read.
func waitLine(t *testing.T, lines chan string, s string) []string {
	t.Helper()
	var seen []string
	deadline := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("output ended before %q:\n%s", s, strings.Join(seen, "\n"))
			}
			if seen = append(seen, l); strings.Contains(l, s) {
				return seen
			}
		case <-deadline:
			t.Fatalf("no %q within 60 s:\n%s", s, strings.Join(seen, "\n"))
		}
	}
}

// TestE2EDemoBesideADaemon is issue 25's scenario with two processes: a
// daemon polls "agency" on a database; `tidemark demo` with DATABASE_URL
// set to that database uses its own throwaway PostgreSQL (and says so on
// its first line); with --use-database-url it refuses (exit 2, why and how
// to override); with --allow-shared-database it runs there, does not take
// agency, and removes its rows when it stops. agency is polled by the
// daemon throughout.
func TestE2EDemoBesideADaemon(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.writeFile("prod.yaml", "database_url: ${DATABASE_URL}\nsources:\n"+simSource("agency", 5, "1m"))
	d := e.daemon(cfg)
	e.polled(t, "agency", 2)
	owner := func() string {
		h, err := lease.Holders(context.Background(), e.pool, []string{poller.OwnerLease("agency")})
		if err != nil {
			t.Fatal(err)
		}
		return h[poller.OwnerLease("agency")]
	}
	daemonOwner := owner()
	if daemonOwner == "" || strings.Contains(daemonOwner, "not a fleet member") {
		t.Fatalf("agency's owner: %q", daemonOwner)
	}

	// DATABASE_URL set, no flag: a throwaway PostgreSQL of its own.
	tmp := clusterTmp(t)
	c, lines, done := e.demoLines(t, []string{"TMPDIR=" + tmp})
	seen := waitLine(t, lines, "Running the daemon")
	if !strings.HasPrefix(seen[0], "DATABASE_URL is set, but the demo uses a throwaway PostgreSQL") {
		t.Fatalf("first line: %q", seen[0])
	}
	e.polled(t, "agency", 2)
	_ = c.Process.Signal(os.Interrupt)
	go drain(lines)
	if err := <-done; exitCodeOf(err) != 0 {
		t.Fatalf("demo exited %d", exitCodeOf(err))
	}

	// --use-database-url on the daemon's database: refused.
	out, errOut, code := e.cli("demo", "--use-database-url")
	if code != 2 || !strings.HasPrefix(out, "Using the database in DATABASE_URL (") ||
		!strings.Contains(errOut, "other sources (agency)") || !strings.Contains(errOut, daemonOwner) ||
		!strings.Contains(errOut, "--allow-shared-database") {
		t.Fatalf("demo --use-database-url: exit %d\n%s%s", code, out, errOut)
	}

	// Forced: it runs beside the daemon, which keeps agency; its rows go
	// when it stops.
	c, lines, done = e.demoLines(t, nil, "--use-database-url", "--allow-shared-database")
	waitLine(t, lines, "Running the daemon")
	waitUntil(t, "the demo's first pass", func() bool { return e.runsOf(t, "demo") > 0 })
	e.polled(t, "agency", 2)
	if o := owner(); o != daemonOwner {
		t.Fatalf("agency's owner with the demo running: %q, want %q", o, daemonOwner)
	}
	_ = c.Process.Signal(os.Interrupt)
	seen = waitLine(t, lines, "Removed the demo's")
	go drain(lines)
	if err := <-done; exitCodeOf(err) != 0 {
		t.Fatalf("demo exited %d: %s", exitCodeOf(err), seen[len(seen)-1])
	}
	var left int
	if err := e.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM time_entries WHERE source = 'demo') + (SELECT count(*) FROM cursors WHERE source = 'demo')`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("demo rows left: %d %v", left, err)
	}
	e.polled(t, "agency", 2)
	d.requireRunning(t)
}

// Issue 30, S2: a database holding another application's table with a
// source column is refused by `demo --use-database-url` (exit 2, naming
// the table and the flag); with --allow-foreign-tables the demo runs there
// and, when it stops, removes its rows from Tidemark's tables only: the
// other application's rows with source 'demo' stay.
func TestE2EDemoLeavesForeignTablesAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `CREATE TABLE crm_contacts (source text, name text);
INSERT INTO crm_contacts VALUES ('demo', 'Ada'), ('demo', 'Grace'), ('web', 'Linus')`); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := e.cli("demo", "--use-database-url")
	if code != 2 || !strings.Contains(errOut, "crm_contacts") || !strings.Contains(errOut, "--allow-foreign-tables") {
		t.Fatalf("demo --use-database-url beside a foreign table: exit %d\n%s%s", code, out, errOut)
	}
	c, lines, done := e.demoLines(t, nil, "--use-database-url", "--allow-foreign-tables")
	waitLine(t, lines, "Running the daemon")
	waitUntil(t, "the demo's first pass", func() bool { return e.runsOf(t, "demo") > 0 })
	_ = c.Process.Signal(os.Interrupt)
	waitLine(t, lines, "Removed the demo's")
	go drain(lines)
	if err := <-done; exitCodeOf(err) != 0 {
		t.Fatalf("demo exited %d", exitCodeOf(err))
	}
	var theirs, ours int
	if err := e.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM crm_contacts WHERE source = 'demo'), (SELECT count(*) FROM time_entries WHERE source = 'demo')`).Scan(&theirs, &ours); err != nil {
		t.Fatal(err)
	}
	if theirs != 2 || ours != 0 {
		t.Fatalf("after the demo: %d of the other application's demo rows (want 2), %d of the demo's time entries (want 0)", theirs, ours)
	}
}
