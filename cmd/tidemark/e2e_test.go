package main

// End-to-end tests: the built binary against the simulated tracker (in this
// test process, so that it outlives a killed daemon) and a real Postgres.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/harvest/harvesttest"
	"github.com/tidemarkhq/tidemark/clients/simulated"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/internal/verify"
)

// binary is the tidemark binary built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	// pgtest.Main exits the process, so the build directory cannot be
	// removed afterwards; it is small and lives under the system temp dir.
	dir, err := os.MkdirTemp("", "tidemark-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(2)
	}
	binary = filepath.Join(dir, "tidemark")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go build: %v\n%s", err, out)
		os.Exit(2)
	}
	pgtest.Main(m)
}

// ---- harness ----------------------------------------------------------------

// env is one test's world: a database, a config, the processes it started
// and their logs (printed when the test fails).
type env struct {
	t     *testing.T
	dir   string
	dbURL string
	pool  *pgxpool.Pool
	vars  []string // extra environment (tokens)

	mu   sync.Mutex
	logs []string // files holding the output of every process started
	seq  int
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), dbURL: pgtest.URL(t)}
	pool, err := pgxpool.New(context.Background(), e.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e.pool = pool
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, f := range e.logs {
			b, _ := os.ReadFile(f)
			lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			if len(lines) > 150 {
				lines = append([]string{fmt.Sprintf("... (%d lines before)", len(lines)-150)}, lines[len(lines)-150:]...)
			}
			t.Logf("==== %s ====\n%s", filepath.Base(f), strings.Join(lines, "\n"))
		}
	})
	return e
}

func newTracker(t *testing.T, p simulated.Params) *simulated.Tracker {
	t.Helper()
	p.Users = max(p.Users, 10)
	p.Days = max(p.Days, 60)
	p.NoRateLimit = true
	tr, err := simulated.New(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return tr
}

// churn runs the tracker's mutation stream until the returned stop is called
// (stop waits for the last mutation).
func churn(tr *simulated.Tracker, every time.Duration, perTick int) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = tr.Run(ctx, every, perTick) }()
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }
}

// source is one source of a test config.
type source struct {
	name     string
	tr       *simulated.Tracker
	tokenVar string // default TEST_TOKEN (the tracker's token)
	overlap  string // default 5s
	// reconcile on: "@every 2s" over 400 days (the history covers them).
	reconcile bool
	timeout   string
}

// writeConfig writes a config for srcs and returns its path. Tokens are
// ${VAR} references; the variables are set on every process started.
func (e *env) writeConfig(srcs ...source) string {
	e.t.Helper()
	var b strings.Builder
	b.WriteString("database_url: ${DATABASE_URL}\nsources:\n")
	for _, s := range srcs {
		tv := s.tokenVar
		if tv == "" {
			tv = "TEST_TOKEN"
			e.vars = append(e.vars, "TEST_TOKEN="+s.tr.Token())
		}
		ov := s.overlap
		if ov == "" {
			ov = "5s"
		}
		fmt.Fprintf(&b, `  - name: %s
    kind: harvest
    base_url: %s
    account_id: "%s"
    token: ${%s}
    schedule: "@every 1s"
    overlap: %s
    rate_limit: {requests: 1000, per: 1s}
    resources: [clients, users, projects, tasks, time_entries]
    backfill: {window_days: 7}
`, s.name, s.tr.URL(), s.tr.AccountID(), tv, ov)
		if s.reconcile {
			b.WriteString("    reconcile: {schedule: \"@every 2s\", lookback_days: 400, max_tombstones: 100000}\n")
		}
		if s.timeout != "" {
			fmt.Fprintf(&b, "    timeout: %s\n", s.timeout)
		}
	}
	path := filepath.Join(e.dir, "tidemark.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return path
}

func (e *env) logFile(name string) (*os.File, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq++
	path := filepath.Join(e.dir, fmt.Sprintf("%02d-%s.log", e.seq, name))
	f, err := os.Create(path)
	if err != nil {
		e.t.Fatal(err)
	}
	e.logs = append(e.logs, path)
	return f, path
}

func (e *env) command(ctx context.Context, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, binary, args...)
	c.Env = append(os.Environ(), "DATABASE_URL="+e.dbURL)
	c.Env = append(c.Env, e.vars...)
	return c
}

// proc is a started tidemark process.
type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// start starts tidemark with args, its stdout and stderr going to a log
// file. The process is killed when the test ends.
func (e *env) start(name string, args ...string) *proc {
	e.t.Helper()
	f, path := e.logFile(name)
	c := e.command(context.Background(), args...)
	c.Stdout, c.Stderr = f, f
	if err := c.Start(); err != nil {
		e.t.Fatal(err)
	}
	p := &proc{cmd: c, log: path, done: make(chan struct{})}
	go func() { p.err = c.Wait(); f.Close(); close(p.done) }()
	e.t.Cleanup(func() { p.cmd.Process.Kill(); <-p.done })
	return p
}

// daemon starts `tidemark run` on cfg with JSON logs.
func (e *env) daemon(cfg string) *proc {
	e.t.Helper()
	return e.start("run", "run", "--config", cfg, "--log-format", "json")
}

func (p *proc) signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// wait waits for the process to exit and returns its exit code (-1 when a
// signal killed it); exited is false when it still runs after d.
func (p *proc) wait(d time.Duration) (code int, exited bool) {
	select {
	case <-p.done:
		return exitCodeOf(p.err), true
	case <-time.After(d):
		return 0, false
	}
}

func exitCodeOf(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	default:
		return -2
	}
}

// cli runs a tidemark command to completion and returns its stdout, stderr
// and exit code. stderr is also kept in the test's logs.
func (e *env) cli(args ...string) (stdout, stderr string, code int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := e.command(ctx, args...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	f, _ := e.logFile(args[0])
	fmt.Fprintf(f, "$ tidemark %s\n%s%s", strings.Join(args, " "), out.String(), errb.String())
	f.Close()
	return out.String(), errb.String(), exitCodeOf(err)
}

// compare compares every resource of source with the tracker's truth.
func compare(t *testing.T, pool *pgxpool.Pool, tr *simulated.Tracker, src string) ([]verify.Report, error) {
	t.Helper()
	truth := tr.Truth()
	var reps []verify.Report
	for _, r := range clients.AllResources {
		rep, err := verify.Compare(context.Background(), pool, src, r, truth.Versions(r), time.Time{})
		if err != nil {
			return nil, err
		}
		reps = append(reps, rep)
	}
	return reps, nil
}

// inSync is the full convergence check: nothing missing, stale, ahead or
// left undeleted.
func inSync(r verify.Report) bool { return r.InSync() }

// nothingLost ignores deletions not yet reconciled.
func nothingLost(r verify.Report) bool { return r.Missing+r.Stale+r.Ahead == 0 }

// waitConverged polls until every resource of src passes ok, or fails the
// test at the deadline with the last reports.
func (e *env) waitConverged(tr *simulated.Tracker, src string, within time.Duration, ok func(verify.Report) bool) time.Duration {
	e.t.Helper()
	start := time.Now()
	deadline := start.Add(within)
	for {
		reps, err := compare(e.t, e.pool, tr, src)
		if err != nil {
			e.t.Fatal(err)
		}
		all := true
		for _, r := range reps {
			all = all && ok(r)
		}
		if all {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, r := range reps {
				fmt.Fprintf(&b, "\n  %s %v", r, r.Examples)
			}
			e.t.Fatalf("source %s did not converge within %s:%s", src, within, b.String())
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// ---- the regression sampler --------------------------------------------------

type rowVersion struct{ updated, fetched time.Time }

func (v rowVersion) before(w rowVersion) bool {
	return v.updated.Before(w.updated) || (v.updated.Equal(w.updated) && v.fetched.Before(w.fetched))
}

// sampler reads every time entry's (updated_at, fetched_at) and every
// cursor's high water about every 100 ms and records any that went back:
// no row ever regresses, no row disappears, no cursor moves back.
type sampler struct {
	stop    chan struct{}
	done    chan struct{}
	rounds  int
	faults  []string
	maxRows int
}

func startSampler(t *testing.T, pool *pgxpool.Pool, src string) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		rows := map[string]rowVersion{}
		cursors := map[string]time.Time{}
		fault := func(format string, args ...any) {
			if len(s.faults) < 20 {
				s.faults = append(s.faults, fmt.Sprintf(format, args...))
			}
		}
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			seen, err := s.round(ctx, pool, src, rows, cursors, fault)
			cancel()
			if err == nil {
				s.rounds++
				s.maxRows = max(s.maxRows, seen)
			}
			select {
			case <-s.stop:
				return
			case <-tk.C:
			}
		}
	}()
	t.Cleanup(s.halt)
	return s
}

func (s *sampler) round(ctx context.Context, pool *pgxpool.Pool, src string, rows map[string]rowVersion,
	cursors map[string]time.Time, fault func(string, ...any)) (int, error) {
	// One snapshot for the rows and the cursors.
	tx, err := pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"); err != nil {
		return 0, err
	}
	rs, err := tx.Query(ctx, "SELECT id, updated_at, fetched_at FROM time_entries WHERE source = $1", src)
	if err != nil {
		return 0, err
	}
	n := 0
	for rs.Next() {
		var id string
		var v rowVersion
		if err := rs.Scan(&id, &v.updated, &v.fetched); err != nil {
			return 0, err
		}
		n++
		if prev, ok := rows[id]; ok && v.before(prev) {
			fault("time entry %s went back from (%s, %s) to (%s, %s)", id,
				prev.updated.Format(time.RFC3339Nano), prev.fetched.Format(time.RFC3339Nano),
				v.updated.Format(time.RFC3339Nano), v.fetched.Format(time.RFC3339Nano))
		}
		rows[id] = v
	}
	if err := rs.Err(); err != nil {
		return 0, err
	}
	if n < len(rows) {
		fault("time entries: %d rows, %d seen before (a row vanished)", n, len(rows))
	}
	cs, err := tx.Query(ctx, "SELECT resource, high_water FROM cursors WHERE source = $1 AND high_water IS NOT NULL", src)
	if err != nil {
		return 0, err
	}
	for cs.Next() {
		var r string
		var hw time.Time
		if err := cs.Scan(&r, &hw); err != nil {
			return 0, err
		}
		if prev, ok := cursors[r]; ok && hw.Before(prev) {
			fault("cursor %s/%s went back from %s to %s", src, r, prev.Format(time.RFC3339Nano), hw.Format(time.RFC3339Nano))
		}
		cursors[r] = hw
	}
	return n, cs.Err()
}

func (s *sampler) halt() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

// check stops the sampler and fails the test on any regression.
func (s *sampler) check(t *testing.T) {
	t.Helper()
	s.halt()
	if s.rounds < 10 || s.maxRows == 0 {
		t.Fatalf("sampler: only %d rounds, at most %d rows: it proves nothing", s.rounds, s.maxRows)
	}
	for _, f := range s.faults {
		t.Error("regression: " + f)
	}
	t.Logf("sampler: %d rounds, up to %d rows, %d regressions", s.rounds, s.maxRows, len(s.faults))
}

// noDuplicates checks one row per (source, id) in every resource table.
func noDuplicates(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	for _, table := range []string{"time_entries", "projects", "clients", "users", "tasks"} {
		var n, d int
		if err := pool.QueryRow(context.Background(),
			"SELECT count(*), count(DISTINCT (source, id)) FROM "+table).Scan(&n, &d); err != nil {
			t.Fatal(err)
		}
		if n != d {
			t.Errorf("%s: %d rows for %d distinct ids", table, n, d)
		}
	}
}

// ---- 1. churn, then convergence ------------------------------------------------

func TestE2EChurnConverges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tr := newTracker(t, simulated.Params{Seed: 1})
	cfg := e.writeConfig(source{name: "acme", tr: tr, reconcile: true})
	d := e.daemon(cfg)
	stop := churn(tr, 100*time.Millisecond, 5)
	time.Sleep(6 * time.Second)
	stop()
	took := e.waitConverged(tr, "acme", 30*time.Second, inSync)
	t.Logf("converged %s after the churn stopped", took.Round(time.Millisecond))
	if !d.running() {
		t.Fatal("the daemon exited")
	}
	noDuplicates(t, e.pool)
}

// ---- 2. kill -9 at random moments -------------------------------------------

func TestE2EKill9(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tr := newTracker(t, simulated.Params{Seed: 2})
	cfg := e.writeConfig(source{name: "acme", tr: tr, reconcile: true})
	s := startSampler(t, e.pool, "acme")
	stop := churn(tr, 100*time.Millisecond, 5)
	defer stop()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	for i := range 5 {
		d := e.daemon(cfg)
		life := time.Duration(50+rng.IntN(751)) * time.Millisecond
		time.Sleep(life)
		d.signal(syscall.SIGKILL)
		if _, exited := d.wait(10 * time.Second); !exited {
			t.Fatalf("restart %d: still running after SIGKILL", i)
		}
		t.Logf("restart %d: killed after %s", i, life)
	}
	finalStart := time.Now()
	d := e.daemon(cfg)
	time.Sleep(2 * time.Second)
	stop()
	took := e.waitConverged(tr, "acme", 30*time.Second, inSync)
	t.Logf("converged %s after the churn stopped", took.Round(time.Millisecond))
	s.check(t)
	noDuplicates(t, e.pool)

	// Runs the killed processes left running are marked abandoned by the
	// last daemon; none stays "running".
	var left, abandoned int
	if err := e.pool.QueryRow(context.Background(), `
		SELECT count(*) FILTER (WHERE status = 'running'),
		       count(*) FILTER (WHERE status = 'failed' AND error = $2)
		FROM sync_runs WHERE source = 'acme' AND started_at < $1`, finalStart, "abandoned (process ended)").Scan(&left, &abandoned); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("sync_runs: %d runs of killed processes still running", left)
	}
	t.Logf("sync_runs: %d runs abandoned by killed processes", abandoned)
	if !d.running() {
		t.Fatal("the daemon exited")
	}
}

// ---- 3. a source clock behind ours --------------------------------------------

func TestE2ESourceClockBehind(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// The source's clock runs 5 minutes behind ours, more than the overlap:
	// a cursor taken from our clock would skip every record written since.
	tr := newTracker(t, simulated.Params{Seed: 3, Skew: -5 * time.Minute})
	cfg := e.writeConfig(source{name: "acme", tr: tr, overlap: "2m"})
	e.daemon(cfg)
	stop := churn(tr, 100*time.Millisecond, 5)
	time.Sleep(5 * time.Second)
	stop()
	// Without reconcile, deletions stay; everything live must be there at
	// its latest version.
	e.waitConverged(tr, "acme", 30*time.Second, nothingLost)
	var hw time.Time
	if err := e.pool.QueryRow(context.Background(),
		"SELECT max(high_water) FROM cursors WHERE source = 'acme'").Scan(&hw); err != nil {
		t.Fatal(err)
	}
	if hw.After(tr.Now()) {
		t.Errorf("high water %s is after the source's clock %s", hw, tr.Now())
	}
}

// ---- 4. writes visible late --------------------------------------------------

func TestE2ELateVisibleWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Writes become visible 3 s after their updated_at; the 10 s overlap
	// covers that.
	const delay = 3 * time.Second
	tr := newTracker(t, simulated.Params{Seed: 4, VisibilityDelay: delay})
	cfg := e.writeConfig(source{name: "acme", tr: tr, overlap: "10s", reconcile: true})
	e.daemon(cfg)
	stop := churn(tr, 100*time.Millisecond, 5)
	time.Sleep(5 * time.Second)
	stop()
	time.Sleep(delay)
	if n := tr.Server().Pending(); n != 0 {
		t.Fatalf("%d writes still invisible after the delay", n)
	}
	e.waitConverged(tr, "acme", 30*time.Second, inSync)
}

// ---- 5. backfill beside the daemon --------------------------------------------

func TestE2EBackfillBesideDaemon(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tr := newTracker(t, simulated.Params{Seed: 5})
	cfg := e.writeConfig(source{name: "acme", tr: tr, reconcile: true})
	s := startSampler(t, e.pool, "acme")
	d := e.daemon(cfg)
	stop := churn(tr, 100*time.Millisecond, 5)
	defer stop()
	time.Sleep(time.Second)
	today := clients.DateOf(tr.Now().UTC())
	for range 2 {
		out, errs, code := e.cli("backfill", "--config", cfg, "--source", "acme",
			"--from", today.AddDays(-70).String(), "--to", today.AddDays(1).String(), "--window-days", "5")
		if code != 0 {
			t.Fatalf("backfill exited %d\n%s%s", code, out, errs)
		}
		if !strings.Contains(out, "backfill acme/time_entries") {
			t.Errorf("backfill output: %q", out)
		}
	}
	stop()
	e.waitConverged(tr, "acme", 30*time.Second, inSync)
	s.check(t)
	noDuplicates(t, e.pool)
	var n int
	if err := e.pool.QueryRow(context.Background(),
		"SELECT count(*) FROM sync_runs WHERE source = 'acme' AND kind = 'backfill' AND status = 'ok'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Error("no successful backfill run recorded")
	}
	if !d.running() {
		t.Fatal("the daemon exited")
	}
}

// ---- 6. malformed pages ------------------------------------------------------

// snapshot renders every stored time entry, all columns, in id order.
func snapshot(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var s string
	if err := pool.QueryRow(context.Background(),
		"SELECT coalesce(string_agg(te::text, E'\\n' ORDER BY id), '') FROM time_entries te").Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestE2EMalformedPage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		m    harvesttest.Malformation
		want string // what was wrong, in the message
	}{
		{"bad JSON", harvesttest.BadJSON, "not JSON"},
		{"HTML 200", harvesttest.HTMLPage, "not JSON"},
		{"missing updated_at", harvesttest.MissingUpdatedAt, "updated_at"},
		{"wrong type", harvesttest.WrongType, "updated_at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			tr := newTracker(t, simulated.Params{Seed: 6})
			cfg := e.writeConfig(source{name: "acme", tr: tr})
			if out, errs, code := e.cli("sync", "--config", cfg, "--source", "acme"); code != 0 {
				t.Fatalf("first sync exited %d\n%s%s", code, out, errs)
			}
			// Changes the next pass would apply: edits and a new entry.
			srv := tr.Server()
			es := srv.TimeEntriesWhere(func(*harvesttest.TimeEntry) bool { return true })
			for i := range 5 {
				te := es[i*7]
				te.Hours, te.UpdatedAt = "7.75", time.Time{}
				srv.PutTimeEntry(te)
			}
			te := es[0]
			te.ID, te.UpdatedAt, te.CreatedAt = 99_000_001, time.Time{}, time.Time{}
			srv.PutTimeEntry(te)

			before := snapshot(t, e.pool)
			srv.Malform(clients.TimeEntries, 1, tc.m)
			_, errs, code := e.cli("sync", "--config", cfg, "--source", "acme")
			if code != 1 {
				t.Fatalf("sync of a malformed page exited %d, want 1\n%s", code, errs)
			}
			t.Logf("sync: %s", lastLine(errs))
			for _, w := range []string{"acme", "time_entries", "page 1", tc.want} {
				if !strings.Contains(strings.ToLower(errs), strings.ToLower(w)) {
					t.Errorf("error does not name %q:\n%s", w, errs)
				}
			}
			if strings.Contains(errs, tr.Token()) {
				t.Errorf("error shows the token:\n%s", errs)
			}
			if after := snapshot(t, e.pool); after != before {
				t.Errorf("stored time entries changed by a failed pass:\nbefore:\n%.2000s\nafter:\n%.2000s", before, after)
			}
			var status string
			if err := e.pool.QueryRow(context.Background(), `SELECT status FROM sync_runs
				WHERE source = 'acme' AND resource = 'time_entries' ORDER BY started_at DESC LIMIT 1`).Scan(&status); err != nil {
				t.Fatal(err)
			}
			if status != "failed" {
				t.Errorf("last time_entries run is %q, want failed", status)
			}

			srv.Malform(clients.TimeEntries, 1, 0)
			if out, errs, code := e.cli("sync", "--config", cfg, "--source", "acme"); code != 0 {
				t.Fatalf("good sync exited %d\n%s%s", code, out, errs)
			}
			e.waitConverged(tr, "acme", 0, inSync)
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}
