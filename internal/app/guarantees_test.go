package app_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/clockify/clockifytest"
	"github.com/tidemarkhq/tidemark/clients/toggl/toggltest"
	"github.com/tidemarkhq/tidemark/internal/app"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
	"github.com/tidemarkhq/tidemark/internal/fakeapi/harvestfake"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/internal/slowdown"
	"github.com/tidemarkhq/tidemark/poller"
)

// The guarantees of DESIGN.md proven through the assembled program (app.Open
// and its poller, as `tidemark sync`, `backfill` and `reconcile` run them)
// where no end-to-end test of cmd/tidemark already does (README, "Guarantees
// and the tests that prove them").

// harvestEnv is a Harvest fake with entries on the last few days, pages of
// two records, and a database.
type harvestEnv struct {
	fake *harvestfake.Server
	url  string
	pool *pgxpool.Pool
}

func newHarvestEnv(t *testing.T, entries int, o harvestfake.Options) *harvestEnv {
	t.Helper()
	o.PerPageCap = 2
	f := harvestfake.New(o)
	t.Cleanup(f.Close)
	at := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	today := clients.DateOf(time.Now().UTC())
	for i := range entries {
		f.PutTimeEntry(harvestfake.TimeEntry{ID: int64(i + 1), SpentDate: today.AddDays(-1 - i%5), Hours: "1.5",
			UserID: 7, ProjectID: 8, TaskID: 9, ClientID: 10, CreatedAt: at, UpdatedAt: at})
	}
	u := pgtest.URL(t)
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &harvestEnv{fake: f, url: u, pool: pool}
}

// open opens an App (a fresh process) on e with source acme; token is the
// value of ${ACME_TOKEN} ("": the fake's).
func (e *harvestEnv) open(t *testing.T, token, extra string) (*app.App, *poller.Poller) {
	t.Helper()
	if token == "" {
		token = e.fake.Token()
	}
	yaml := fmt.Sprintf(`
database_url: ${DATABASE_URL}
sources:
  - name: acme
    kind: harvest
    base_url: %s
    account_id: "%s"
    token: ${ACME_TOKEN}
    resources: [clients, time_entries]
%s`, e.fake.URL(), e.fake.AccountID(), extra)
	env := map[string]string{"DATABASE_URL": e.url, "ACME_TOKEN": token}
	cfg, err := config.Parse("acme.yaml", []byte(yaml), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.Open(context.Background(), cfg, e.url, "v0.0.0-test", zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	p, err := a.Poller(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	return a, p
}

// txSample is how many sessions of the database were idle in a
// transaction at an instant.
type txSample struct {
	at time.Time
	n  int
}

// idleInTx samples, until stop, the sessions of the database idle in a
// transaction: one held across a wait shows there for the whole wait.
func idleInTx(pool *pgxpool.Pool) (stop func() []txSample) {
	var out []txSample
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			var n int
			if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&n); err == nil {
				out = append(out, txSample{time.Now(), n})
			}
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	return func() []txSample {
		close(done)
		wg.Wait()
		return out
	}
}

// noTxWhileWaiting checks that while the program waited between two
// requests at least gap apart (a Retry-After, a quota window), less a margin
// for the pages around the wait, no session was idle in a transaction: a
// pass commits its page before it asks for the next one.
func noTxWhileWaiting(t *testing.T, reqs []fakeapi.Request, samples []txSample, gap time.Duration) {
	t.Helper()
	waits, looked := 0, 0
	for i := 1; i < len(reqs); i++ {
		if reqs[i].At.Sub(reqs[i-1].At) < gap {
			continue
		}
		waits++
		from, to := reqs[i-1].At.Add(200*time.Millisecond), reqs[i].At.Add(-200*time.Millisecond)
		for _, s := range samples {
			if s.at.After(from) && s.at.Before(to) {
				looked++
				if s.n != 0 {
					t.Errorf("%d sessions idle in a transaction at %s, while the program waited %v before request %d",
						s.n, s.at.Format(time.StampMilli), reqs[i].At.Sub(reqs[i-1].At), i+1)
				}
			}
		}
	}
	if waits == 0 || looked == 0 {
		t.Errorf("%d waits of %v or more, %d looks at the sessions during them: nothing proven", waits, gap, looked)
	}
}

// TestRateAndWaitsThroughTheApp (guarantees 5 and 10): a sync through
// app.Open sends at most the configured budget in any window, counted where
// the fake received each request (with the conformance check's allowance
// for scheduling lag); a 429 with Retry-After is waited out, not an error,
// and the next request comes after it; no transaction is open while the
// program waits (limiter, Retry-After).
func TestRateAndWaitsThroughTheApp(t *testing.T) {
	t.Parallel()
	e := newHarvestEnv(t, 24, harvestfake.Options{NoRateLimit: true})
	lim := struct {
		n   int
		per time.Duration
	}{4, time.Second}
	_, p := e.open(t, "", fmt.Sprintf("    rate_limit: {requests: %d, per: %s}\n", lim.n, lim.per))
	e.fake.RateLimitNext(1, "2")
	watch := idleInTx(e.pool)
	res, err := p.Incremental(context.Background(), "acme")
	samples := watch()
	if err != nil {
		t.Fatalf("sync: %v (a 429 is honoured, not an error)", err)
	}
	var n int64
	for _, r := range res {
		n += r.Counts.Inserted
	}
	if n < 24 {
		t.Errorf("%d records inserted, want at least the 24 entries", n)
	}
	reqs := e.fake.Requests()
	if len(reqs) < 14 {
		t.Fatalf("%d requests: too few to judge a budget of %d per %v", len(reqs), lim.n, lim.per)
	}
	i429 := slices.IndexFunc(reqs, func(r fakeapi.Request) bool { return r.Status == 429 })
	if i429 < 0 || i429+1 >= len(reqs) {
		t.Fatalf("the injected 429 was not served, or nothing came after it")
	}
	if gap := reqs[i429+1].At.Sub(reqs[i429].At); gap < 2*time.Second-100*time.Millisecond {
		t.Errorf("the request after a 429 with Retry-After: 2 came %v later", gap)
	}
	// While the program waits out the Retry-After, no transaction is open.
	noTxWhileWaiting(t, reqs, samples, 2*time.Second-100*time.Millisecond)
	window := max(lim.per-slowdown.Scale(lim.per/4), lim.per/2)
	for i := range reqs {
		k := 0
		for j := i; j < len(reqs) && reqs[j].At.Sub(reqs[i].At) < window; j++ {
			k++
		}
		if k > lim.n {
			t.Fatalf("%d requests within %v from request %d (budget %d per %v)", k, window, i, lim.n, lim.per)
		}
	}
}

// TestReconcileNeverFromAFailedListing (guarantee 9, and 1): a reconcile
// whose listing fails on its second page tombstones nothing, though an
// entry of its first page is gone; the next complete listing tombstones it.
func TestReconcileNeverFromAFailedListing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newHarvestEnv(t, 10, harvestfake.Options{NoRateLimit: true})
	_, p := e.open(t, "", "")
	if _, err := p.Reconcile(ctx, "acme", clients.TimeEntries); err != nil {
		t.Fatal(err)
	}
	deleted := func() []string {
		rows, _ := e.pool.Query(ctx, `SELECT id FROM time_entries WHERE source = 'acme' AND deleted_at IS NOT NULL ORDER BY id`)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	gone := e.fake.IDs(clients.TimeEntries)[0]
	e.fake.Delete(clients.TimeEntries, gone)
	e.fake.Malform("time_entries", 2, fakeapi.BadJSON)
	_, p = e.open(t, "", "")
	if _, err := p.Reconcile(ctx, "acme", clients.TimeEntries); err == nil {
		t.Fatal("a reconcile whose listing failed succeeded")
	}
	if d := deleted(); len(d) != 0 {
		t.Fatalf("a failed listing tombstoned %v", d)
	}
	e.fake.Malform("time_entries", 2, 0)
	if _, err := p.Reconcile(ctx, "acme", clients.TimeEntries); err != nil {
		t.Fatal(err)
	}
	if d := deleted(); !slices.Equal(d, []string{fmt.Sprint(gone)}) {
		t.Errorf("after a complete listing, tombstoned %v, want [%d]", d, gone)
	}
}

// TestBackfillLeavesTheCursor (guarantee 6): a backfill through the program
// never moves the incremental cursor.
func TestBackfillLeavesTheCursor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newHarvestEnv(t, 6, harvestfake.Options{NoRateLimit: true})
	_, p := e.open(t, "", "")
	if _, err := p.Incremental(ctx, "acme", clients.TimeEntries); err != nil {
		t.Fatal(err)
	}
	before, err := p.Store().Load(ctx, "acme", "time_entries")
	if err != nil {
		t.Fatal(err)
	}
	// A newer entry, older day: only the backfill lists it.
	now := time.Now().UTC().Truncate(time.Second)
	e.fake.PutTimeEntry(harvestfake.TimeEntry{ID: 100, SpentDate: clients.DateOf(now).AddDays(-30), Hours: "2",
		UserID: 7, ProjectID: 8, TaskID: 9, ClientID: 10, CreatedAt: now, UpdatedAt: now})
	today := clients.DateOf(now)
	if _, err := p.Backfill(ctx, poller.BackfillParams{Source: "acme", Resource: clients.TimeEntries, From: today.AddDays(-40), To: today}); err != nil {
		t.Fatal(err)
	}
	after, err := p.Store().Load(ctx, "acme", "time_entries")
	if err != nil {
		t.Fatal(err)
	}
	if !after.HighWater.Equal(before.HighWater) {
		t.Errorf("the backfill moved the incremental cursor: %s -> %s", before.HighWater, after.HighWater)
	}
	var n int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM time_entries WHERE source = 'acme' AND id = '100'`).Scan(&n); err != nil || n != 1 {
		t.Errorf("the backfill did not write entry 100: %d rows, %v", n, err)
	}
}

// TestTokenNowhereInTheDatabase (guarantee 8): after passes with a good
// token and failed passes with a wrong one, no column of any table holds
// either token, and the wrong token's error does not show it.
func TestTokenNowhereInTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newHarvestEnv(t, 6, harvestfake.Options{NoRateLimit: true})
	_, p := e.open(t, "", "    events: on\n")
	if _, err := p.Incremental(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	const wrong = "tm-wrong-token-8c1d4e"
	_, p = e.open(t, wrong, "    events: on\n")
	_, err := p.Incremental(ctx, "acme")
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a wrong token: %v, want a 401", err)
	}
	if strings.Contains(err.Error(), wrong) {
		t.Errorf("the error shows the token: %v", err)
	}
	rows, err := e.pool.Query(ctx, `SELECT quote_ident(table_schema) || '.' || quote_ident(table_name) FROM information_schema.tables
		WHERE table_schema NOT IN ('pg_catalog', 'information_schema') AND table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(tables) < 10 {
		t.Fatalf("%d tables, %v", len(tables), err)
	}
	for _, tbl := range tables {
		for _, secret := range []string{wrong, e.fake.Token()} {
			var n int
			err := e.pool.QueryRow(ctx, `SELECT count(*) FROM `+tbl+` t WHERE strpos(t::text, $1) > 0`, secret).Scan(&n)
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("%s: %v", tbl, err)
			}
			if n > 0 {
				t.Errorf("%s: %d rows hold a token", tbl, n)
			}
		}
	}
}

// TestReconcileOnlyInsideItsUserScope (guarantee 9): a Clockify source
// mirrored every user's entries; configured again with user_ids [A], its
// reconcile lists only A's entries and tombstones A's deleted one, never
// B's, which its listing did not cover.
func TestReconcileOnlyInsideItsUserScope(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := fakeapi.NewClock(time.Now().UTC())
	f := clockifytest.New(clockifytest.Options{NoRateLimit: true, NoDeletionDelay: true, Clock: clock.Now})
	t.Cleanup(f.Close)
	a, b := clockifytest.NewID(), clockifytest.NewID()
	ids := putClockifyEntries(f, clock.Now().Add(-49*time.Hour).Truncate(time.Second), a, a, b, b)
	u := pgtest.URL(t)
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	yaml := func(scope string) string {
		return fmt.Sprintf(`
database_url: ${DATABASE_URL}
sources:
  - name: ck
    kind: clockify
    base_url: %s
    workspace_id: %s
    token: %s
    rate_limit: {requests: 100, per: 1s}
    resources: [time_entries]
%s`, f.URL(), f.WorkspaceID(), f.Token(), scope)
	}
	reconcileFresh(t, u, yaml(""), "ck")
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM time_entries WHERE source = 'ck' AND deleted_at IS NULL`).Scan(&n); err != nil || n != 4 {
		t.Fatalf("%d live entries after the first reconcile, want 4 (%v)", n, err)
	}
	clock.Advance(time.Hour)              // past the overlap: the rows are old enough to judge
	f.Delete(clients.TimeEntries, ids[0]) // one of A's
	clock.Advance(time.Hour)
	reconcileFresh(t, u, yaml(fmt.Sprintf("    user_ids: [%s]\n", a)), "ck")
	rows, _ := pool.Query(ctx, `SELECT id FROM time_entries WHERE source = 'ck' AND deleted_at IS NOT NULL ORDER BY id`)
	gone, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(gone, []string{ids[0]}) {
		t.Errorf("tombstoned %v, want only A's deleted entry %s (B's %v are outside the scope listed)", gone, ids[0], ids[2:])
	}
}

// putClockifyEntries puts the users named and one finished entry of each
// user given, two hours apart from start; it returns the entries' ids.
func putClockifyEntries(f *clockifytest.Server, start time.Time, users ...string) []string {
	var ids []string
	for i, u := range users {
		f.PutUser(clockifytest.User{ID: u, Name: u, Email: u + "@example.com", Status: "ACTIVE"})
		from := start.Add(time.Duration(i) * 2 * time.Hour)
		end := from.Add(time.Hour)
		id := clockifytest.NewID()
		f.PutTimeEntry(clockifytest.TimeEntry{ID: id, UserID: u, Start: from, End: &end})
		ids = append(ids, id)
	}
	return ids
}

// TestUnstorableRecordFailsAloneThroughTheApp (guarantee 12): a time entry
// whose hours Postgres' numeric refuses (1e-20000) fails alone: the pass
// succeeds with the rest of its page stored, `cursors` names the record and
// its error, and once the provider serves it fixed, the next pass stores it
// and the note goes.
func TestUnstorableRecordFailsAloneThroughTheApp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newHarvestEnv(t, 6, harvestfake.Options{NoRateLimit: true})
	te, _ := e.fake.TimeEntry(3)
	te.Hours, te.UpdatedAt = "1e-20000", time.Time{} // numeric keeps 16,383 digits after the point
	e.fake.PutTimeEntry(te)
	a, p := e.open(t, "", "    overlap: 1s\n")
	res, err := p.Incremental(ctx, "acme", clients.TimeEntries)
	if err != nil {
		t.Fatalf("a pass with one unstorable record failed: %v", err)
	}
	if c := res[0].Counts; c.Quarantined != 1 || c.Inserted != 5 {
		t.Fatalf("counts %+v, want 5 stored and 1 quarantined", c)
	}
	note := func() string {
		rows, err := a.CursorRows(ctx, "acme", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.Resource == "time_entries" {
				return r.QuarantineNote
			}
		}
		return ""
	}
	if n := note(); !strings.Contains(n, "id 3") {
		t.Errorf("cursors does not name the record that could not be stored: %q", n)
	}
	te.Hours, te.UpdatedAt = "2.25", time.Time{}
	e.fake.PutTimeEntry(te)
	if _, err := p.Incremental(ctx, "acme", clients.TimeEntries); err != nil {
		t.Fatal(err)
	}
	var hours string
	if err := e.pool.QueryRow(ctx, `SELECT hours::text FROM time_entries WHERE source = 'acme' AND id = '3'`).Scan(&hours); err != nil || hours != "2.25" {
		t.Errorf("entry 3 after the fix: hours %q, %v", hours, err)
	}
	if n := note(); n != "" {
		t.Errorf("the quarantine note stays after the record went in: %q", n)
	}
}

// TestQuotaWaitHoldsNoTransaction (guarantee 10, and 5): a Toggl source
// whose quota (3 requests a 2 s window) runs out mid-sync waits for the
// next window through app.Open, with no transaction open while it waits,
// and the sync succeeds.
func TestQuotaWaitHoldsNoTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := toggltest.New(toggltest.Options{Quota: 3, QuotaWindow: 2 * time.Second})
	t.Cleanup(f.Close)
	u := pgtest.URL(t)
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	yaml := fmt.Sprintf(`
database_url: ${DATABASE_URL}
sources:
  - name: tg
    kind: toggl
    base_url: %s
    workspace_id: "%d"
    token: %s
    rate_limit: {requests: 100, per: 1s}
    resources: [clients, projects, tasks, time_entries]
`, f.URL(), f.WorkspaceID(), f.Token())
	cfg, err := config.Parse("tg.yaml", []byte(yaml), func(k string) (string, bool) { return u, k == "DATABASE_URL" })
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.Open(ctx, cfg, u, "v0.0.0-test", zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	p, err := a.Poller(ctx, "tg")
	if err != nil {
		t.Fatal(err)
	}
	watch := idleInTx(pool)
	_, err = p.Incremental(ctx, "tg")
	samples := watch()
	if err != nil {
		t.Fatalf("sync: %v (a quota is waited for, not an error)", err)
	}
	noTxWhileWaiting(t, f.Requests(), samples, time.Second)
}
