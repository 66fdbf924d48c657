package toggl_test

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/toggl"
	"github.com/tidemarkhq/tidemark/clients/toggl/toggltest"
	"github.com/tidemarkhq/tidemark/internal/conformance"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestConformance(t *testing.T) { conformance.Run(t, harness{}) }

type harness struct{}

// Toggl reports deletions to `since` (server_deleted_at).
func (harness) DeletionsByReconcile() bool { return false }

func (harness) New(t *testing.T, o conformance.Options) conformance.Fake {
	clk := conformance.NewClock()
	f := toggltest.New(toggltest.Options{Clock: clk.Now})
	t.Cleanup(f.Close)
	c, err := toggl.New(toggl.Params{
		Name: "toggl-conf", BaseURL: f.URL(), Token: f.Token(), WorkspaceID: f.WorkspaceID(),
		RateLimit: o.RateLimit, Resources: []clients.Resource{clients.TimeEntries},
		Logger: zerolog.New(zerolog.NewTestWriter(t)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return &fake{f: f, clk: clk, src: c}
}

type fake struct {
	f   *toggltest.Server
	clk *fakeapi.Clock
	src *toggl.Client
}

func (f *fake) Source() clients.Source { return f.src }

func (f *fake) Put(id int64, notes string) {
	now := f.clk.Now()
	stop := now
	f.f.PutTimeEntry(toggltest.TimeEntry{
		ID: id, UserID: 7, ProjectID: 8, Description: &notes,
		Start: now.Add(-time.Hour), Stop: &stop, Duration: 3600,
	})
}

func (f *fake) Delete(id int64)      { f.f.Delete(clients.TimeEntries, id) }
func (f *fake) Tick(d time.Duration) { f.clk.Advance(d) }
func (f *fake) Versions() map[string]time.Time {
	return f.f.State().Versions(clients.TimeEntries)
}

func (f *fake) Malform(m conformance.Malformation) {
	var tm fakeapi.Malformation
	switch m {
	case conformance.BadJSON:
		tm = fakeapi.BadJSON
	case conformance.HTMLPage:
		tm = fakeapi.HTMLPage
	case conformance.MissingVersion:
		tm = fakeapi.MissingVersion
	}
	f.f.Malform("time_entries", 1, tm)
}

func (f *fake) Requests() []time.Time {
	var out []time.Time
	for _, r := range f.f.Requests() {
		out = append(out, r.At)
	}
	return out
}
