package poller_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/logtest"
	"github.com/tidemarkhq/tidemark/internal/slowdown"
	"github.com/tidemarkhq/tidemark/poller"
	"github.com/tidemarkhq/tidemark/schema"
)

// newPoller is poller.New for a test: it fails the test on error and closes
// the poller when the test ends.
func newPoller(t *testing.T, params poller.Params) *poller.Poller {
	t.Helper()
	p, err := poller.New(params)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// startDaemon starts a daemon over p that runs its first passes at once; it
// is stopped when the test ends (before p closes). Stopping it earlier too
// is harmless.
func startDaemon(t *testing.T, p *poller.Poller, s poller.Schedule) *poller.Daemon {
	t.Helper()
	d, err := poller.NewDaemon(p, config.CronParser, []poller.Schedule{s})
	if err != nil {
		t.Fatal(err)
	}
	d.Start(context.Background(), true)
	t.Cleanup(func() { _ = d.Stop(context.Background()) })
	return d
}

// waitFor polls ok until it holds; d (scaled by TIDEMARK_TEST_SLOWDOWN) is
// a safety net.
func waitFor(t *testing.T, d time.Duration, ok func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(slowdown.Scale(d))
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitForLog waits until logs hold text, and shows them if they never do.
func waitForLog(t *testing.T, logs *logtest.Buffer, d time.Duration, text string) {
	t.Helper()
	deadline := time.Now().Add(slowdown.Scale(d))
	for !strings.Contains(logs.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q logged:\n%s", text, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// backfillFrom is the first day of the backfill tests' ranges.
var backfillFrom = clients.Date{Year: 2026, Month: 1, Day: 1}

// daily returns a fake source with n entries, one a day from backfillFrom.
func daily(n int, notes string) *fakeSource {
	src := newFakeSource("acme", t0)
	for i := 0; i < n; i++ {
		src.put(i+1, backfillFrom.AddDays(i), notes)
	}
	return src
}

// today is the current UTC day, inside any reconcile's lookback.
func today() clients.Date { return clients.DateOf(time.Now().UTC()) }

// onDay returns a fake source "acme" with one entry per notes (ids from 1),
// all spent on d.
func onDay(d clients.Date, notes ...string) *fakeSource {
	src := newFakeSource("acme", t0)
	for i, n := range notes {
		src.put(i+1, d, n)
	}
	return src
}

// beforeToday returns a fake source "acme" with n entries, entry i spent i
// days before today.
func beforeToday(n int) *fakeSource {
	src := newFakeSource("acme", t0)
	for i := 1; i <= n; i++ {
		src.put(i, today().AddDays(-i), "x")
	}
	return src
}

// reconcile runs a reconcile of source "acme" (of rs, or of every resource)
// that must succeed.
func reconcile(t *testing.T, p *poller.Poller, rs ...clients.Resource) []poller.Result {
	t.Helper()
	res, err := p.Reconcile(context.Background(), "acme", rs...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// incremental runs an incremental pass of source "acme" that must succeed.
func incremental(t *testing.T, p *poller.Poller) []poller.Result {
	t.Helper()
	res, err := p.Incremental(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// fakeSource is an in-memory clients.Source with full control over page
// boundaries, the source clock and failures. The end-to-end tests use the
// simulated Harvest tracker over HTTP instead.
type fakeSource struct {
	name string

	mu       sync.Mutex
	recs     map[string]*fakeRec
	now      time.Time // the source's clock
	pageSize int
	// failPage, when > 0, makes that page of the next listing fail once.
	failPage int
	// onPage, when set, runs before a page is delivered (to block, to mutate).
	onPage func(w clients.Window, page int)
	// wait, when set, runs before a page is delivered with the listing's
	// context (a client waiting for its source: httpx.Sleep).
	wait  func(ctx context.Context, page int)
	lists int
	// hideOnce leaves these ids out of the next listing (a listing that
	// misses a live record, e.g. a page shifted by a deletion).
	hideOnce map[string]bool
	// tombstoneOnce ends the next listing with a page of these ids deleted
	// at the version they have (Toggl's workspace scope tombstones the
	// entries absent from a complete listing that way).
	tombstoneOnce map[string]bool
}

type fakeRec struct {
	id      string
	version time.Time
	spent   clients.Date
	notes   string
	deleted bool
	user    string // "" is user "1"
}

func newFakeSource(name string, now time.Time) *fakeSource {
	return &fakeSource{name: name, recs: map[string]*fakeRec{}, now: now, pageSize: 3}
}

func (f *fakeSource) Name() string                  { return f.name }
func (f *fakeSource) Resources() []clients.Resource { return []clients.Resource{clients.TimeEntries} }

// put creates or updates a record at the source's current clock.
func (f *fakeSource) put(id int, spent clients.Date, notes string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recs[strconv.Itoa(id)] = &fakeRec{id: strconv.Itoa(id), version: f.now, spent: spent, notes: notes}
}

// putAt writes a record with a given version (late-visible writes).
func (f *fakeSource) putAt(id int, version time.Time, spent clients.Date, notes string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recs[strconv.Itoa(id)] = &fakeRec{id: strconv.Itoa(id), version: version, spent: spent, notes: notes}
}

func (f *fakeSource) remove(id int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.recs, strconv.Itoa(id))
}

func (f *fakeSource) tick(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

// truth returns live id → version.
func (f *fakeSource) truth() map[string]time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]time.Time{}
	for id, r := range f.recs {
		out[id] = r.version
	}
	return out
}

func (f *fakeSource) record(r *fakeRec, fetched time.Time) clients.Record {
	notes := r.notes
	raw := fmt.Sprintf(`{"id":%s,"spent_date":%q,"hours":1.5,"notes":%q,"updated_at":%q}`,
		r.id, r.spent.String(), notes, r.version.UTC().Format(time.RFC3339))
	return clients.Record{
		ID: r.id, Version: r.version, FetchedAt: fetched, Raw: []byte(raw),
		Row: schema.TimeEntries.Row(schema.Values{
			"spent_date": r.spent, "hours": clients.Decimal("1.5"), "notes": notes, "user_id": cmp.Or(r.user, "1"), "project_id": "2",
		}),
	}
}

var errInjected = errors.New("injected failure")

func (f *fakeSource) List(ctx context.Context, r clients.Resource, w clients.Window, fn func(context.Context, clients.Page) error) error {
	f.mu.Lock()
	f.lists++
	var sel []*fakeRec
	hidden := f.hideOnce
	f.hideOnce = nil
	var gone []clients.Record
	for id := range f.tombstoneOnce {
		rec := f.record(f.recs[id], time.Now())
		at := f.now
		rec.DeletedAt, rec.Raw = &at, []byte(fmt.Sprintf(`{"id":%s,"absent":true}`, id))
		gone = append(gone, rec)
	}
	f.tombstoneOnce = nil
	for _, rec := range f.recs {
		if hidden[rec.id] {
			continue
		}
		switch {
		case w.ByDate():
			if rec.spent.Before(w.From) || rec.spent.After(w.To) {
				continue
			}
		case !w.UpdatedSince.IsZero() && rec.version.Before(w.UpdatedSince):
			continue
		}
		cp := *rec
		sel = append(sel, &cp)
	}
	sort.Slice(sel, func(i, j int) bool { return sel[i].id < sel[j].id })
	pageSize := f.pageSize
	f.mu.Unlock()

	for n := 1; ; n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if f.onPage != nil {
			f.onPage(w, n)
		}
		if f.wait != nil {
			f.wait(ctx, n)
		}
		f.mu.Lock()
		fail := n == f.failPage
		if fail {
			f.failPage = 0
		}
		now := f.now
		f.mu.Unlock()
		if fail {
			return fmt.Errorf("%s %s page %d: %w", f.name, r, n, errInjected)
		}
		end := min(len(sel), pageSize)
		page := clients.Page{Resource: r, Number: n, SourceTime: now}
		for _, rec := range sel[:end] {
			page.Records = append(page.Records, f.record(rec, time.Now()))
		}
		sel = sel[end:]
		if err := fn(ctx, page); err != nil {
			return err
		}
		if len(sel) == 0 {
			if len(gone) > 0 {
				return fn(ctx, clients.Page{Resource: r, Number: n + 1, SourceTime: now, Records: gone})
			}
			return nil
		}
	}
}
