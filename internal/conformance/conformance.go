// Package conformance is the one test suite every provider client runs
// (Harvest, Toggl, Clockify): against the provider's own fake server, real
// PostgreSQL (internal/pgtest) and the real poller, it checks the promises
// of DESIGN.md that depend on the client, for every resource the source
// serves: a re-delivered record leaves one unchanged row, a newer version
// wins, an older one is skipped, a deletion becomes a tombstone, an
// incremental pass fetches only what changed, a malformed page (bad JSON,
// HTML, a record without version or id) fails naming source, resource and
// page and changes nothing; and, once per provider, the rate limit holds
// in every window.
//
// A provider's test package declares its Harness (a Provider over its fake
// server) and calls Run, with a TestMain that calls pgtest.Main:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//	func TestConformance(t *testing.T) { conformance.Run(t, conformance.Provider[*toggltest.Server]{…}) }
//
// Subtests are named resource/check (TimeEntries is time_entries:
// time_entries/NewerVersionWins, projects/MalformedPage/HTML_page, …).
// What differs between providers is declared, per resource, in
// Capabilities; the checks never ask which provider they run against.
package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/cursor"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/internal/slowdown"
	"github.com/tidemarkhq/tidemark/poller"
	"github.com/tidemarkhq/tidemark/schema"
	"github.com/tidemarkhq/tidemark/upsert"
)

// Malformation is a way the fake breaks a listing: the fake kit's kinds.
type Malformation = fakeapi.Malformation

// The malformations the suite injects (see fakeapi for what each does).
const (
	// BadJSON: a complete body that is not JSON (a body cut short is a
	// transport fault, retried by httpx, not bad input).
	BadJSON = fakeapi.BadJSON
	// HTMLPage: 200 with an HTML page.
	HTMLPage = fakeapi.HTMLPage
	// MissingVersion: the first record lacks its version stamp.
	MissingVersion = fakeapi.MissingVersion
	// MissingID: the first record lacks its id.
	MissingID = fakeapi.MissingID
)

// Malformations lists every kind the suite injects.
var Malformations = []Malformation{BadJSON, HTMLPage, MissingVersion, MissingID}

// Deletion says how a resource's deletions reach the mirror.
type Deletion int

const (
	// Reported: incremental passes deliver them as tombstones (Toggl's
	// server_deleted_at, Clockify's deletion feed).
	Reported Deletion = iota + 1
	// Reconciled: a deleted record only vanishes from listings, so only a
	// reconcile pass finds it (Harvest).
	Reconciled
	// Hidden: no pass can find them; the deletion check is skipped, saying
	// so.
	Hidden
)

func (d Deletion) String() string {
	switch d {
	case Reported:
		return "reported by incremental passes"
	case Reconciled:
		return "found by reconcile"
	case Hidden:
		return "not found at all"
	}
	return "Deletion(" + strconv.Itoa(int(d)) + ")"
}

// Capabilities are what a provider can and cannot do, per resource. They
// are declarations, held to the truth both ways by the checks: a resource
// declared Reconciled whose deletion an incremental pass already reports
// fails, and so does one declared ListedWhole whose pass brings only what
// changed (and the converse of each).
type Capabilities struct {
	// Deletions says how each served resource's deletions are found. Every
	// resource the source serves must have an entry.
	Deletions map[clients.Resource]Deletion
	// ListingClock names the resources the source lists without a version
	// stamp of their own: a listed record's version is the source's clock
	// when it served the page (Clockify's reference lists). The mirror's
	// version is then not earlier than the fake's stamp rather than equal
	// to it, and a record cannot lack a version (MissingVersion is
	// skipped).
	ListingClock map[clients.Resource]bool
	// ListedWhole names the resources an incremental pass lists whole,
	// because the source has no filter by change for them (Toggl's clients
	// and users, Clockify's reference lists): every live record comes back
	// each pass, unchanged. The others' passes bring only what changed
	// since the cursor, less the overlap.
	ListedWhole map[clients.Resource]bool
	// ListedUnderParents names the resources listed under the records of
	// another (Harvest's payments under invoices, rates under users) whose
	// incremental pass skips a parent already read at its version: the
	// overlap re-delivers nothing through the source (the suite then
	// re-applies the records directly).
	ListedUnderParents map[clients.Resource]bool
	// Scopes are the values of Options.Scope the source can be built
	// with, each listing a different way (Toggl's me and workspace); nil:
	// one way. The repeated-page check runs every listing in each.
	Scopes []string
}

// Options are what the suite asks of a new fake and its source.
type Options struct {
	// RateLimit is the budget the source must be built with. The fake's own
	// limits (429 buckets, quotas) must be off.
	RateLimit httpx.RateLimit
	// OnResponse must be the source's provider.Env.OnResponse: the rate
	// limit check stamps each request on our side when it was sent.
	OnResponse func(status int, took time.Duration)
	// PageSize, when set, is the page size the source must ask for.
	PageSize int
	// Scope, when set, is one of Capabilities.Scopes.
	Scope string
}

// Harness is what Run asks of a provider (Provider is one).
type Harness interface {
	// New starts a fresh fake (closed by t.Cleanup) whose clock is close to
	// ours and only moves with Tick, and returns it with a source pointing
	// at it that serves every resource under test.
	New(t *testing.T, o Options) Fake
	// Capabilities declares the provider's differences, per resource.
	Capabilities() Capabilities
}

// Fake is one running fake provider, driven by the suite. Ids are the
// suite's small integers; the mirror holds them in decimal (ID).
type Fake interface {
	Source() clients.Source
	// Put creates or updates record id of r with content as the value of
	// r's content column (ContentColumn), versioned at the fake's clock; a
	// time entry's spent date is the clock's day. The fake supplies
	// whatever else the record needs (a task's project). Content is one
	// word: a dialect may split names at spaces.
	Put(r clients.Resource, id int64, content string)
	// Delete deletes record id of r at the fake's clock.
	Delete(r clients.Resource, id int64)
	// Tick moves the fake's clock forward.
	Tick(d time.Duration)
	// Malform breaks the first page (as a pass counts pages) of every
	// listing of r from now on; 0 heals it.
	Malform(r clients.Resource, m Malformation)
	// DropDate makes every response lack the Date header from now on (a
	// proxy that drops it).
	DropDate()
	// Repeat makes every listing serve its first page from now on.
	Repeat(m fakeapi.Repeat)
	// Requests is the fake's request log.
	Requests() []fakeapi.Request
	// Versions returns r's live records (mirror id → version): the ground
	// truth.
	Versions(r clients.Resource) map[string]time.Time
}

// ID is the mirror's id of the suite's record id.
func ID(id int64) string { return strconv.FormatInt(id, 10) }

// ContentColumn is the column of r that Fake.Put fills: notes when the
// table has it (time entries), else name, else its first text column that
// is no id (users: first_name), else its first numeric one (a rate's
// amount, an assignment's hourly_rate: see ContentValue).
func ContentColumn(r clients.Resource) (string, bool) {
	t, ok := schema.Lookup(r)
	if !ok {
		return "", false
	}
	for _, name := range []string{"notes", "name"} {
		if c, ok := t.Column(name); ok && c.Type == schema.Text {
			return name, true
		}
	}
	for _, c := range t.Columns {
		if c.Type == schema.Text && !strings.HasSuffix(c.Name, "_id") {
			return c.Name, true
		}
	}
	for _, c := range t.Columns {
		if c.Type == schema.Numeric {
			return c.Name, true
		}
	}
	return "", false
}

// ContentValue is what Fake.Put stores for the suite's content word in r's
// content column, as the column's text reads back: the word in a text
// column; in a numeric one, the word's letters as a base-27 whole number
// (distinct words, distinct numbers).
func ContentValue(r clients.Resource, word string) string {
	t, _ := schema.Lookup(r)
	col, _ := ContentColumn(r)
	if c, ok := t.Column(col); !ok || c.Type != schema.Numeric {
		return word
	}
	var n int64
	for _, ch := range strings.ToLower(word) {
		n = n*27 + int64(ch-'a'+1)%27
	}
	return strconv.FormatInt(n, 10)
}

// Overlap is the overlap the suite's poller uses.
const Overlap = time.Minute

// Run runs the suite against h: every check for every resource the source
// serves, then the rate-limit check once. Subtests run in parallel, each
// with its own fake and database.
func Run(t *testing.T, h Harness) {
	caps := h.Capabilities()
	served := h.New(t, Options{}).Source().Resources()
	if len(served) == 0 {
		t.Fatal("the harness's source serves no resource")
	}
	checkCaps(t, caps, served)
	for _, r := range served {
		t.Run(string(r), func(t *testing.T) {
			t.Parallel()
			run := func(name string, check func(*env)) {
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					check(setup(t, h, caps, r, Options{}))
				})
			}
			run("RedeliveryIsOneUnchangedRow", testRedelivery)
			run("NewerVersionWins", testNewerWins)
			run("OlderVersionIsSkipped", testOlderSkipped)
			run("DeletionBecomesTombstone", testDeletion)
			run("IncrementalListsOnlyChanges", testOnlyChanges)
			run("NoDateHeader", testNoDate)
			for _, m := range Malformations {
				run("MalformedPage/"+strings.ReplaceAll(m.String(), " ", "_"), func(e *env) { testMalformed(e, m) })
			}
		})
	}
	// The budget is the source's, not a resource's: once, on time entries
	// when served (the listing with the most requests).
	r := served[0]
	if slices.Contains(served, clients.TimeEntries) {
		r = clients.TimeEntries
	}
	t.Run("RateLimitWindowHolds", func(t *testing.T) { t.Parallel(); testRateLimit(t, h, caps, r) })
	t.Run("RepeatedPagesEnd", func(t *testing.T) { t.Parallel(); testRepeatedPages(t, h, caps, served) })
}

// checkCaps refuses capabilities that leave a served resource undeclared
// or name one the source does not serve (a stale declaration).
func checkCaps(t *testing.T, caps Capabilities, served []clients.Resource) {
	t.Helper()
	for _, r := range served {
		if _, ok := ContentColumn(r); !ok {
			t.Errorf("resource %s: no text column in its declaration for Fake.Put's content", r)
		}
		switch d := caps.Deletions[r]; d {
		case Reported, Reconciled, Hidden:
		case 0:
			t.Errorf("Capabilities.Deletions: %s is served but not declared", r)
		default:
			t.Errorf("Capabilities.Deletions: %s: unknown %v", r, d)
		}
	}
	stale := func(field string, r clients.Resource) {
		if !slices.Contains(served, r) {
			t.Errorf("Capabilities.%s names %s, which the source does not serve", field, r)
		}
	}
	for r := range caps.Deletions {
		stale("Deletions", r)
	}
	for r := range caps.ListingClock {
		stale("ListingClock", r)
	}
	for r := range caps.ListedWhole {
		stale("ListedWhole", r)
	}
	for r := range caps.ListedUnderParents {
		stale("ListedUnderParents", r)
	}
	if t.Failed() {
		t.FailNow()
	}
}

type env struct {
	t       *testing.T
	fake    Fake
	src     clients.Source
	pool    *pgxpool.Pool
	p       *poller.Poller
	caps    Capabilities
	r       clients.Resource
	content string // the content column
}

func setup(t *testing.T, h Harness, caps Capabilities, r clients.Resource, o Options) *env {
	t.Helper()
	if o.RateLimit == (httpx.RateLimit{}) {
		o.RateLimit = httpx.RateLimit{Requests: 1000, Per: time.Second}
	}
	f := h.New(t, o)
	pool := pgtest.DB(t)
	src := f.Source()
	p, err := poller.New(poller.Params{
		Pool:    pool,
		Sources: []poller.Source{{Source: src, Resources: []clients.Resource{r}, Overlap: Overlap}},
		Logger:  zerolog.New(zerolog.NewTestWriter(t)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	col, _ := ContentColumn(r)
	return &env{t: t, fake: f, src: src, pool: pool, p: p, caps: caps, r: r, content: col}
}

func (e *env) put(id int64, content string) { e.fake.Put(e.r, id, content) }

// seed puts records 1, 2, ... with contents at the fake and moves its clock
// a second on, past their versions.
func (e *env) seed(contents ...string) {
	for i, c := range contents {
		e.put(int64(i+1), c)
	}
	e.fake.Tick(time.Second)
}

// edit moves the fake's clock on by after, puts record id with content,
// moves a second on and runs an incremental pass.
func (e *env) edit(after time.Duration, id int64, content string) poller.Result {
	e.t.Helper()
	e.fake.Tick(after)
	e.put(id, content)
	e.fake.Tick(time.Second)
	return e.incremental()
}

// word is how the content word reads back from the content column.
func (e *env) word(w string) string { return ContentValue(e.r, w) }

func (e *env) incremental() poller.Result {
	e.t.Helper()
	res, err := e.p.Incremental(e.t.Context(), e.src.Name(), e.r)
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
	content string
	hash    []byte
}

func (e *env) mirror() map[string]row {
	e.t.Helper()
	q := fmt.Sprintf(`SELECT id, updated_at, deleted_at IS NOT NULL, coalesce(%s::text, ''), content_hash FROM %s WHERE source = $1`,
		pgx.Identifier{e.content}.Sanitize(), pgx.Identifier{string(e.r)}.Sanitize())
	rows, err := e.pool.Query(context.Background(), q, e.src.Name())
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]row{}
	for rows.Next() {
		var id string
		var r row
		if err := rows.Scan(&id, &r.version, &r.deleted, &r.content, &r.hash); err != nil {
			e.t.Fatal(err)
		}
		out[id] = r
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// versionOK reports whether a mirror version is right for the source's:
// equal, or, for a resource versioned by the listing clock, not earlier.
func (e *env) versionOK(mirror, source time.Time) bool {
	if e.caps.ListingClock[e.r] {
		return !mirror.Before(source)
	}
	return mirror.Equal(source)
}

// assertConverged checks that the live rows are exactly the fake's live
// records at their versions.
func (e *env) assertConverged() {
	e.t.Helper()
	truth := e.fake.Versions(e.r)
	m := e.mirror()
	for id, v := range truth {
		r, ok := m[id]
		switch {
		case !ok:
			e.t.Errorf("%s %s is live at the source but missing from the mirror", e.r, id)
		case r.deleted:
			e.t.Errorf("%s %s is live at the source but tombstoned", e.r, id)
		case !e.versionOK(r.version, v):
			e.t.Errorf("%s %s: mirror version %v, source %v", e.r, id, r.version.UTC(), v.UTC())
		}
	}
	for id, r := range m {
		if _, ok := truth[id]; !ok && !r.deleted {
			e.t.Errorf("%s %s is live in the mirror but not at the source", e.r, id)
		}
	}
}

func testRedelivery(e *env) {
	t := e.t
	e.seed("first", "second")
	r1 := e.incremental()
	if r1.Counts.Inserted != 2 {
		t.Fatalf("first pass counts %+v, want 2 inserted", r1.Counts)
	}
	before := e.mirror()
	// The second pass re-delivers both (the window starts an overlap before
	// the cursor): nothing may change. A resource listed under its parents
	// skips the parents already read at their versions, once those are
	// older than the listing's clock by the overlap (a child added in the
	// parent's second keeps the parent's stamp): that re-delivery comes
	// first, the second pass is the skip.
	under := e.caps.ListedUnderParents[e.r]
	if under {
		e.fake.Tick(2 * Overlap)
		if c := e.incremental().Counts; c.Unchanged != c.Fetched || c.Inserted+c.Updated != 0 {
			t.Fatalf("re-delivery counts %+v, want every fetched record unchanged", c)
		}
	}
	r2 := e.incremental()
	switch {
	case under && r2.Counts.Fetched != 0:
		t.Errorf("%s is declared ListedUnderParents, but the pass fetched %+v again: drop the flag", e.r, r2.Counts)
	case !under && r2.Counts.Fetched == 0:
		t.Fatalf("re-delivery counts %+v: nothing fetched again (declare %s ListedUnderParents if its parents already read are skipped)", r2.Counts, e.r)
	case r2.Counts.Unchanged != r2.Counts.Fetched || r2.Counts.Inserted+r2.Counts.Updated != 0:
		t.Fatalf("re-delivery counts %+v, want every fetched record unchanged", r2.Counts)
	}
	after := e.mirror()
	if len(after) != 2 {
		t.Fatalf("%d rows, want 2 (one per id)", len(after))
	}
	for id, b := range before {
		a := after[id]
		if !a.version.Equal(b.version) || !bytes.Equal(a.hash, b.hash) || a.content != b.content {
			t.Errorf("%s %s changed on re-delivery: %+v → %+v", e.r, id, b, a)
		}
	}
	// The same page applied again directly is unchanged too.
	recs := e.list()
	if c := e.apply(recs); c.Unchanged != int64(len(recs)) || len(recs) != 2 {
		t.Errorf("direct re-apply of %d records: %+v, want all unchanged", len(recs), c)
	}
	e.assertConverged()
}

// testNoDate: behind a proxy that drops Date, every resource still gets
// its records in, each with a version (its own stamp, else the time the
// response was received): a version always has a source (issue 22).
func testNoDate(e *env) {
	t := e.t
	e.fake.DropDate()
	e.seed("first", "second")
	// Without Date the client's clock is ours, and the fake's is a second
	// ahead after seed: a window that ends at our clock would leave the
	// records out until the next pass. Wait for our clock to pass them.
	var newest time.Time
	for _, v := range e.fake.Versions(e.r) {
		if v.After(newest) {
			newest = v
		}
	}
	for time.Now().Before(newest.Add(2 * time.Second)) {
		time.Sleep(50 * time.Millisecond)
	}
	if c := e.incremental().Counts; c.Inserted != 2 {
		t.Fatalf("counts %+v, want 2 inserted", c)
	}
	m := e.mirror()
	for id := range e.fake.Versions(e.r) {
		if r, ok := m[id]; !ok || r.deleted || r.version.IsZero() {
			t.Errorf("%s %s: mirror row %+v, want it live with a version", e.r, id, r)
		}
	}
}

func testNewerWins(e *env) {
	t := e.t
	e.seed("draft")
	e.incremental()
	r := e.edit(2*time.Second, 1, "final")
	if r.Counts.Updated != 1 {
		t.Errorf("counts %+v, want 1 updated", r.Counts)
	}
	m := e.mirror()
	want := e.fake.Versions(e.r)[ID(1)]
	if got := m[ID(1)]; got.content != e.word("final") || !e.versionOK(got.version, want) {
		t.Errorf("row %+v, want %s final at version %v", got, e.content, want)
	}
	if len(m) != 1 {
		t.Errorf("%d rows, want 1", len(m))
	}
	e.assertConverged()
}

func testOlderSkipped(e *env) {
	t := e.t
	e.seed("old", "other")
	old := e.list()
	if len(old) != 2 {
		t.Fatalf("listing returned %d records, want 2", len(old))
	}
	e.edit(2*time.Second, 1, "new")
	// The older page arrives late (a slow retry, a backfill, another
	// replica): record 1 is stale; record 2 holds the stored content, so it
	// is unchanged whatever its version (a listing clock's moved on).
	stored := e.mirror()
	for _, rec := range old {
		if v := stored[rec.ID].version; rec.ID == ID(1) && !rec.Version.Before(v) {
			t.Fatalf("%s 1: the older page's version %v is not before the stored %v", e.r, rec.Version, v)
		}
	}
	c := e.apply(old)
	if c.Stale != 1 || c.Unchanged != 1 || c.Inserted+c.Updated != 0 {
		t.Errorf("applying the older page: %+v, want 1 stale and 1 unchanged", c)
	}
	if got := e.mirror()[ID(1)]; got.content != e.word("new") {
		t.Errorf("%s 1 went back to %q", e.r, got.content)
	}
	e.assertConverged()
}

func testDeletion(e *env) {
	t := e.t
	how := e.caps.Deletions[e.r]
	if how == Hidden {
		t.Skipf("%s: deletions are %v", e.r, how)
	}
	e.seed("doomed", "kept")
	e.incremental()
	e.fake.Tick(2 * Overlap)
	e.fake.Delete(e.r, 1)
	e.fake.Tick(2 * Overlap)
	e.incremental()
	switch reported := e.mirror()[ID(1)].deleted; {
	case how == Reconciled && reported:
		t.Errorf("%s: an incremental pass reported the deletion, but the harness declares deletions %v: declare Reported", e.r, how)
	case how == Reported && !reported:
		t.Errorf("%s: deletions are declared %v, but an incremental pass left deleted record 1 live", e.r, how)
	}
	if how == Reconciled {
		res, err := e.p.Reconcile(t.Context(), e.src.Name(), e.r)
		if err != nil {
			t.Fatalf("reconcile: %v", err)
		}
		if len(res) != 1 || res[0].Counts.Tombstoned != 1 {
			t.Errorf("reconcile results %+v, want 1 tombstoned", res)
		}
	}
	m := e.mirror()
	if !m[ID(1)].deleted {
		t.Errorf("deleted %s 1 is not tombstoned: %+v", e.r, m[ID(1)])
	}
	if m[ID(2)].deleted || m[ID(2)].content != e.word("kept") {
		t.Errorf("%s 2 changed: %+v", e.r, m[ID(2)])
	}
	e.assertConverged()
}

// testOnlyChanges: once the cursor has passed a record by more than the
// overlap, an incremental pass no longer fetches it, unless the resource is
// declared ListedWhole (then it comes back unchanged).
func testOnlyChanges(e *env) {
	t := e.t
	e.seed("still", "first")
	e.incremental()
	e.edit(2*Overlap, 2, "second")
	e.edit(2*Overlap, 2, "third")
	// The last pass's window starts an overlap before the second edit,
	// long after record 1's version.
	c := e.edit(2*Overlap, 2, "fourth").Counts
	switch whole := e.caps.ListedWhole[e.r]; {
	case whole && c.Fetched == 1:
		t.Errorf("%s is declared ListedWhole, but the pass fetched only the changed record (%+v): drop the flag", e.r, c)
	case whole && (c.Fetched != 2 || c.Unchanged != 1):
		t.Errorf("%s listed whole: counts %+v, want 2 fetched, 1 unchanged", e.r, c)
	case !whole && c.Fetched != 1:
		t.Errorf("counts %+v, want only the changed record fetched (declare %s ListedWhole if the source cannot filter it)", c, e.r)
	}
	if c.Updated != 1 {
		t.Errorf("counts %+v, want 1 updated", c)
	}
	if got := e.mirror()[ID(2)]; got.content != e.word("fourth") {
		t.Errorf("%s 2: %+v, want %s fourth", e.r, got, e.content)
	}
	e.assertConverged()
}

func testMalformed(e *env, mal Malformation) {
	t := e.t
	if mal == MissingVersion && e.caps.ListingClock[e.r] {
		t.Skipf("%s: versioned by the listing clock, a record has no version to lack", e.r)
	}
	e.seed("one")
	e.incremental()
	cur0 := e.cursor()
	rows0 := e.mirror()
	e.fake.Tick(2 * time.Second)
	e.put(1, "edited")
	e.put(2, "two")
	e.fake.Tick(time.Second)

	e.fake.Malform(e.r, mal)
	_, err := e.p.Incremental(t.Context(), e.src.Name(), e.r)
	if err == nil {
		t.Fatal("a malformed page passed")
	}
	if !errors.Is(err, httpx.ErrDecode) {
		t.Errorf("error is not a decode error: %v", err)
	}
	for _, want := range []string{e.src.Name(), string(e.r), "page 1"} {
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
			t.Errorf("%s %s changed by a failed pass: %+v → %+v", e.r, id, r, a)
		}
	}
	if cur := e.cursor(); !cur.Equal(cur0) {
		t.Errorf("cursor moved from %v to %v on a failed pass", cur0, cur)
	}
	// The next good pass converges.
	e.fake.Malform(e.r, 0)
	e.incremental()
	if got := e.mirror()[ID(1)]; got.content != e.word("edited") {
		t.Errorf("%s 1 after the good pass: %+v, want %s edited", e.r, got, e.content)
	}
	e.assertConverged()
}

func (e *env) cursor() time.Time {
	e.t.Helper()
	c, err := e.p.Store().Load(context.Background(), e.src.Name(), string(e.r))
	if err != nil && !errors.Is(err, cursor.ErrNotFound) {
		e.t.Fatal(err)
	}
	return c.HighWater
}

func testRateLimit(t *testing.T, h Harness, caps Capabilities, r clients.Resource) {
	lim := httpx.RateLimit{Requests: 5, Per: 500 * time.Millisecond}
	// Stamped on our side, when each request was sent (the response's
	// arrival less its round trip), not when the fake's handler ran: on a
	// busy machine the handler lags the send by however long the machine
	// takes to schedule it, which bunches requests sent apart and says
	// nothing of the limiter.
	var mu sync.Mutex
	var at []time.Time
	sent := func(_ int, took time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		at = append(at, time.Now().Add(-took))
	}
	e := setup(t, h, caps, r, Options{RateLimit: lim, OnResponse: sent})
	e.put(1, "x")
	const workers, each = 4, 4
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for range workers {
		wg.Go(func() {
			for range each {
				errs <- e.src.List(t.Context(), r, clients.Window{}, func(context.Context, clients.Page) error { return nil })
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
	mu.Lock()
	defer mu.Unlock()
	if len(at) < workers*each {
		t.Fatalf("%d requests were sent, want at least %d", len(at), workers*each)
	}
	if n := len(e.fake.Requests()); n < len(at) {
		t.Fatalf("%d requests reached the fake, %d were answered", n, len(at))
	}
	slices.SortFunc(at, time.Time.Compare)
	// A send stamp can still lag the limiter's grant (the goroutine runs
	// late after its wait), which brings it closer to the next grants: the
	// window allows that much lag (scaled by TIDEMARK_TEST_SLOWDOWN); a
	// limiter too fast by a quarter or more still fails.
	window := max(lim.Per-slowdown.Scale(lim.Per/5), lim.Per/2)
	for i := range at {
		n := 0
		for j := i; j < len(at) && at[j].Sub(at[i]) < window; j++ {
			n++
		}
		if n > lim.Requests {
			t.Fatalf("%d requests sent within %v from request %d (limit %d per %v, less %v for scheduling lag)",
				n, window, i, lim.Requests, lim.Per, lim.Per-window)
		}
	}
}

// list returns every record of one whole listing through the source itself.
func (e *env) list() []clients.Record {
	e.t.Helper()
	var out []clients.Record
	err := e.src.List(e.t.Context(), e.r, clients.Window{}, func(_ context.Context, p clients.Page) error {
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
	c, err := upsert.Apply(ctx, tx, e.src.Name(), e.r, recs)
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
