package harvest_test

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/harvest"
	"github.com/tidemarkhq/tidemark/internal/conformance"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
	"github.com/tidemarkhq/tidemark/internal/fakeapi/harvestfake"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestConformance(t *testing.T) { conformance.Run(t, conformanceHarness{}) }

type conformanceHarness struct{}

// Harvest hides deletions from updated_since: reconcile finds them.
func (conformanceHarness) DeletionsByReconcile() bool { return true }

func (conformanceHarness) New(t *testing.T, o conformance.Options) conformance.Fake {
	clk := conformance.NewClock()
	f := harvestfake.New(harvestfake.Options{NoRateLimit: true, Clock: clk.Now})
	t.Cleanup(f.Close)
	c, err := harvest.New(harvest.Params{
		Name: "harvest-conf", BaseURL: f.URL(), AccountID: f.AccountID(), Token: f.Token(),
		Contact: "ops@example.com", RateLimit: o.RateLimit, Resources: []clients.Resource{clients.TimeEntries},
		Logger: zerolog.New(zerolog.NewTestWriter(t)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return &conformanceFake{f: f, clk: clk, src: c}
}

type conformanceFake struct {
	f   *harvestfake.Server
	clk *fakeapi.Clock
	src *harvest.Client
}

func (f *conformanceFake) Source() clients.Source { return f.src }

func (f *conformanceFake) Put(id int64, notes string) {
	f.f.PutTimeEntry(harvestfake.TimeEntry{
		ID: id, SpentDate: clients.DateOf(f.clk.Now()), Hours: "1.5", Notes: &notes,
		UserID: 7, ProjectID: 8,
	})
}

func (f *conformanceFake) Delete(id int64)      { f.f.Delete(clients.TimeEntries, id) }
func (f *conformanceFake) Tick(d time.Duration) { f.clk.Advance(d) }
func (f *conformanceFake) Versions() map[string]time.Time {
	return f.f.State().Versions(clients.TimeEntries)
}

func (f *conformanceFake) Malform(m conformance.Malformation) {
	var hm fakeapi.Malformation
	switch m {
	case conformance.BadJSON:
		hm = fakeapi.BadJSON
	case conformance.HTMLPage:
		hm = fakeapi.HTMLPage
	case conformance.MissingVersion:
		hm = fakeapi.MissingVersion
	}
	f.f.Malform("time_entries", 1, hm)
}

func (f *conformanceFake) Requests() []time.Time {
	var out []time.Time
	for _, r := range f.f.Requests() {
		out = append(out, r.At)
	}
	return out
}
