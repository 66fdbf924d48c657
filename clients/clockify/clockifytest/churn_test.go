package clockifytest_test

import (
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/clockify/clockifytest"
)

func TestChurn(t *testing.T) {
	t.Parallel()
	clk := clockifytest.NewClock(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC))
	s := clockifytest.New(clockifytest.Options{Clock: clk.Now, NoRateLimit: true})
	defer s.Close()
	c := clockifytest.NewChurn(s, clockifytest.ChurnParams{Seed: 3, Entries: 40, Users: 2})
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
