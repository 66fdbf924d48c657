package toggl_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/internal/sourcetest"
	"github.com/tidemarkhq/tidemark/clients/toggl"
	"github.com/tidemarkhq/tidemark/clients/toggl/toggltest"
)

// memo is an in-memory provider.Memo, as the database keeps it for every
// process.
type memo struct {
	mu   sync.Mutex
	vals map[string][]byte
	at   map[string]time.Time
}

func (m *memo) Get(_ context.Context, key string) ([]byte, time.Duration, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.vals[key]
	return v, time.Since(m.at[key]), ok, nil
}

func (m *memo) Put(_ context.Context, key string, v []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.vals[key], m.at[key] = v, time.Now()
	return nil
}

// GET /me is asked once a day per source, not once per process: the next
// process (a restart, a new owner, a CLI run) takes the zone the memo
// keeps, and the memo never holds the API token (issue 23, item 6).
func TestMeIsAskedOnceADayAcrossProcesses(t *testing.T) {
	t.Parallel()
	f := newFake(t, toggltest.Options{TimeZone: "Europe/Berlin"})
	putEntry(f, 1, 1, f.Now().Add(-time.Hour))
	m := &memo{vals: map[string][]byte{}, at: map[string]time.Time{}}
	withMemo := func(p *toggl.Params, _ *httpx.Config) { p.Memo = m }
	for range 3 { // three processes, one after the other
		c := newClient(t, f, nil, withMemo)
		if _, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := countPath(f, "/me"); n != 1 {
		t.Fatalf("/me asked %d times by 3 processes, want once", n)
	}
	if kept := string(m.vals["me"]); !strings.Contains(kept, "Europe/Berlin") || strings.Contains(kept, f.Token()) {
		t.Fatalf("the memo keeps %s", kept)
	}
}
