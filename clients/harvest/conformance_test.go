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
	"github.com/tidemarkhq/tidemark/schema"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestConformance(t *testing.T) { conformance.Run(t, conformanceHarness{}) }

type conformanceHarness struct{}

// Harvest hides every deletion from updated_since: reconcile finds them.
func (conformanceHarness) Capabilities() conformance.Capabilities {
	c := conformance.Capabilities{Deletions: map[clients.Resource]conformance.Deletion{},
		ListedWhole: map[clients.Resource]bool{}, ListedUnderParents: map[clients.Resource]bool{}}
	for _, r := range conformanceResources {
		c.Deletions[r] = conformance.Reconciled
		t, _ := schema.Lookup(r)
		if t.NoSince {
			c.ListedWhole[r] = true
		}
		if t.Parent != "" {
			c.ListedUnderParents[r] = true
		}
	}
	return c
}

// conformanceResources are every resource Harvest serves but the company,
// which is one record per account (TestCompany checks it).
var conformanceResources = func() []clients.Resource {
	var out []clients.Resource
	for _, r := range harvest.Resources {
		if t, _ := schema.Lookup(r); !t.Singleton {
			out = append(out, r)
		}
	}
	return out
}()

func (conformanceHarness) New(t *testing.T, o conformance.Options) conformance.Fake {
	clk := conformance.NewClock()
	f := harvestfake.New(harvestfake.Options{NoRateLimit: true, Clock: clk.Now})
	t.Cleanup(f.Close)
	c, err := harvest.New(harvest.Params{
		Name: "harvest-conf", BaseURL: f.URL(), AccountID: f.AccountID(), Token: f.Token(),
		Contact: "ops@example.com", RateLimit: o.RateLimit, Resources: conformanceResources,
		Logger: zerolog.New(zerolog.NewTestWriter(t)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return &conformanceFake{Server: f, clk: clk, src: c}
}

type conformanceFake struct {
	*harvestfake.Server // Requests, Versions
	clk                 *fakeapi.Clock
	src                 *harvest.Client
}

func (f *conformanceFake) Source() clients.Source { return f.src }
func (f *conformanceFake) Tick(d time.Duration)   { f.clk.Advance(d) }

// Put stores content where the mirror's content column reads it: notes,
// name, or a user's first_name.
func (f *conformanceFake) Put(r clients.Resource, id int64, content string) {
	switch r {
	case clients.TimeEntries:
		f.PutTimeEntry(harvestfake.TimeEntry{
			ID: id, SpentDate: clients.DateOf(f.clk.Now()), Hours: "1.5", Notes: &content, UserID: 7, ProjectID: 8,
		})
	case clients.Projects:
		f.PutProject(harvestfake.Project{ID: id, ClientID: 9, Name: content, IsActive: true})
	case clients.Clients:
		f.PutClient(harvestfake.Client{ID: id, Name: content, Currency: "EUR", IsActive: true})
	case clients.Users:
		f.PutUser(harvestfake.User{ID: id, FirstName: content, LastName: "Doe", Email: "u@example.com", IsActive: true})
	case clients.Tasks:
		f.PutTask(harvestfake.Task{ID: id, Name: content, IsActive: true})
	default:
		def, ok := schema.Lookup(r)
		if !ok {
			panic("harvest conformance: no record for " + string(r))
		}
		if def.Parent != "" {
			// Each record under its own parent, created first.
			if _, ok := f.Get(def.Parent, id); !ok {
				f.Put(def.Parent, id, "parent")
			}
		}
		f.PutDoc(r, sampleDoc(def, id, conformance.ContentValue(r, content), clients.DateOf(f.clk.Now())))
	}
}

// sampleDoc is a plausible record of a declared resource with content in
// its content column, one line per child table, under parent id.
func sampleDoc(def *schema.Table, id int64, content string, day clients.Date) harvestfake.Doc {
	col, _ := conformance.ContentColumn(def.Name)
	d := harvestfake.Doc{ID: id, Values: harvestfake.Sample(def, content, col, day)}
	for _, c := range def.Children {
		d.Lines = append(d.Lines, harvestfake.Line{ID: id*10 + 1, Values: harvestfake.SampleLine(c, day)})
	}
	if def.Parent != "" {
		d.Parent = id
	}
	return d
}

func (f *conformanceFake) Delete(r clients.Resource, id int64) { f.Server.Delete(r, id) }

func (f *conformanceFake) Malform(r clients.Resource, m conformance.Malformation) {
	f.MalformResource(r, m)
}
