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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/clockify/clockifytest"
	"github.com/tidemarkhq/tidemark/clients/simulated"
	"github.com/tidemarkhq/tidemark/clients/toggl/toggltest"
	"github.com/tidemarkhq/tidemark/events"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
	"github.com/tidemarkhq/tidemark/internal/slowdown"
	"github.com/tidemarkhq/tidemark/internal/verify"
	"github.com/tidemarkhq/tidemark/schema"
	"github.com/tidemarkhq/tidemark/webhooks"
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
	deadline := time.Now().Add(slowdown.Scale(20 * time.Second))
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
	// stop waits for the last one. steps counts its steps (5 changes each).
	churn func() (stop func())
	steps atomic.Int64
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
	took := e.waitProvider(fs, 90*time.Second, fs.listedVersions)
	e.t.Logf("converged %s after the churn stopped", took.Round(time.Millisecond))
}

// countedChurn returns a churn that calls step(5) every 100 ms until
// stopped, counting in steps the calls for which step reports a change.
func countedChurn(steps *atomic.Int64, step func(n int) bool) func() (stop func()) {
	return func() func() {
		return runChurn(func(ctx context.Context, every time.Duration, n int) error {
			return fakeapi.Run(ctx, every, n, func(n int) {
				if step(n) {
					steps.Add(1)
				}
			})
		})
	}
}

// churnSteps waits until the churn took n steps (n/10 s on a quiet
// machine): how much a test churns does not depend on how fast the
// machine runs its daemon, whose first pass a paced churn waits for.
func (fs *fakeSource) churnSteps(t *testing.T, n int64) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("%d steps of the churn", n), func() bool { return fs.steps.Load() >= n })
}

// runChurn runs step(perTick) every interval until stop is called.
func runChurn(run func(context.Context, time.Duration, int) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = run(ctx, 100*time.Millisecond, 5) }()
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }
}

// toggl starts a Toggl fake with 200 churning entries over days and puts
// its token in TG_TOKEN.
func (e *env) toggl(t *testing.T, opts toggltest.Options, seed uint64, days int) (*toggltest.Server, *fakeapi.EntryChurn[int64]) {
	tg := toggltest.New(opts)
	t.Cleanup(tg.Close)
	ch := toggltest.NewChurn(tg, fakeapi.ChurnParams{Seed: seed, Entries: 200, Days: days})
	e.vars = append(e.vars, "TG_TOKEN="+tg.Token())
	return tg, ch
}

func startToggl(t *testing.T, e *env, o fakeOpts) *fakeSource {
	opts := toggltest.Options{}
	overlap := "5s"
	if o.late {
		opts.VisibilityDelay, opts.LateEvery, overlap = 3*time.Second, 3, "10s"
	}
	tg, ch := e.toggl(t, opts, o.seed, o.days)
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
		settle: func(t *testing.T) {
			deadline := time.Now().Add(slowdown.Scale(opts.VisibilityDelay + 5*time.Second))
			for tg.Pending() > 0 {
				if time.Now().After(deadline) {
					t.Fatalf("%d writes still invisible %s after the churn", tg.Pending(), opts.VisibilityDelay+5*time.Second)
				}
				time.Sleep(100 * time.Millisecond)
			}
		},
	}
	fs.churn = countedChurn(&fs.steps, func(n int) bool { ch.Step(n); return true })
	togglViews(fs, tg)
	return fs
}

// clockifySpeed is how fast the Clockify fake's clock runs: its change feed
// only shows changes older than 2 minutes (the client's safety lag), so
// the clock runs about 3.6 minutes per real second, in whole seconds.
//
// The clock waits for the mirror: it moves only while the cursor of ck's
// time entries is within clockifyMaxLag of it (and the churn with it). Running on its own, 3.6
// minutes a second, a daemon slowed by a busy machine (or busy with a
// backfill) fell over an hour of source time behind; a pass catching up
// over more than the client's DeletionSpan (1 h) reads /deleted in whole
// windows, which leave out an entry created and deleted inside one, by
// design missed until a reconcile: the test then failed with entries
// "deleted at source but live here" because the machine was slow.
const clockifyStep, clockifyTick = 9 * time.Second, 50 * time.Millisecond

// clockifyMaxLag stays well under DeletionSpan less the 10 min overlap.
const clockifyMaxLag = 30 * time.Minute

// clockifyPace advances clock every clockifyTick while ck's time-entry
// cursor is within clockifyMaxLag of it, until ctx ends. Before the first
// pass wrote the cursor the clock stands still, and so does the churn: a
// daemon slow to start would otherwise first list a source whose
// deletions it never saw as records (no tombstone to check).
func clockifyPace(ctx context.Context, e *env, clock *fakeapi.Clock) {
	// The cursor is read apart from the ticks: on a busy machine one query
	// took longer than many ticks, and the clock (with the churn) crawled.
	var hw atomic.Pointer[time.Time]
	var wg sync.WaitGroup
	wg.Go(func() {
		every(ctx, clockifyTick, func() {
			var t time.Time
			if e.pool.QueryRow(ctx, `SELECT high_water FROM cursors
				WHERE source = 'ck' AND resource = 'time_entries' AND high_water IS NOT NULL`).Scan(&t) == nil {
				hw.Store(&t)
			} // else no pass yet (or the pool closing at the end of the test)
		})
	})
	every(ctx, clockifyTick, func() {
		if h := hw.Load(); h != nil && clock.Now().Sub(*h) < clockifyMaxLag {
			clock.Advance(clockifyStep)
		}
	})
	wg.Wait()
}

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
		clockifyPace(ctx, e, clock)
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
	fs := &fakeSource{
		kind: "clockify", src: "ck", cfg: cfg,
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
	// The churn steps only on a new instant of the clock: it waits with
	// the clock for the mirror, rather than pile creations and deletions
	// onto one stopped second.
	var last time.Time
	fs.churn = countedChurn(&fs.steps, func(n int) bool {
		now := clock.Now()
		if !now.After(last) {
			return false
		}
		last = now
		ch.Step(n)
		return true
	})
	return fs
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
	within = slowdown.Scale(within)
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
		fs.churnSteps(t, 50)
		e.settleConverged(fs, stop)
		d.requireRunning(t)
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
		d.requireRunning(t)
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
		fs.churnSteps(t, 50)
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
		took := e.waitProvider(fs, 90*time.Second, fs.kind == "clockify")
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
		d.requireRunning(t)
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

// TestE2ETogglWorkspaceScopeConvergesUnderChurn: a daemon with a toggl
// source in `scope: workspace` follows the fake's detailed search (header
// paging, several users) through seconds of churn (creates, edits,
// back-dating, timers, deletions); once the churn stops the mirror equals
// the source: every user's entries at their latest versions and states, and
// the deleted ones tombstoned by their absence from the trailing window's
// complete listings (the search reports no deletions). The churn back-dates
// entries up to 19 days, past the 12 trailing days: an entry edited once it
// is out of the window is the reconcile's to bring back, as the README says
// ("older changes by the daily reconcile"), so the source reconciles too.
func TestE2ETogglWorkspaceScopeConvergesUnderChurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tg, ch := e.toggl(t, toggltest.Options{ReportPageCap: 40}, 1031, 10)
	cfg := e.writeProviderConfig(fmt.Sprintf(`  - name: tg
    kind: toggl
    base_url: %s
    workspace_id: "%d"
    token: ${TG_TOKEN}
    scope: workspace
    trailing_days: 12
    schedule: "@every 1s"
    reconcile: {schedule: "@every 5s", lookback_days: 25}
    overlap: 5s
    rate_limit: {requests: 1000, per: 1s}
    resources: [projects, time_entries]
`, tg.URL(), tg.WorkspaceID()))
	fs := &fakeSource{
		kind: "toggl", src: "tg", cfg: cfg,
		// Waits for a reconcile of time entries begun after the churn.
		settle: func(t *testing.T) {
			ctx := context.Background()
			var stopped time.Time
			if err := e.pool.QueryRow(ctx, "SELECT now()").Scan(&stopped); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(slowdown.Scale(90 * time.Second)); ; time.Sleep(200 * time.Millisecond) {
				var n int
				if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM sync_runs WHERE source = 'tg' AND resource = 'time_entries'
					AND kind = 'reconcile' AND status = 'ok' AND started_at > $1`, stopped).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n > 0 {
					return
				}
				if time.Now().After(deadline) {
					t.Fatal("no reconcile of time entries ran within 90 s (a safety net) of the churn's end")
				}
			}
		},
	}
	togglViews(fs, tg)
	d := e.daemon(cfg)
	// The churn's deletions become tombstones only of entries mirrored
	// before: a daemon slow to start (a busy machine) would otherwise list
	// the source after them, and leave no tombstone to check.
	e.waitFirstPass("tg")
	fs.churn = countedChurn(&fs.steps, func(n int) bool { ch.Step(n); return true })
	stop := fs.churn()
	fs.churnSteps(t, 50)
	e.settleConverged(fs, stop)
	d.requireRunning(t)
	counts := ch.Counts()
	t.Logf("churn: %+v", counts)
	var users, tombstones int
	if err := e.pool.QueryRow(context.Background(),
		"SELECT count(DISTINCT user_id) FILTER (WHERE deleted_at IS NULL), count(*) FILTER (WHERE deleted_at IS NOT NULL) FROM time_entries WHERE source = 'tg'").
		Scan(&users, &tombstones); err != nil {
		t.Fatal(err)
	}
	if users < 2 {
		t.Errorf("entries of %d users mirrored: want every user's", users)
	}
	if tombstones == 0 {
		t.Error("no tombstone: the churn's deletions were not seen")
	}
	if n := len(tg.ReportQueries()); n == 0 {
		t.Error("the detailed search was never asked")
	}

	for _, r := range tg.Requests() {
		if r.Path == "/me/time_entries" {
			t.Fatal("scope workspace asked /me/time_entries")
		}
	}
	noDuplicates(t, e.pool)
}

// ckZones are the churn users' time zones: far from UTC both ways, so
// that many entries' spent_date (dated as Clockify's reports do, in the
// user's zone) is not their UTC day. The third user keeps the fake's
// default (Europe/Berlin).
var ckZones = []string{"America/Los_Angeles", "Asia/Tokyo"}

// feedUnusable is what the Clockify client logs when it falls back.
const feedUnusable = "clockify change feed unusable"

// ckMirrorChecks checks, once converged, that deletions were tombstoned and
// that the users' zones dated the entries, and returns the daemon's log.
func ckMirrorChecks(t *testing.T, e *env, d *proc) string {
	t.Helper()
	d.requireRunning(t)
	noDuplicates(t, e.pool)
	var tombstones int
	var zones []string
	if err := e.pool.QueryRow(context.Background(),
		`SELECT count(*) FILTER (WHERE deleted_at IS NOT NULL),
		        coalesce(array_agg(DISTINCT time_zone) FILTER (WHERE deleted_at IS NULL), '{}')
		   FROM time_entries WHERE source = 'ck'`).Scan(&tombstones, &zones); err != nil {
		t.Fatal(err)
	}
	if tombstones == 0 {
		t.Error("no tombstone: the churn's deletions were not seen")
	}
	for _, z := range append(slices.Clone(ckZones), "Europe/Berlin") {
		if !slices.Contains(zones, z) {
			t.Errorf("no live entry dated in %s: zones %v", z, zones)
		}
	}
	b, err := os.ReadFile(d.log)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestE2EClockifyLiveFeedChurnConverges: a daemon follows the fake's change
// feed in its live shape (bare entities stamped by auditMetadata, deletions
// by document._id, the page size ignored) through seconds of churn
// (creates, edits, same-second double edits, deletions, back-dating,
// timers); once the churn stops the mirror equals the source: latest
// versions and states (spent_date in each user's zone), and the deletions
// tombstoned from the feed alone (reconcile keeps its weekly default and
// does not run), never falling back to listings.
func TestE2EClockifyLiveFeedChurnConverges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fs := startClockify(t, e, fakeOpts{seed: 1101, liveFeed: true, zones: ckZones})
	d := e.daemon(fs.cfg)
	stop := fs.churn()
	fs.churnSteps(t, 50)
	e.settleConverged(fs, stop)
	log := ckMirrorChecks(t, e, d)
	if strings.Contains(log, feedUnusable) {
		t.Error("the daemon gave the live feed up for listings")
	}
	if strings.Contains(log, `"kind":"reconcile"`) {
		t.Error("a reconcile ran: the tombstones prove nothing about the feed's deletions")
	}
}

// TestE2EClockifyFeedUnavailableChurnConverges: every feed request answers
// 404. The daemon does not fail its passes: it falls back to per-user
// listings by start date (logged once, at Warn), versioned by the pages'
// Date and compared by content hash, and the mirror converges under the
// same churn.
//
// What the fallback promises: an incremental pass lists the entries whose
// start is within FallbackDays (14) before its cursor; deletions, and
// edits to entries started earlier, are left to reconcile. The churn here
// is not bounded to that window (its 30 days of history and back-dating
// by up to 29 days put entries well before it): reconcile, every 5 s over
// its default 90 days, covers them, and the test needs it for the
// deletions anyway.
func TestE2EClockifyFeedUnavailableChurnConverges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fs := startClockify(t, e, fakeOpts{seed: 1201, feedStatus: 404, reconcile: "@every 5s", zones: ckZones})
	d := e.daemon(fs.cfg)
	stop := fs.churn()
	fs.churnSteps(t, 50)
	e.settleConverged(fs, stop)
	log := ckMirrorChecks(t, e, d)
	warns, infos := 0, 0
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, feedUnusable) {
			continue
		}
		switch {
		case strings.Contains(l, `"level":"warn"`):
			warns++
		case strings.Contains(l, `"level":"info"`):
			infos++
		}
	}
	if warns != 1 {
		t.Errorf("the fallback was logged %d times at Warn (and %d at Info), want once at Warn", warns, infos)
	}
	if !strings.Contains(log, "the feed answers 404") {
		t.Error("the fallback's reason does not name the 404")
	}
	// cursors, another process, shows how time entries are read now.
	for _, c := range cliJSON[[]map[string]any](t, e, "cursors", "--config", fs.cfg, "--json") {
		mode, _ := c["read_mode"].(string)
		if c["resource"] == "time_entries" && !strings.Contains(mode, "listing: the feed answers 404") {
			t.Errorf("cursors --json read_mode %q, want the fallback with its reason", mode)
		}
	}
	text, _, _ := e.cli("cursors", "--config", fs.cfg)
	if !strings.Contains(text, "read by listing: the feed answers 404") {
		t.Errorf("cursors does not show the fallback:\n%s", text)
	}
}

// TestE2EEventsKill9: daemons with `events: on` and `history: all`, killed with SIGKILL at
// random moments (mid-page included) while the tracker churns, then a
// backfill over everything: the feed holds, per record, only real changes
// (no two consecutive events of a record with the same version and content,
// versions never going back), each with the id derived from its change, and
// each record's last event is the row as the mirror holds it. `events tail`
// acknowledges every event once. The history holds, per record, one version
// per event (the same decision writes both), its current version is the
// row as the mirror holds it, and the backfill added none.
func TestE2EEventsKill9(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tr, cfg := e.acme(simulated.Params{Seed: 13}, source{reconcile: true, events: true, history: true})
	stop := churn(tr, 100*time.Millisecond, 5)
	defer stop()
	e.killDaemons(cfg, 4, rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 13)), 50*time.Millisecond, 751*time.Millisecond)
	d := e.daemon(cfg)
	time.Sleep(2 * time.Second)
	stop()
	e.waitConverged(tr, "acme", 90*time.Second, inSync)
	time.Sleep(3 * time.Second) // a reconcile after convergence: nothing to change
	before := countEvents(t, e)
	versions := checkHistoryMatchesFeed(t, e)

	today := clients.DateOf(tr.Now().UTC())
	if out, errs, code := e.cli("backfill", "--config", cfg, "--source", "acme",
		"--from", today.AddDays(-70).String(), "--to", today.AddDays(1).String(), "--window-days", "10"); code != 0 {
		t.Fatalf("backfill exited %d\n%s%s", code, out, errs)
	}
	if after := countEvents(t, e); after != before {
		t.Fatalf("a backfill of unchanged records appended %d events", after-before)
	}
	checkFeedMatchesMirror(t, e)
	if after := checkHistoryMatchesFeed(t, e); after != versions {
		t.Fatalf("a backfill of unchanged records added %d versions", after-versions)
	}

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
	d.requireRunning(t)
}

// checkHistoryMatchesFeed holds the history of every resource against the
// feed and the mirror: as many versions as events per record, the current
// one the mirror's row. It returns the number of versions.
func checkHistoryMatchesFeed(t *testing.T, e *env) int {
	t.Helper()
	ctx := context.Background()
	total := 0
	for _, r := range []string{"time_entries", "projects", "clients", "users", "tasks"} {
		var bad string
		var n int
		err := e.pool.QueryRow(ctx, fmt.Sprintf(`WITH h AS (SELECT id, count(*) AS n FROM %[1]s_history WHERE source = 'acme' GROUP BY id),
ev AS (SELECT record_id AS id, count(*) AS n FROM events WHERE source = 'acme' AND resource = '%[1]s' GROUP BY record_id),
cur AS (SELECT id, content_hash, deleted FROM %[1]s_history WHERE source = 'acme' AND valid_to = 'infinity')
SELECT (SELECT sum(n) FROM h)::int, coalesce((SELECT string_agg(coalesce(h.id, ev.id), ',') FROM h FULL JOIN ev USING (id) WHERE h.n IS DISTINCT FROM ev.n), '') ||
  coalesce((SELECT ' current:' || string_agg(m.id, ',') FROM %[1]s m LEFT JOIN cur USING (id)
    WHERE m.source = 'acme' AND (cur.content_hash IS DISTINCT FROM m.content_hash OR cur.deleted <> (m.deleted_at IS NOT NULL))), '')`, r)).Scan(&n, &bad)
		if err != nil {
			t.Fatal(err)
		}
		if bad != "" {
			t.Fatalf("%s: history and feed or mirror disagree on %s", r, bad)
		}
		total += n
	}
	if total == 0 {
		t.Fatal("no versions")
	}
	return total
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
	e.waitConverged(tr, "acme", 90*time.Second, inSync)
	deadline := time.Now().Add(slowdown.Scale(2 * time.Minute)) // a safety net
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
	// Deliveries are at least once: an event reaches the endpoint twice
	// only when an attempt before failed on our side (on a busy machine,
	// a POST that outlived its timeout although the endpoint took it),
	// and River recorded it. A second delivery with no failed attempt is
	// a bug (two jobs for one event, or a job run twice).
	mu.Lock()
	for id, k := range got {
		if k == 1 {
			continue
		}
		var jobs, attempts int
		var lastErr string
		err := e.pool.QueryRow(context.Background(), `SELECT count(*), coalesce(max(attempt), 0),
			coalesce(max(errors[array_length(errors, 1)]->>'error'), '')
			FROM river_job WHERE args->>'consumer' = 'billing' AND args->>'event_id' = $1`, id).Scan(&jobs, &attempts, &lastErr)
		if err != nil {
			t.Fatal(err)
		}
		if jobs != 1 || attempts < k {
			t.Errorf("%s delivered %d times to an endpoint that always accepts (%d jobs, %d attempts)", id, k, jobs, attempts)
		} else {
			t.Logf("%s delivered %d times: %d attempts, the last failed with %q", id, k, attempts, lastErr)
		}
	}
	mu.Unlock()
	waitLines := time.Now().Add(slowdown.Scale(30 * time.Second))
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
	d.requireRunning(t)
}

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
		rows := cliJSON[[]struct {
			Source string `json:"source"`
			Owner  string `json:"owner"`
		}](t, e, "cursors", "--config", cfg, "--json")
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
		deadline := time.Now().Add(slowdown.Scale(within))
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
	// A source changes hands between two of its passes: on a busy machine
	// the first ones (each source's whole history) take long.
	settle("two replicas", 2, 2*time.Minute)
	b.signal(syscall.SIGKILL)
	b.wait(10 * time.Second)
	settle("one killed", 1, 2*5*time.Second+5*time.Second)
	if !a.running() {
		t.Fatal("the surviving replica stopped")
	}
}

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

// waitFirstPass waits until a pass of src wrote its time entries' cursor.
func (e *env) waitFirstPass(src string) {
	e.t.Helper()
	waitUntil(e.t, "the first pass of "+src+"/time_entries", func() bool {
		var n int
		err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM cursors
			WHERE source = $1 AND resource = 'time_entries' AND high_water IS NOT NULL`, src).Scan(&n)
		return err == nil && n > 0
	})
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(slowdown.Scale(time.Minute)) // a safety net
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

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
