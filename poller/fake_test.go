package poller_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/schema"
)

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
	lists  int
	// hideOnce leaves these ids out of the next listing (a listing that
	// misses a live record, e.g. a page shifted by a deletion).
	hideOnce map[string]bool
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
			return nil
		}
	}
}
