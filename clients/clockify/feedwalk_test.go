package clockify_test

import (
	"context"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/clockify"
	"github.com/tidemarkhq/tidemark/clients/clockify/clockifytest"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
)

// The feed pages by page number over a live list: an entry leaving the list
// mid-walk shifts the rest back, and the one at the page boundary is never
// served. A multi-page window is walked twice, so no live entry is lost.
func TestFeedWalkSurvivesAnEntryLeavingMidWalk(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(t0)
	f := newFake(t, clk, clockifytest.Options{})
	var ids []string
	for i := range 7 {
		id := clockifytest.NewID()
		ids = append(ids, id)
		at := t0.Add(-30*time.Minute + time.Duration(i)*time.Second)
		end := at.Add(time.Hour)
		f.PutTimeEntry(clockifytest.TimeEntry{ID: id, UserID: "u1", Start: at, End: &end, CreatedAt: at, UpdatedAt: at})
	}
	c := newClient(t, f, func(p *clockify.Params, _ *httpx.Config) { p.FeedLimit = 3 })

	seen := map[string]bool{}
	deleted := false
	err := c.List(t.Context(), clients.TimeEntries, clients.Window{UpdatedSince: t0.Add(-time.Hour)},
		func(_ context.Context, p clients.Page) error {
			for _, r := range p.Records {
				if r.DeletedAt == nil {
					seen[r.ID] = true
				}
			}
			if !deleted && len(p.Records) > 0 {
				// The first entry leaves the list after the first page.
				deleted = f.Delete(clients.TimeEntries, ids[0])
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids[1:] {
		if !seen[id] {
			t.Errorf("live entry %s was never delivered", id)
		}
	}
}
