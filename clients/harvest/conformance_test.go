package harvest_test

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/harvest"
	"github.com/tidemarkhq/tidemark/clients/harvest/harvesttest"
	"github.com/tidemarkhq/tidemark/internal/conformance"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestConformance(t *testing.T) { conformance.Run(t, conformanceHarness{}) }

type conformanceHarness struct{}

// Harvest hides deletions from updated_since: reconcile finds them.
func (conformanceHarness) DeletionsByReconcile() bool { return true }

func (conformanceHarness) New(t *testing.T, o conformance.Options) conformance.Fake {
	clk := conformance.NewClock()
	f := harvesttest.New(harvesttest.Options{NoRateLimit: true, Clock: clk.Now})
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
	f   *harvesttest.Server
	clk *conformance.Clock
	src *harvest.Client
}

func (f *conformanceFake) Source() clients.Source { return f.src }

func (f *conformanceFake) Put(id int64, notes string) {
	f.f.PutTimeEntry(harvesttest.TimeEntry{
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
	var hm harvesttest.Malformation
	switch m {
	case conformance.BadJSON:
		hm = harvesttest.BadJSON
	case conformance.HTMLPage:
		hm = harvesttest.HTMLPage
	case conformance.MissingVersion:
		hm = harvesttest.MissingUpdatedAt
	}
	f.f.Malform(clients.TimeEntries, 1, hm)
}

func (f *conformanceFake) Requests() []time.Time {
	var out []time.Time
	for _, r := range f.f.Requests() {
		out = append(out, r.At)
	}
	return out
}
