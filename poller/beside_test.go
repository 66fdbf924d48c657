package poller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/poller"
	"github.com/tidemarkhq/tidemark/schema"
)

// laneSource serves time entries in pages of one and roles in one page,
// logging when each listing starts and ends.
type laneSource struct {
	pages int
	mu    sync.Mutex
	log   []string
}

func (s *laneSource) Name() string { return "lanes" }
func (s *laneSource) Resources() []clients.Resource {
	return []clients.Resource{clients.TimeEntries, schema.Roles.Name}
}

func (s *laneSource) note(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, what)
}

func (s *laneSource) List(ctx context.Context, r clients.Resource, _ clients.Window, fn func(context.Context, clients.Page) error) error {
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	s.note(string(r) + " start")
	defer s.note(string(r) + " end")
	if r != clients.TimeEntries {
		rec := clients.Record{ID: "1", Version: at, FetchedAt: time.Now(), Raw: []byte(`{"id":1}`),
			Row: schema.Roles.Row(schema.Values{"name": "Designers", "user_ids": json.RawMessage(`[1]`)})}
		return fn(ctx, clients.Page{Resource: r, Number: 1, SourceTime: at, Records: []clients.Record{rec}})
	}
	for n := 1; n <= s.pages; n++ {
		rec := clients.Record{ID: fmt.Sprint(n), Version: at, FetchedAt: time.Now(), Raw: fmt.Appendf(nil, `{"id":%d}`, n),
			Row: schema.TimeEntries.Row(schema.Values{"spent_date": clients.DateOf(at), "hours": clients.Decimal("1"), "user_id": "1", "project_id": "1"})}
		if err := fn(ctx, clients.Page{Resource: r, Number: n, SourceTime: at, Records: []clients.Record{rec}}); err != nil {
			return err
		}
		time.Sleep(2 * time.Millisecond) // the next page's round trip
	}
	return nil
}

// TestLongDateListingRunsBesideTheRest: time entries run alone while their
// listing is short, and the steps after them start beside them once it has
// applied 25 pages (a first sync); every step still succeeds.
func TestLongDateListingRunsBesideTheRest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pages  int
		beside bool
	}{{3, false}, {40, true}} {
		t.Run(fmt.Sprint(tc.pages, "_pages"), func(t *testing.T) {
			t.Parallel()
			src := &laneSource{pages: tc.pages}
			p := newPoller(t, poller.Params{Pool: pgtest.DB(t), Sources: []poller.Source{{Source: src}}})
			res, err := p.Incremental(t.Context(), "lanes")
			if err != nil || len(res) != 2 {
				t.Fatalf("pass: %v (%d results)", err, len(res))
			}
			rolesStart := slices.Index(src.log, "roles start")
			entriesEnd := slices.Index(src.log, "time_entries end")
			if beside := rolesStart < entriesEnd; beside != tc.beside {
				t.Errorf("%d pages: roles beside time entries = %v, want %v (%v)", tc.pages, beside, tc.beside, src.log)
			}
		})
	}
}
