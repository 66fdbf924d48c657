package main

// The poller's convergence tests (churn then quiesce, kill -9, late-visible
// writes, backfill beside the daemon) against the Toggl and Clockify fakes,
// through the built binary. Harvest has them in e2e_test.go.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/clockify/clockifytest"
	"github.com/tidemarkhq/tidemark/clients/toggl/toggltest"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
	"github.com/tidemarkhq/tidemark/internal/verify"
	"github.com/tidemarkhq/tidemark/schema"
)

// fakeOpts select a provider fake for one test.
type fakeOpts struct {
	seed uint64
	// days of history; over 90, some entries are older than an
	// incremental pass reaches (only a backfill brings them).
	days int
	// late makes every third write visible late, within what the next
	// window covers (Toggl: 3 s under a 10 s overlap; Clockify: 5 min, and
	// every deletion 5 min late, under a 10 min overlap of windows that
	// end 2 min before the source's clock).
	late bool
	// Clockify only: liveFeed serves the change feed in its live shape
	// (clockifytest.Options.LiveFeed); feedStatus makes every feed request
	// answer that status (the client falls back to per-user listings,
	// whose versions are the pages' Date: fakeSource.listedVersions);
	// reconcile is the reconcile schedule (default: the kind's weekly
	// one); zones are the churn users' settings.timeZone, in order (the
	// fake's default for the rest).
	liveFeed   bool
	feedStatus int
	reconcile  string
	zones      []string
}

// entryState is what a mirror row must hold for a live time entry: every
// state the churn writes has notes of its own.
type entryState struct {
	notes     string
	spentDate string
}

// fakeSource is one provider fake wired into a test's config.
type fakeSource struct {
	kind, src string
	cfg       string // config path
	// churn starts the fake's mutation stream (about 50 changes a second);
	// stop waits for the last one.
	churn func() (stop func())
	// settle waits, after the churn stopped, until every write is visible.
	settle func(t *testing.T)
	// truths are the live ids with their versions, per compared resource.
	truths map[clients.Resource]func() map[string]time.Time
	// entries are the live time entries' states.
	entries func() map[string]entryState
	// today is the source's day.
	today func() clients.Date
	// listedVersions: the mirror's versions come from listings (a page's
	// Date), not the source's stamps; convergence compares states only.
	listedVersions bool
}

type providerFake struct {
	kind  string
	start func(t *testing.T, e *env, o fakeOpts) *fakeSource
}

var providers = []providerFake{{"toggl", startToggl}, {"clockify", startClockify}}

func (e *env) writeProviderConfig(block string) string {
	e.t.Helper()
	return e.writeFile("providers.yaml", "database_url: ${DATABASE_URL}\nsources:\n"+block)
}

// eachProvider runs fn in a parallel subtest per provider fake, each in its
// own env, the fake started with o and seed o.seed plus the provider's index.
func eachProvider(t *testing.T, o fakeOpts, fn func(t *testing.T, e *env, fs *fakeSource)) {
	t.Helper()
	for i, p := range providers {
		t.Run(p.kind, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			po := o
			po.seed += uint64(i)
			fn(t, e, p.start(t, e, po))
		})
	}
}

// settleConverged stops the churn, lets the fake settle and waits for the
// mirror to converge.
func (e *env) settleConverged(fs *fakeSource, stop func()) {
	e.t.Helper()
	stop()
	fs.settle(e.t)
	took := e.waitProvider(fs, 30*time.Second, fs.listedVersions)
	e.t.Logf("converged %s after the churn stopped", took.Round(time.Millisecond))
}

// runChurn runs step(perTick) every interval until stop is called.
func runChurn(run func(context.Context, time.Duration, int) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = run(ctx, 100*time.Millisecond, 5) }()
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }
}

func startToggl(t *testing.T, e *env, o fakeOpts) *fakeSource {
	opts := toggltest.Options{}
	overlap := "5s"
	if o.late {
		opts.VisibilityDelay, opts.LateEvery, overlap = 3*time.Second, 3, "10s"
	}
	tg := toggltest.New(opts)
	t.Cleanup(tg.Close)
	ch := toggltest.NewChurn(tg, fakeapi.ChurnParams{Seed: o.seed, Entries: 200, Days: o.days})
	e.vars = append(e.vars, "TG_TOKEN="+tg.Token())
	cfg := e.writeProviderConfig(fmt.Sprintf(`  - name: tg
    kind: toggl
    base_url: %s
    workspace_id: "%d"
    token: ${TG_TOKEN}
    schedule: "@every 1s"
    overlap: %s
    rate_limit: {requests: 1000, per: 1s}
    resources: [projects, time_entries]
    backfill: {window_days: 7}
`, tg.URL(), tg.WorkspaceID(), overlap))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("toggl churn: %+v", ch.Counts())
		}
	})
	fs := &fakeSource{
		kind: "toggl", src: "tg", cfg: cfg,
		churn: func() func() { return runChurn(ch.Run) },
		settle: func(t *testing.T) {
			deadline := time.Now().Add(opts.VisibilityDelay + 5*time.Second)
			for tg.Pending() > 0 {
				if time.Now().After(deadline) {
					t.Fatalf("%d writes still invisible %s after the churn", tg.Pending(), opts.VisibilityDelay+5*time.Second)
				}
				time.Sleep(100 * time.Millisecond)
			}
		},
	}
	togglViews(fs, tg)
	return fs
}

// clockifySpeed is how fast the Clockify fake's clock runs: its change feed
// only shows changes older than 2 minutes (the client's safety lag), so
// the clock runs about 3.6 minutes per real second, in whole seconds.
const clockifyStep, clockifyTick = 9 * time.Second, 50 * time.Millisecond

func startClockify(t *testing.T, e *env, o fakeOpts) *fakeSource {
	clock := fakeapi.NewClock(time.Now().UTC().Truncate(time.Second))
	opts := clockifytest.Options{Clock: clock.Now, NoRateLimit: true, LiveFeed: o.liveFeed, FeedStatus: o.feedStatus}
	if o.late {
		opts.VisibilityDelay, opts.LateEvery, opts.DeletionDelay = 5*time.Minute, 3, 5*time.Minute
	}
	ck := clockifytest.New(opts)
	t.Cleanup(ck.Close)
	ch := clockifytest.NewChurn(ck, fakeapi.ChurnParams{Seed: o.seed, Entries: 200, Days: o.days})
	users := ck.Live(clients.Users)
	for i, id := range ch.Users()[:min(len(o.zones), len(ch.Users()))] {
		u := users[id]
		ck.PutUser(clockifytest.User{ID: id, Name: deref(schema.Users.TextPtr(u, "first_name")),
			Email: deref(schema.Users.TextPtr(u, "email")), TimeZone: o.zones[i]})
	}
	reconcile := ""
	if o.reconcile != "" {
		reconcile = fmt.Sprintf("    reconcile: {schedule: %q}\n", o.reconcile)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ticking := make(chan struct{})
	go func() {
		defer close(ticking)
		tk := time.NewTicker(clockifyTick)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				clock.Advance(clockifyStep)
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-ticking })
	e.vars = append(e.vars, "CK_TOKEN="+ck.Token())
	// The overlap stays above the client's 2 min safety lag.
	cfg := e.writeProviderConfig(fmt.Sprintf(`  - name: ck
    kind: clockify
    base_url: %s
    workspace_id: %s
    token: ${CK_TOKEN}
    schedule: "@every 1s"
    overlap: 10m
    rate_limit: {requests: 1000, per: 1s}
    resources: [time_entries]
    backfill: {window_days: 7}
%s`, ck.URL(), ck.WorkspaceID(), reconcile))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("clockify churn: %+v; source clock %s", ch.Counts(), ck.Now().Format(time.RFC3339))
		}
	})
	return &fakeSource{
		kind: "clockify", src: "ck", cfg: cfg,
		churn:  func() func() { return runChurn(ch.Run) },
		settle: func(*testing.T) {}, // the running clock brings every change into the feed's windows
		truths: map[clients.Resource]func() map[string]time.Time{
			clients.TimeEntries: func() map[string]time.Time { return ck.Versions(clients.TimeEntries) },
		},
		entries: func() map[string]entryState {
			out := map[string]entryState{}
			for id, r := range ck.Live(clients.TimeEntries) {
				te := schema.TimeEntries
				out[id] = entryState{notes: deref(te.TextPtr(r, "notes")), spentDate: te.Date(r, "spent_date").String()}
			}
			return out
		},
		today:          func() clients.Date { return clients.DateOf(ck.Now().UTC()) },
		listedVersions: o.feedStatus != 0,
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// mirrorEntries reads the live time entries of src.
func mirrorEntries(ctx context.Context, e *env, src string) (map[string]entryState, error) {
	rows, err := e.pool.Query(ctx, "SELECT id, notes, spent_date FROM time_entries WHERE source = $1 AND deleted_at IS NULL", src)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]entryState{}
	for rows.Next() {
		var id string
		var notes *string
		var day time.Time
		if err := rows.Scan(&id, &notes, &day); err != nil {
			return nil, err
		}
		out[id] = entryState{notes: deref(notes), spentDate: day.Format(time.DateOnly)}
	}
	return out, rows.Err()
}

// providerConverged compares the mirror of fs with its fake: every live
// record present at its latest version, every deleted one tombstoned, and
// every live time entry holding the source's latest state (same notes and
// day: this catches the second of two edits made within one second, which
// share a version). With listedVersions (Clockify after a backfill: a
// listed entry's version is the page's Date, later than its feed stamp)
// versions are not compared; the states still are.
func providerConverged(ctx context.Context, e *env, fs *fakeSource, listedVersions bool) (bool, string, error) {
	var b strings.Builder
	ok := true
	for _, r := range []clients.Resource{clients.TimeEntries, clients.Projects} {
		truth, has := fs.truths[r]
		if !has {
			continue
		}
		rep, err := verify.Compare(ctx, e.pool, fs.src, r, truth(), time.Time{})
		if err != nil {
			return false, "", err
		}
		good := rep.InSync()
		if listedVersions {
			good = rep.Missing+rep.Undeleted == 0
		}
		if !good || rep.Live == 0 {
			ok = false
			fmt.Fprintf(&b, "\n  %s %v", rep, rep.Examples)
		}
	}
	want := fs.entries()
	got, err := mirrorEntries(ctx, e, fs.src)
	if err != nil {
		return false, "", err
	}
	bad := 0
	for id, w := range want {
		if g, has := got[id]; has && g != w {
			if bad++; bad <= 5 {
				fmt.Fprintf(&b, "\n  time entry %s holds %+v, the source %+v", id, g, w)
			}
		}
	}
	if bad > 0 {
		ok = false
		fmt.Fprintf(&b, "\n  %d time entries hold an older state", bad)
	}
	return ok, b.String(), nil
}

// waitProvider polls until the mirror of fs has converged, or fails the test
// after within.
func (e *env) waitProvider(fs *fakeSource, within time.Duration, listedVersions bool) time.Duration {
	e.t.Helper()
	start := time.Now()
	for {
		ok, why, err := providerConverged(context.Background(), e, fs, listedVersions)
		if err != nil {
			e.t.Fatal(err)
		}
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > within {
			e.t.Fatalf("source %s (%s) did not converge within %s:%s", fs.src, fs.kind, within, why)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// ---- 1. churn, then convergence ------------------------------------------------

// TestE2EProvidersChurnConverges: a daemon follows a fake through seconds
// of churn (creates, edits, same-second double edits, deletions,
// back-dating, timers); once the churn stops, the mirror equals the source
// exactly: latest versions and states, deletions tombstoned (Toggl: from
// `since` listings; Clockify: from the change feed), no duplicates.
func TestE2EProvidersChurnConverges(t *testing.T) {
	t.Parallel()
	eachProvider(t, fakeOpts{seed: 21}, func(t *testing.T, e *env, fs *fakeSource) {
		d := e.daemon(fs.cfg)
		stop := fs.churn()
		time.Sleep(5 * time.Second)
		e.settleConverged(fs, stop)
		if !d.running() {
			t.Fatal("the daemon exited")
		}
		noDuplicates(t, e.pool)
	})
}

// ---- 2. kill -9 at random moments -------------------------------------------

// TestE2EProvidersKill9: daemons killed with SIGKILL at random moments while
// the fake churns; a last daemon converges exactly, and the sampler saw no
// row go back to an older version, no row vanish and no cursor move back.
func TestE2EProvidersKill9(t *testing.T) {
	t.Parallel()
	eachProvider(t, fakeOpts{seed: 31}, func(t *testing.T, e *env, fs *fakeSource) {
		s := startSampler(t, e.pool, fs.src)
		stop := fs.churn()
		defer stop()
		e.killDaemons(fs.cfg, 5, rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 31)), 100*time.Millisecond, 1100*time.Millisecond)
		d := e.daemon(fs.cfg)
		time.Sleep(2 * time.Second)
		e.settleConverged(fs, stop)
		s.check(t)
		noDuplicates(t, e.pool)
		if !d.running() {
			t.Fatal("the daemon exited")
		}
	})
}

// ---- 3. writes visible late ----------------------------------------------------

// TestE2EProvidersLateVisibleWrites: writes that become visible after their
// stamp, while later writes are already visible (so the cursor passes
// them), are not lost when the delay is within the overlap. Toggl: every
// third write (deletions too) is listed 3 s after its `at`, under a 10 s
// overlap. Clockify: every third create or update reaches the change feed
// 5 min after its stamp and every deletion 5 min late, under a 10 min
// overlap.
func TestE2EProvidersLateVisibleWrites(t *testing.T) {
	t.Parallel()
	eachProvider(t, fakeOpts{seed: 41, late: true}, func(t *testing.T, e *env, fs *fakeSource) {
		e.daemon(fs.cfg)
		stop := fs.churn()
		time.Sleep(5 * time.Second)
		e.settleConverged(fs, stop)
	})
}

// ---- 4. backfill beside the daemon --------------------------------------------

// TestE2EProvidersBackfillBesideDaemon: two backfills of 125 days run while
// the daemon follows the churn. About a quarter of the entries were last
// changed more than 90 days ago, out of an incremental pass's reach (Toggl's
// `since`, Clockify's first feed read): only the backfill brings them. The
// sampler sees no row regress; the mirror converges.
func TestE2EProvidersBackfillBesideDaemon(t *testing.T) {
	t.Parallel()
	eachProvider(t, fakeOpts{seed: 51, days: 120}, func(t *testing.T, e *env, fs *fakeSource) {
		old := 0
		for _, v := range fs.truths[clients.TimeEntries]() {
			if v.Before(time.Now().Add(-91 * 24 * time.Hour)) {
				old++
			}
		}
		if old == 0 {
			t.Fatal("no entry older than an incremental pass reaches: the backfill proves nothing")
		}
		s := startSampler(t, e.pool, fs.src)
		d := e.daemon(fs.cfg)
		stop := fs.churn()
		defer stop()
		time.Sleep(time.Second)
		for range 2 {
			today := fs.today()
			out, errs, code := e.cli("backfill", "--config", fs.cfg, "--source", fs.src, "--resource", "time_entries",
				"--from", today.AddDays(-125).String(), "--to", today.AddDays(1).String(), "--window-days", "10")
			if code != 0 {
				t.Fatalf("backfill exited %d\n%s%s", code, out, errs)
			}
			if !strings.Contains(out, "backfill "+fs.src+"/time_entries") {
				t.Errorf("backfill output: %q", out)
			}
		}
		stop()
		fs.settle(t)
		took := e.waitProvider(fs, 30*time.Second, fs.kind == "clockify")
		t.Logf("converged %s after the churn stopped", took.Round(time.Millisecond))
		s.check(t)
		noDuplicates(t, e.pool)
		var n int
		if err := e.pool.QueryRow(context.Background(),
			"SELECT count(*) FROM sync_runs WHERE source = $1 AND kind = 'backfill' AND status = 'ok'", fs.src).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 2 {
			t.Errorf("%d successful backfill runs recorded, want 2", n)
		}
		if !d.running() {
			t.Fatal("the daemon exited")
		}
	})
}

// togglViews sets what the checks read of a Toggl fake: its versions, its
// live entries' states and its day.
func togglViews(fs *fakeSource, tg *toggltest.Server) {
	fs.truths = map[clients.Resource]func() map[string]time.Time{
		clients.TimeEntries: func() map[string]time.Time { return tg.State().Versions(clients.TimeEntries) },
		clients.Projects:    func() map[string]time.Time { return tg.State().Versions(clients.Projects) },
	}
	fs.entries = func() map[string]entryState {
		out := map[string]entryState{}
		for id, te := range tg.State().TimeEntries {
			if te.DeletedAt == nil {
				out[fmt.Sprint(id)] = entryState{notes: deref(te.Description), spentDate: clients.DateOf(te.Start.UTC()).String()}
			}
		}
		return out
	}
	fs.today = func() clients.Date { return clients.DateOf(tg.Now().UTC()) }
}
