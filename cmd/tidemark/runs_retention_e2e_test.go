package main

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients/simulated"
)

// TestE2ERunsRetention: the daemon prunes sync_runs by the config's `runs:`
// block (issue 15), and `tidemark runs` and `tidemark cursors` still show a
// last run of every resource afterwards.
func TestE2ERunsRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, cfg := e.acme(simulated.Params{Seed: 11}, source{})
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("runs: {keep: 24h, keep_idle: 1h}\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// Two passes per resource (the first busy, the second idle), made two
	// days old.
	for range 2 {
		if out, errs, code := e.cli("sync", "--config", cfg, "--source", "acme"); code != 0 {
			t.Fatalf("sync exited %d\n%s%s", code, out, errs)
		}
	}
	ctx := t.Context()
	if _, err := e.pool.Exec(ctx, `UPDATE sync_runs SET started_at = started_at - interval '2 days', finished_at = finished_at - interval '2 days'`); err != nil {
		t.Fatal(err)
	}
	var old int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM sync_runs`).Scan(&old); err != nil || old < 4 {
		t.Fatalf("%d runs before the daemon (%v)", old, err)
	}

	d := e.daemon(cfg)
	d.waitLog(t, "old runs deleted")
	// Of the old runs, at most the newest of each (resource, kind) is left.
	var keys, left int
	if err := e.pool.QueryRow(ctx, `SELECT count(DISTINCT (resource, kind)), count(*) FROM sync_runs WHERE started_at < now() - interval '1 day'`).Scan(&keys, &left); err != nil {
		t.Fatal(err)
	}
	if left > keys || left >= old {
		t.Fatalf("%d old runs of %d left for %d (resource, kind): want at most one each", left, old, keys)
	}

	if runs := cliJSON[[]map[string]any](t, e, "runs", "--config", cfg, "--json"); len(runs) == 0 {
		t.Fatal("tidemark runs shows no run after pruning")
	}
	for _, c := range cliJSON[[]map[string]any](t, e, "cursors", "--config", cfg, "--json") {
		if c["last_run_status"] == nil || c["last_run_started_at"] == nil {
			t.Errorf("%v: no last run after pruning: %v", c["resource"], c)
		}
	}
	d.signal(syscall.SIGTERM)
	if code, exited := d.wait(30 * time.Second); !exited || code != 0 {
		t.Fatalf("daemon exit %d (exited %v)", code, exited)
	}
}
