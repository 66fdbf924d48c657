package toggl_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/internal/sourcetest"
	"github.com/tidemarkhq/tidemark/clients/toggl/toggltest"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
)

// Projects and tasks page by number over a live list: one deleted on page 1
// while the client is between pages shifts the rest up, and the first of
// page 2 is never served. A first sync lists them whole, so nothing later
// would bring it.
func TestWorkspaceListingLosesNothingWhenARecordLeavesMidWalk(t *testing.T) {
	t.Parallel()
	for _, r := range []clients.Resource{clients.Projects, clients.Tasks} {
		t.Run(string(r), func(t *testing.T) {
			t.Parallel()
			f := newFake(t, toggltest.Options{})
			at := f.Now().Add(-time.Hour)
			for i := 1; i <= 450; i++ {
				if r == clients.Projects {
					f.PutProject(toggltest.Project{ID: int64(i), Name: fmt.Sprintf("P%d", i), Active: true, At: at})
				} else {
					f.PutTask(toggltest.Task{ID: int64(i), ProjectID: 1, Name: fmt.Sprintf("T%d", i), Active: true, At: at})
				}
			}
			logs := &sourcetest.SyncBuffer{}
			c := newClient(t, f, logs)
			var once sync.Once
			f.OnList(func(rq fakeapi.Request) {
				if rq.Query.Get("page") == "2" {
					once.Do(func() { f.Delete(r, 1) }) // the first record of page 1
				}
			})
			ctx := zerolog.New(logs).WithContext(t.Context())
			got := map[string]bool{}
			err := c.List(ctx, r, clients.Window{}, func(_ context.Context, p clients.Page) error {
				for _, rec := range p.Records {
					got[rec.ID] = true
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for i := 2; i <= 450; i++ {
				if !got[strconv.Itoa(i)] {
					t.Errorf("%s %d was never served", r, i)
				}
			}
			// Projects (no total) walk again; tasks (total_count) read the
			// page before again.
			if !strings.Contains(logs.String(), "listing shifted while walking; ") {
				t.Errorf("no Info line about the shifted listing")
			}
		})
	}
}

// putDays adds perDay entries on each of days consecutive days from first.
func putDays(f *toggltest.Server, first clients.Date, days, perDay int, nextID *int64) {
	for d := range days {
		for i := range perDay {
			start := first.AddDays(d).Time().Add(time.Duration(i) * time.Minute)
			stop := start.Add(time.Minute)
			*nextID++
			f.PutTimeEntry(toggltest.TimeEntry{ID: *nextID, UserID: 1, Start: start, Stop: &stop, Duration: 60, At: start.Add(time.Hour)})
		}
	}
}

// Toggl serves at most a thousand entries per /me/time_entries response and
// says nothing when it cuts. A reconcile range holding more is listed whole,
// in windows small enough to stay under the cap.
func TestDateRangeOverTheCapIsListedInWindows(t *testing.T) {
	t.Parallel()
	f := newFake(t, toggltest.Options{EntryCap: 1000})
	today := clients.DateOf(f.Now().UTC())
	var id int64
	putDays(f, today.AddDays(-40), 25, 100, &id) // 2,500 entries
	c := newClient(t, f, nil)
	pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{From: today.AddDays(-45), To: today})
	if err != nil {
		t.Fatal(err)
	}
	if got := sourcetest.Records(pages); len(got) != 2500 {
		t.Fatalf("%d entries listed, want 2500", len(got))
	}
	if n := f.RequestCount(); n > 20 {
		t.Errorf("%d requests for 2,500 entries", n)
	}
}

// A single day over the cap cannot be split further: ErrCapped, so that
// reconcile tombstones nothing.
func TestSingleDayOverTheCapIsCapped(t *testing.T) {
	t.Parallel()
	f := newFake(t, toggltest.Options{EntryCap: 1000})
	today := clients.DateOf(f.Now().UTC())
	var id int64
	putDays(f, today.AddDays(-10), 1, 1001, &id)
	putDays(f, today.AddDays(-5), 3, 10, &id)
	c := newClient(t, f, nil)
	_, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{From: today.AddDays(-20), To: today})
	if !errors.Is(err, clients.ErrCapped) {
		t.Fatalf("err = %v, want ErrCapped", err)
	}
}

// A `since` listing cannot be split by date: one that comes back at the cap
// may be cut short, and the cursor must not move past what it hid.
func TestSinceListingAtTheCapIsCapped(t *testing.T) {
	t.Parallel()
	f := newFake(t, toggltest.Options{EntryCap: 1000})
	today := clients.DateOf(f.Now().UTC())
	var id int64
	putDays(f, today.AddDays(-3), 1, 1200, &id)
	c := newClient(t, f, nil)
	for _, w := range []clients.Window{{}, {UpdatedSince: f.Now().Add(-10 * 24 * time.Hour)}} {
		_, err := sourcetest.Collect(t, c, clients.TimeEntries, w)
		if !errors.Is(err, clients.ErrCapped) {
			t.Errorf("window %+v: err = %v, want ErrCapped", w, err)
		}
	}
}

// Tasks come in an envelope with total_count: a walk whose pages add up to
// the total is taken without a confirming second walk, and requests ask
// for the documented page/per_page.
func TestTasksEnvelopeWalkedByItsTotal(t *testing.T) {
	t.Parallel()
	f := newFake(t, toggltest.Options{})
	at := f.Now().Add(-time.Hour)
	for i := 1; i <= 450; i++ {
		f.PutTask(toggltest.Task{ID: int64(i), ProjectID: 1, Name: fmt.Sprintf("T%d", i), Active: true, At: at})
	}
	c := newClient(t, f, nil)
	pages, err := sourcetest.Collect(t, c, clients.Tasks, clients.Window{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(sourcetest.Records(pages)); n != 450 || f.RequestCount() != 3 {
		t.Fatalf("%d tasks in %d requests, want 450 in 3", n, f.RequestCount())
	}
	for i, rq := range f.Requests() {
		if rq.Path != "/workspaces/4242/tasks" || rq.Query.Get("page") != strconv.Itoa(i+1) || rq.Query.Get("per_page") != "200" {
			t.Errorf("request %+v", rq)
		}
	}
	// A provider that stops before the pages its total announced cut the
	// listing short: ErrCapped, so that reconcile tombstones nothing.
	f.ResetRequests()
	f.SetTaskTotalBias(200)
	_, err = sourcetest.Collect(t, c, clients.Tasks, clients.Window{})
	if !errors.Is(err, clients.ErrCapped) {
		t.Fatalf("err = %v, want ErrCapped", err)
	}
}
