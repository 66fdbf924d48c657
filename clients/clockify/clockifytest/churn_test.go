package clockifytest_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/clockify/clockifytest"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
)

func TestChurn(t *testing.T) {
	t.Parallel()
	clk := fakeapi.NewClock(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC))
	s := clockifytest.New(clockifytest.Options{Clock: clk.Now, NoRateLimit: true})
	defer s.Close()
	c := clockifytest.NewChurn(s, fakeapi.ChurnParams{Seed: 3, Entries: 40, Users: 2})
	if n := len(s.Versions(clients.TimeEntries)); n != 40 {
		t.Fatalf("%d live entries after NewChurn, want 40", n)
	}
	if n := len(s.Versions(clients.Users)); n != 2 || len(c.Users()) != 2 {
		t.Fatalf("%d users, want 2", n)
	}
	for range 40 {
		c.Step(10)
		clk.Advance(time.Second)
	}
	counts := c.Counts()
	if counts.Created == 0 || counts.BackdatedCreates == 0 || counts.Updated == 0 || counts.DoubleUpdates == 0 ||
		counts.Deleted == 0 || counts.Backdated == 0 || counts.Timers == 0 {
		t.Errorf("some mutation never happened: %+v", counts)
	}
	if n := len(s.Deleted(clients.TimeEntries)); n != counts.Deleted {
		t.Errorf("%d deleted entries, %d deletions", n, counts.Deleted)
	}
	for id, v := range s.Versions(clients.TimeEntries) {
		if v.After(clk.Now()) {
			t.Errorf("entry %s stamped %s, after the clock %s", id, v, clk.Now())
		}
	}
}

func TestFeedVisibilityDelay(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	clk := fakeapi.NewClock(t0)
	s := clockifytest.New(clockifytest.Options{Clock: clk.Now, NoRateLimit: true, VisibilityDelay: time.Minute, LateEvery: 2})
	defer s.Close()
	quick, late := clockifytest.NewID(), clockifytest.NewID()
	for _, id := range []string{quick, late} {
		s.PutTimeEntry(clockifytest.TimeEntry{ID: id, UserID: "u1", Start: t0.Add(-time.Hour)})
	}
	created := func() string {
		t.Helper()
		q := url.Values{"type": {"TIME_ENTRY"}, "start": {"2026-03-10T11:00:00Z"}, "end": {"2026-03-10T13:00:00Z"}}
		req, _ := http.NewRequest(http.MethodGet, s.URL()+"/workspaces/"+s.WorkspaceID()+"/entities/created?"+q.Encode(), nil)
		req.Header.Set("X-Api-Key", s.Token())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if b := created(); !strings.Contains(b, quick) || strings.Contains(b, late) {
		t.Fatalf("before the delay, want only %s: %s", quick, b)
	}
	clk.Advance(time.Minute)
	if b := created(); !strings.Contains(b, quick) || !strings.Contains(b, late) {
		t.Fatalf("after the delay, want both: %s", b)
	}
}
