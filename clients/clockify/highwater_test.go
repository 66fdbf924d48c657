package clockify_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/clockify"
	"github.com/tidemarkhq/tidemark/clients/clockify/clockifytest"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
)

// pass lists the feed from since as the poller does and returns the new
// high water: the newest version seen, capped by the first page's
// SourceTime (poller.applyListing).
func pass(t *testing.T, c *clockify.Client, since time.Time, seen map[string]bool) time.Time {
	t.Helper()
	var hw, capAt time.Time
	first := true
	err := c.List(t.Context(), clients.TimeEntries, clients.Window{UpdatedSince: since}, func(_ context.Context, p clients.Page) error {
		if first {
			capAt, first = p.SourceTime, false
		}
		for _, r := range p.Records {
			seen[r.ID] = true
			if r.Version.After(hw) {
				hw = r.Version
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !capAt.IsZero() && hw.After(capAt) {
		hw = capAt
	}
	return hw
}

// Feed windows end SafetyLag before the source's clock. If the pages said
// "now", a change stamped inside the lag (read) would lift the high water
// past entries created inside the lag (not read), and with an overlap under
// the lag the next pass would start after them: lost for good.
func TestEntryCreatedWithinSafetyLagIsReadByTheNextPass(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(t0)
	f := newFake(t, clk, clockifytest.Options{})
	// A: created before the window's end, edited 5 s before the pass: its
	// /created element carries the later stamp.
	a := entry("65f0000000000000000000a1", userA, t0.Add(-time.Hour), time.Hour)
	a.CreatedAt, a.UpdatedAt = t0.Add(-10*time.Minute), t0.Add(-5*time.Second)
	f.PutTimeEntry(a)
	// B: created a minute before the pass, inside the lag.
	b := entry("65f0000000000000000000b1", userA, t0.Add(-time.Hour), time.Hour)
	b.CreatedAt, b.UpdatedAt = t0.Add(-time.Minute), t0.Add(-time.Minute)
	f.PutTimeEntry(b)
	c := newClient(t, f, nil)

	const overlap = 30 * time.Second
	seen := map[string]bool{}
	hw := pass(t, c, t0.Add(-30*time.Minute), seen)
	if !seen[a.ID] || seen[b.ID] {
		t.Fatalf("first pass saw %v; want A only", seen)
	}
	if lim := t0.Add(-clockify.DefaultSafetyLag); hw.After(lim) {
		t.Errorf("high water %v is past the end of what was listed (%v)", hw, lim)
	}
	clk.Advance(5 * time.Minute)
	pass(t, c, hw.Add(-overlap), seen)
	if !seen[b.ID] {
		t.Fatalf("entry created within the safety lag before a pass was never read")
	}
}

// With user_ids configured, a listing by date covers only those users: a
// reconcile must tombstone nothing of anyone else's (clients.Scoper).
func TestListScope(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(t0)
	f := newFake(t, clk, clockifytest.Options{})
	d := clients.DateOf(t0)
	byDate := clients.Window{From: d, To: d}
	c := newClient(t, f, func(p *clockify.Params, _ *httpx.Config) { p.UserIDs = []string{userA, userB} })
	if got := clients.ScopeOf(c, clients.TimeEntries, byDate); !reflect.DeepEqual(got.UserIDs, []string{userA, userB}) {
		t.Errorf("by date with user_ids: %+v", got)
	}
	for _, tc := range []struct {
		r clients.Resource
		w clients.Window
	}{{clients.TimeEntries, clients.Window{UpdatedSince: t0}}, {clients.Users, clients.Window{}}, {clients.Projects, clients.Window{}}} {
		if got := clients.ScopeOf(c, tc.r, tc.w); got.UserIDs != nil {
			t.Errorf("%s %+v: %+v, want the whole workspace", tc.r, tc.w, got)
		}
	}
	every := newClient(t, f, nil)
	if got := clients.ScopeOf(every, clients.TimeEntries, byDate); got.UserIDs != nil {
		t.Errorf("every user listed: %+v, want the zero scope", got)
	}
}

func TestOverlapShorterThanSafetyLagIsRefused(t *testing.T) {
	t.Parallel()
	p := clockify.Params{Name: "acme", WorkspaceID: "65f0aaaaaaaaaaaaaaaaaaaa", Token: "k", Overlap: time.Minute}
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Errorf("overlap 1m, lag 2m: %v", err)
	}
	p.Overlap = clockify.DefaultSafetyLag
	if err := p.Validate(); err != nil {
		t.Errorf("overlap = lag: %v", err)
	}
	p.Overlap, p.SafetyLag = 5*time.Minute, 10*time.Minute
	if err := p.Validate(); err == nil {
		t.Errorf("overlap 5m, lag 10m accepted")
	}
}
