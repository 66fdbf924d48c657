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

// The change feed (time entries only) reports deletions. Projects,
// clients, users and tasks are listed whole, every pass, with no stamp of
// their own: a listing's clock versions them and a deleted one only
// vanishes, so reconcile finds it.
func (conformanceHarness) Capabilities() conformance.Capabilities {
	c := conformance.Capabilities{
		Deletions:    map[clients.Resource]conformance.Deletion{clients.TimeEntries: conformance.Reported},
		ListingClock: map[clients.Resource]bool{},
		ListedWhole:  map[clients.Resource]bool{},
	}
	for _, r := range []clients.Resource{clients.Projects, clients.Clients, clients.Users, clients.Tasks} {
		c.Deletions[r] = conformance.Reconciled
		c.ListingClock[r], c.ListedWhole[r] = true, true
	}
	return c
}

// New runs the fake without its deletion delay and the client with a
// one-second SafetyLag: the suite's clock moves seconds at a time. The
// delay and the lag together are tested in clockify_test.go.
func (conformanceHarness) New(t *testing.T, o conformance.Options) conformance.Fake {
	clk := conformance.NewClock()
	f := clockifytest.New(clockifytest.Options{NoRateLimit: true, NoDeletionDelay: true, Clock: clk.Now})
	t.Cleanup(f.Close)
	c, err := clockify.New(clockify.Params{
		Name: "clockify-conf", BaseURL: f.URL(), Token: f.Token(), WorkspaceID: f.WorkspaceID(),
		RateLimit: o.RateLimit, Resources: clockify.Resources, SafetyLag: time.Second,
		FirstSyncDays: 1, // the suite's entries are all recent; fewer requests per listing
		Logger:        zerolog.New(zerolog.NewTestWriter(t)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return &conformanceFake{Server: f, clk: clk, src: c}
}

type conformanceFake struct {
	*clockifytest.Server // Requests, Versions
	clk                  *fakeapi.Clock
	src                  *clockify.Client
}

// Ids the suite's records point at.
const (
	userID    = "65f0cccccccccccccccccccc"
	projectID = "65f0dddddddddddddddddddd"
)

func (f *conformanceFake) Source() clients.Source { return f.src }
func (f *conformanceFake) Tick(d time.Duration)   { f.clk.Advance(d) }

// Put stores content where the mirror's content column reads it: an
// entry's description, a name, or a user's name (first_name). A task gets
// a project to be listed under.
func (f *conformanceFake) Put(r clients.Resource, id int64, content string) {
	sid := strconv.FormatInt(id, 10)
	switch r {
	case clients.TimeEntries:
		now := f.clk.Now()
		f.PutTimeEntry(clockifytest.TimeEntry{
			ID: sid, UserID: userID, ProjectID: projectID, Description: &content, Start: now.Add(-90 * time.Minute), End: &now,
		})
	case clients.Projects:
		f.PutProject(clockifytest.Project{ID: sid, Name: content, Billable: true})
	case clients.Clients:
		f.PutClient(clockifytest.Client{ID: sid, Name: content, CurrencyCode: "EUR"})
	case clients.Users:
		f.PutUser(clockifytest.User{ID: sid, Name: content, Email: "u@example.com"})
	case clients.Tasks:
		if _, ok := f.Versions(clients.Projects)[projectID]; !ok {
			f.PutProject(clockifytest.Project{ID: projectID, Name: "parent"})
		}
		f.PutTask(clockifytest.Task{ID: sid, ProjectID: projectID, Name: content})
	default:
		panic("clockify conformance: no record for " + string(r))
	}
}

func (f *conformanceFake) Delete(r clients.Resource, id int64) {
	f.Server.Delete(r, strconv.FormatInt(id, 10))
}

func (f *conformanceFake) Malform(r clients.Resource, m conformance.Malformation) {
	f.MalformResource(r, m)
}
