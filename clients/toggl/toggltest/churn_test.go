package toggltest_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/toggl/toggltest"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
)

// onClock starts a fake whose clock is clk, set at 2026-03-10 12:00 UTC;
// the fake is closed when the test ends.
func onClock(t *testing.T, o toggltest.Options) (s *toggltest.Server, clk *fakeapi.Clock) {
	t.Helper()
	clk = fakeapi.NewClock(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC))
	o.Clock = clk.Now
	s = toggltest.New(o)
	t.Cleanup(s.Close)
	return s, clk
}

func TestVisibilityDelay(t *testing.T) {
	t.Parallel()
	s, clk := onClock(t, toggltest.Options{VisibilityDelay: 3 * time.Second})
	s.PutTimeEntry(toggltest.TimeEntry{ID: 1, UserID: 1, Start: clk.Now().Add(-time.Hour), Duration: 60})
	// An old stamp is visible at once.
	s.PutTimeEntry(toggltest.TimeEntry{ID: 2, UserID: 1, Start: clk.Now().Add(-time.Hour), Duration: 60, At: clk.Now().Add(-time.Minute)})
	if _, ok := s.State().TimeEntries[1]; ok {
		t.Fatal("entry 1 visible before its delay")
	}
	if _, ok := s.State().TimeEntries[2]; !ok {
		t.Fatal("entry 2 (stamped a minute ago) not visible")
	}
	if e, ok := s.TimeEntry(1); !ok || e.ID != 1 {
		t.Fatal("TimeEntry does not return the last written state")
	}
	if s.Pending() != 1 {
		t.Fatalf("pending %d, want 1", s.Pending())
	}
	code, body, _ := get(t, s, s.Token(), "/me/time_entries?since="+itoa(clk.Now().Add(-time.Hour).Unix()))
	if code != 200 || len(ids(t, body)) != 1 {
		t.Fatalf("since listing: %d %s", code, body)
	}
	clk.Advance(3 * time.Second)
	if _, ok := s.State().TimeEntries[1]; !ok || s.Pending() != 0 {
		t.Fatal("entry 1 not visible after its delay")
	}
	// A deletion is late too, and its stamp is when it was made.
	at := clk.Now()
	if !s.Delete(clients.TimeEntries, 1) || s.Delete(clients.TimeEntries, 1) {
		t.Fatal("Delete: want true once, then false")
	}
	if s.State().TimeEntries[1].DeletedAt != nil {
		t.Fatal("deletion visible at once")
	}
	if e, _ := s.TimeEntry(1); e.DeletedAt == nil || !e.At.Equal(at) {
		t.Fatalf("TimeEntry after Delete: %+v", e)
	}
	clk.Advance(3 * time.Second)
	if d := s.State().TimeEntries[1].DeletedAt; d == nil || !d.Equal(at) {
		t.Fatalf("deletion after its delay: %v, want %s", d, at)
	}
}

func TestChurn(t *testing.T) {
	t.Parallel()
	run := func(delay time.Duration) (toggltest.State, fakeapi.ChurnCounts) {
		s, clk := onClock(t, toggltest.Options{VisibilityDelay: delay})
		c := toggltest.NewChurn(s, fakeapi.ChurnParams{Seed: 7, Entries: 50})
		if n := len(s.State().Versions(clients.TimeEntries)); n != 50 {
			t.Fatalf("%d live entries after NewChurn, want 50", n)
		}
		for range 40 {
			c.Step(10)
			clk.Advance(time.Second)
		}
		clk.Advance(delay)
		return s.State(), c.Counts()
	}
	st, counts := run(0)
	if counts.Created == 0 || counts.BackdatedCreates == 0 || counts.Updated == 0 || counts.DoubleUpdates == 0 ||
		counts.Deleted == 0 || counts.Backdated == 0 || counts.Timers == 0 || counts.Projects == 0 {
		t.Errorf("some mutation never happened: %+v", counts)
	}
	if len(st.Deleted(clients.TimeEntries)) != counts.Deleted {
		t.Errorf("%d deleted entries, %d deletions", len(st.Deleted(clients.TimeEntries)), counts.Deleted)
	}
	// Deterministic from the seed, and the same with a visibility delay
	// once every write is visible.
	st2, counts2 := run(0)
	st3, _ := run(2 * time.Second)
	if counts2 != counts {
		t.Errorf("counts differ between runs: %+v vs %+v", counts, counts2)
	}
	for _, other := range []toggltest.State{st2, st3} {
		if len(other.TimeEntries) != len(st.TimeEntries) {
			t.Fatalf("%d entries vs %d", len(other.TimeEntries), len(st.TimeEntries))
		}
		for id, e := range st.TimeEntries {
			o := other.TimeEntries[id]
			if *o.Description != *e.Description || !o.At.Equal(e.At) || (o.DeletedAt == nil) != (e.DeletedAt == nil) {
				t.Fatalf("entry %d differs: %+v vs %+v", id, e, o)
			}
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestLateEvery(t *testing.T) {
	t.Parallel()
	s, clk := onClock(t, toggltest.Options{VisibilityDelay: 5 * time.Second, LateEvery: 2})
	d1, d2 := "one", "two"
	s.PutTimeEntry(toggltest.TimeEntry{ID: 1, UserID: 1, Start: clk.Now(), Duration: 60}) // visible
	s.PutTimeEntry(toggltest.TimeEntry{ID: 2, UserID: 1, Start: clk.Now(), Duration: 60}) // late
	s.PutTimeEntry(toggltest.TimeEntry{ID: 2, UserID: 1, Start: clk.Now(), Duration: 60, Description: &d1})
	s.PutTimeEntry(toggltest.TimeEntry{ID: 1, UserID: 1, Start: clk.Now(), Duration: 60, Description: &d2}) // late
	st := s.State()
	if _, ok := st.TimeEntries[1]; !ok {
		t.Fatal("entry 1's first write is not visible at once")
	}
	if _, ok := st.TimeEntries[2]; ok {
		t.Fatal("entry 2 visible before its late first write")
	}
	if st.TimeEntries[1].Description != nil {
		t.Fatal("entry 1's late second write visible at once")
	}
	clk.Advance(5 * time.Second)
	st = s.State()
	if *st.TimeEntries[1].Description != "two" || *st.TimeEntries[2].Description != "one" || s.Pending() != 0 {
		t.Fatalf("after the delay: %+v", st.TimeEntries)
	}
}
