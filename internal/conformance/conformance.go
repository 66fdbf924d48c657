// Package conformance is the one test suite every provider client runs
// (Harvest, Toggl, Clockify): against the provider's own fake server, real
// PostgreSQL (internal/pgtest) and the real poller, it checks the promises
// of DESIGN.md that depend on the client: a re-delivered record leaves one
// unchanged row, a newer version wins, an older one is skipped, a deletion
// becomes a tombstone, a malformed page fails naming source, resource and
// page and changes nothing, and the rate limit holds in every window.
//
// A provider's test package implements Harness and calls Run, with a
// TestMain that calls pgtest.Main:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//	func TestConformance(t *testing.T) { conformance.Run(t, harness{}) }
package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/cursor"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/poller"
	"github.com/tidemarkhq/tidemark/upsert"
)

// Malformation is a way the fake breaks its time-entry listings.
type Malformation int

const (
	// BadJSON: a complete body that is not JSON (a body cut short is a
	// transport fault, retried by httpx, not bad input).
	BadJSON Malformation = iota + 1
	// HTMLPage: 200 with an HTML page.
	HTMLPage
	// MissingVersion: the first record lacks its version stamp (Harvest
	// updated_at, Toggl at).
	MissingVersion
)

func (m Malformation) String() string {
	switch m {
	case BadJSON:
		return "bad JSON"
	case HTMLPage:
		return "HTML page"
	case MissingVersion:
		return "record without version"
	}
	return fmt.Sprintf("malformation %d", int(m))
}

// Malformations lists every kind the suite injects.
var Malformations = []Malformation{BadJSON, HTMLPage, MissingVersion}

// Options are what the suite asks of a new fake and its source.
type Options struct {
	// RateLimit is the budget the source must be built with. The fake's own
	// limits (429 buckets, quotas) must be off.
	RateLimit httpx.RateLimit
}

// Harness is implemented by each provider's test.
type Harness interface {
	// New starts a fresh fake (closed by t.Cleanup) whose clock is close to
	// ours and only moves with Tick, and returns it with a source pointing
	// at it that mirrors time entries.
	New(t *testing.T, o Options) Fake
	// DeletionsByReconcile says how the provider reports deletions: true
	// when only reconciliation finds them (Harvest), false when incremental
	// passes deliver them (Toggl's server_deleted_at).
	DeletionsByReconcile() bool
}

// Fake is one running fake provider, driven by the suite.
type Fake interface {
	Source() clients.Source
	// Put creates or updates time entry id with notes as its content; its
	// version is the fake's clock and its spent date the clock's day.
	Put(id int64, notes string)
	// Delete deletes time entry id at the fake's clock.
	Delete(id int64)
	// Tick moves the fake's clock forward.
	Tick(d time.Duration)
	// Malform breaks every time-entry listing from now on; 0 heals it.
	Malform(m Malformation)
	// Requests returns when each request reached the fake (our clock).
	Requests() []time.Time
	// Versions returns the live time entries (decimal id → version): the
	// ground truth.
	Versions() map[string]time.Time
}

// Overlap is the overlap the suite's poller uses.
const Overlap = time.Minute

type env struct {
	t    *testing.T
	fake Fake
	src  clients.Source
	pool *pgxpool.Pool
	p    *poller.Poller
	h    Harness
}

func setup(t *testing.T, h Harness, o Options) *env {
	t.Helper()
	if o.RateLimit == (httpx.RateLimit{}) {
		o.RateLimit = httpx.RateLimit{Requests: 1000, Per: time.Second}
	}
	f := h.New(t, o)
	pool := pgtest.DB(t)
	src := f.Source()
	p, err := poller.New(poller.Params{
		Pool:    pool,
		Sources: []poller.Source{{Source: src, Resources: []clients.Resource{clients.TimeEntries}, Overlap: Overlap}},
		Logger:  zerolog.New(zerolog.NewTestWriter(t)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return &env{t: t, fake: f, src: src, pool: pool, p: p, h: h}
}

// Run runs the suite against h. Subtests run in parallel, each with its own
// fake and database.
func Run(t *testing.T, h Harness) {
	t.Run("RedeliveryIsOneUnchangedRow", func(t *testing.T) { t.Parallel(); testRedelivery(t, h) })
	t.Run("NewerVersionWins", func(t *testing.T) { t.Parallel(); testNewerWins(t, h) })
	t.Run("OlderVersionIsSkipped", func(t *testing.T) { t.Parallel(); testOlderSkipped(t, h) })
	t.Run("DeletionBecomesTombstone", func(t *testing.T) { t.Parallel(); testDeletion(t, h) })
	for _, m := range Malformations {
		t.Run("MalformedPage/"+strings.ReplaceAll(m.String(), " ", "_"), func(t *testing.T) { t.Parallel(); testMalformed(t, h, m) })
	}
	t.Run("RateLimitWindowHolds", func(t *testing.T) { t.Parallel(); testRateLimit(t, h) })
}

func (e *env) incremental() poller.Result {
	e.t.Helper()
	res, err := e.p.Incremental(e.t.Context(), e.src.Name(), clients.TimeEntries)
	if err != nil {
		e.t.Fatalf("incremental pass: %v", err)
	}
	if len(res) != 1 {
		e.t.Fatalf("incremental pass: %d results, want 1", len(res))
	}
	return res[0]
}

type row struct {
	version time.Time
	deleted bool
	notes   string
	hash    []byte
}

func (e *env) mirror() map[string]row {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(),
		`SELECT id, updated_at, deleted_at IS NOT NULL, coalesce(notes, ''), content_hash FROM time_entries WHERE source = $1`, e.src.Name())
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]row{}
	for rows.Next() {
		var id string
		var r row
		if err := rows.Scan(&id, &r.version, &r.deleted, &r.notes, &r.hash); err != nil {
			e.t.Fatal(err)
		}
		out[id] = r
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// assertConverged checks that the live rows are exactly the fake's live
// entries at their versions.
func (e *env) assertConverged() {
	e.t.Helper()
	truth := e.fake.Versions()
	m := e.mirror()
	for id, v := range truth {
		r, ok := m[id]
		switch {
		case !ok:
			e.t.Errorf("entry %s is live at the source but missing from the mirror", id)
		case r.deleted:
			e.t.Errorf("entry %s is live at the source but tombstoned", id)
		case !r.version.Equal(v):
			e.t.Errorf("entry %s: mirror version %v, source %v", id, r.version.UTC(), v.UTC())
		}
	}
	for id, r := range m {
		if _, ok := truth[id]; !ok && !r.deleted {
			e.t.Errorf("entry %s is live in the mirror but not at the source", id)
		}
	}
}

func testRedelivery(t *testing.T, h Harness) {
	e := setup(t, h, Options{})
	e.fake.Put(1, "first")
	e.fake.Put(2, "second")
	e.fake.Tick(time.Second)
	r1 := e.incremental()
	if r1.Counts.Inserted != 2 {
		t.Fatalf("first pass counts %+v, want 2 inserted", r1.Counts)
	}
	before := e.mirror()
	// The second pass re-delivers both (the window starts an overlap before
	// the cursor): nothing may change.
	r2 := e.incremental()
	if r2.Counts.Fetched < 2 || r2.Counts.Unchanged != r2.Counts.Fetched || r2.Counts.Inserted+r2.Counts.Updated != 0 {
		t.Fatalf("re-delivery counts %+v, want every fetched record unchanged", r2.Counts)
	}
	after := e.mirror()
	if len(after) != 2 {
		t.Fatalf("%d rows, want 2 (one per id)", len(after))
	}
	for id, b := range before {
		a := after[id]
		if !a.version.Equal(b.version) || !bytes.Equal(a.hash, b.hash) || a.notes != b.notes {
			t.Errorf("entry %s changed on re-delivery: %+v → %+v", id, b, a)
		}
	}
	// The same page applied again directly is unchanged too.
	recs := e.list(clients.Window{})
	if c := e.apply(recs); c.Unchanged != int64(len(recs)) || len(recs) != 2 {
		t.Errorf("direct re-apply of %d records: %+v, want all unchanged", len(recs), c)
	}
	e.assertConverged()
}

func testNewerWins(t *testing.T, h Harness) {
	e := setup(t, h, Options{})
	e.fake.Put(1, "draft")
	e.fake.Tick(time.Second)
	e.incremental()
	e.fake.Tick(2 * time.Second)
	e.fake.Put(1, "final")
	e.fake.Tick(time.Second)
	r := e.incremental()
	if r.Counts.Updated != 1 {
		t.Errorf("counts %+v, want 1 updated", r.Counts)
	}
	m := e.mirror()
	if got := m["1"]; got.notes != "final" || !got.version.Equal(e.fake.Versions()["1"]) {
		t.Errorf("row %+v, want notes final at version %v", got, e.fake.Versions()["1"])
	}
	if len(m) != 1 {
		t.Errorf("%d rows, want 1", len(m))
	}
	e.assertConverged()
}

func testOlderSkipped(t *testing.T, h Harness) {
	e := setup(t, h, Options{})
	e.fake.Put(1, "old")
	e.fake.Put(2, "other")
	e.fake.Tick(time.Second)
	old := e.list(clients.Window{})
	if len(old) != 2 {
		t.Fatalf("listing returned %d records, want 2", len(old))
	}
	e.fake.Tick(2 * time.Second)
	e.fake.Put(1, "new")
	e.fake.Tick(time.Second)
	e.incremental()
	// The older page arrives late (a slow retry, a backfill, another
	// replica): entry 1 is stale, entry 2 unchanged.
	c := e.apply(old)
	if c.Stale != 1 || c.Unchanged != 1 || c.Inserted+c.Updated != 0 {
		t.Errorf("applying the older page: %+v, want 1 stale and 1 unchanged", c)
	}
	if got := e.mirror()["1"]; got.notes != "new" {
		t.Errorf("entry 1 went back to %q", got.notes)
	}
	e.assertConverged()
}

func testDeletion(t *testing.T, h Harness) {
	e := setup(t, h, Options{})
	e.fake.Put(1, "doomed")
	e.fake.Put(2, "kept")
	e.fake.Tick(time.Second)
	e.incremental()
	e.fake.Tick(2 * Overlap)
	e.fake.Delete(1)
	e.fake.Tick(2 * Overlap)
	if h.DeletionsByReconcile() {
		res, err := e.p.Reconcile(t.Context(), e.src.Name(), clients.TimeEntries)
		if err != nil {
			t.Fatalf("reconcile: %v", err)
		}
		if len(res) != 1 || res[0].Counts.Tombstoned != 1 {
			t.Errorf("reconcile results %+v, want 1 tombstoned", res)
		}
	} else {
		e.incremental()
	}
	m := e.mirror()
	if !m["1"].deleted {
		t.Errorf("deleted entry 1 is not tombstoned: %+v", m["1"])
	}
	if m["2"].deleted || m["2"].notes != "kept" {
		t.Errorf("entry 2 changed: %+v", m["2"])
	}
	e.assertConverged()
}

func testMalformed(t *testing.T, h Harness, mal Malformation) {
	e := setup(t, h, Options{})
	e.fake.Put(1, "one")
	e.fake.Tick(time.Second)
	e.incremental()
	cur0 := e.cursor()
	rows0 := e.mirror()
	e.fake.Tick(2 * time.Second)
	e.fake.Put(1, "one, edited")
	e.fake.Put(2, "two")
	e.fake.Tick(time.Second)

	e.fake.Malform(mal)
	_, err := e.p.Incremental(t.Context(), e.src.Name(), clients.TimeEntries)
	if err == nil {
		t.Fatal("a malformed page passed")
	}
	if !errors.Is(err, httpx.ErrDecode) {
		t.Errorf("error is not a decode error: %v", err)
	}
	for _, want := range []string{e.src.Name(), string(clients.TimeEntries), "page 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	rows1 := e.mirror()
	if len(rows1) != len(rows0) {
		t.Errorf("rows %d → %d after a failed pass", len(rows0), len(rows1))
	}
	for id, r := range rows0 {
		if a := rows1[id]; !a.version.Equal(r.version) || !bytes.Equal(a.hash, r.hash) || a.deleted != r.deleted {
			t.Errorf("entry %s changed by a failed pass: %+v → %+v", id, r, a)
		}
	}
	if cur := e.cursor(); !cur.Equal(cur0) {
		t.Errorf("cursor moved from %v to %v on a failed pass", cur0, cur)
	}
	// The next good pass converges.
	e.fake.Malform(0)
	e.incremental()
	e.assertConverged()
}

func (e *env) cursor() time.Time {
	e.t.Helper()
	c, err := e.p.Store().Load(context.Background(), e.src.Name(), string(clients.TimeEntries))
	if err != nil && !errors.Is(err, cursor.ErrNotFound) {
		e.t.Fatal(err)
	}
	return c.HighWater
}

func testRateLimit(t *testing.T, h Harness) {
	lim := httpx.RateLimit{Requests: 5, Per: 500 * time.Millisecond}
	e := setup(t, h, Options{RateLimit: lim})
	e.fake.Put(1, "x")
	const workers, each = 4, 4
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for range workers {
		wg.Go(func() {
			for range each {
				errs <- e.src.List(t.Context(), clients.TimeEntries, clients.Window{}, func(context.Context, clients.Page) error { return nil })
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("listing: %v", err)
		}
	}
	at := e.fake.Requests()
	if len(at) < workers*each {
		t.Fatalf("%d requests reached the fake, want at least %d", len(at), workers*each)
	}
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	for i := range at {
		n := 0
		for j := i; j < len(at) && at[j].Sub(at[i]) < lim.Per; j++ {
			n++
		}
		if n > lim.Requests {
			t.Fatalf("%d requests within %v from request %d (limit %d per %v)", n, lim.Per, i, lim.Requests, lim.Per)
		}
	}
}

// list returns every record of one listing through the source itself.
func (e *env) list(w clients.Window) []clients.Record {
	e.t.Helper()
	var out []clients.Record
	err := e.src.List(e.t.Context(), clients.TimeEntries, w, func(_ context.Context, p clients.Page) error {
		out = append(out, p.Records...)
		return nil
	})
	if err != nil {
		e.t.Fatalf("listing: %v", err)
	}
	return out
}

// apply writes records directly with upsert.Apply in one transaction.
func (e *env) apply(recs []clients.Record) upsert.Counts {
	e.t.Helper()
	ctx := context.Background()
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	c, err := upsert.Apply(ctx, tx, e.src.Name(), clients.TimeEntries, recs)
	if err != nil {
		e.t.Fatalf("apply: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		e.t.Fatal(err)
	}
	return c
}

// NewClock returns a manual clock for a fake (Options.Clock): at our now,
// truncated to the second, moving only with Advance.
func NewClock() *fakeapi.Clock { return fakeapi.NewClock(time.Now().UTC().Truncate(time.Second)) }
