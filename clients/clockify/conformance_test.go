package clockify_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/clockify"
	"github.com/tidemarkhq/tidemark/clients/clockify/clockifytest"
	"github.com/tidemarkhq/tidemark/internal/conformance"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestConformance(t *testing.T) { conformance.Run(t, conformanceHarness{}) }

type conformanceHarness struct{}

// Clockify's change feed reports deletions (/entities/deleted).
func (conformanceHarness) DeletionsByReconcile() bool { return false }

// New runs the fake without its deletion delay and the client with a
// one-second SafetyLag: the suite's clock moves seconds at a time. The
// delay and the lag together are tested in clockify_test.go.
func (conformanceHarness) New(t *testing.T, o conformance.Options) conformance.Fake {
	clk := conformance.NewClock()
	f := clockifytest.New(clockifytest.Options{NoRateLimit: true, NoDeletionDelay: true, Clock: clk.Now})
	t.Cleanup(f.Close)
	c, err := clockify.New(clockify.Params{
		Name: "clockify-conf", BaseURL: f.URL(), Token: f.Token(), WorkspaceID: f.WorkspaceID(),
		RateLimit: o.RateLimit, Resources: []clients.Resource{clients.TimeEntries}, SafetyLag: time.Second,
		FirstSyncDays: 1, // the suite's entries are all recent; fewer requests per listing
		Logger:        zerolog.New(zerolog.NewTestWriter(t)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return &conformanceFake{f: f, clk: clk, src: c}
}

type conformanceFake struct {
	f   *clockifytest.Server
	clk *fakeapi.Clock
	src *clockify.Client
}

func (f *conformanceFake) Source() clients.Source { return f.src }

func (f *conformanceFake) Put(id int64, notes string) {
	now := f.clk.Now()
	end := now
	f.f.PutTimeEntry(clockifytest.TimeEntry{
		ID: strconv.FormatInt(id, 10), UserID: "65f0cccccccccccccccccccc", ProjectID: "65f0dddddddddddddddddddd",
		Description: &notes, Start: now.Add(-90 * time.Minute), End: &end,
	})
}

func (f *conformanceFake) Delete(id int64) {
	f.f.Delete(clients.TimeEntries, strconv.FormatInt(id, 10))
}
func (f *conformanceFake) Tick(d time.Duration) { f.clk.Advance(d) }
func (f *conformanceFake) Versions() map[string]time.Time {
	return f.f.Versions(clients.TimeEntries)
}

// Malform breaks the first page of every feed (page 0, the pass's page 1).
func (f *conformanceFake) Malform(m conformance.Malformation) {
	var cm fakeapi.Malformation
	switch m {
	case conformance.BadJSON:
		cm = fakeapi.BadJSON
	case conformance.HTMLPage:
		cm = fakeapi.HTMLPage
	case conformance.MissingVersion:
		cm = fakeapi.MissingVersion
	}
	for _, e := range []string{"entities/created", "entities/updated", "entities/deleted"} {
		f.f.Malform(e, 0, cm)
	}
}

func (f *conformanceFake) Requests() []time.Time {
	var out []time.Time
	for _, r := range f.f.Requests() {
		out = append(out, r.At)
	}
	return out
}
