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

// Listings with `since` include deleted records (server_deleted_at): time
// entries, projects and tasks. Clients and users are listed whole, without
// `since`, and leave deleted records out: reconcile finds those. Workspace
// users carry no `at`: the listing's clock versions them.
func (harness) Capabilities() conformance.Capabilities {
	return conformance.Capabilities{
		Deletions: map[clients.Resource]conformance.Deletion{
			clients.TimeEntries: conformance.Reported,
			clients.Projects:    conformance.Reported,
			clients.Tasks:       conformance.Reported,
			clients.Clients:     conformance.Reconciled,
			clients.Users:       conformance.Reconciled,
		},
		ListingClock: map[clients.Resource]bool{clients.Users: true},
		ListedWhole:  map[clients.Resource]bool{clients.Clients: true, clients.Users: true},
	}
}

func (harness) New(t *testing.T, o conformance.Options) conformance.Fake {
	clk := conformance.NewClock()
	f := toggltest.New(toggltest.Options{Clock: clk.Now})
	t.Cleanup(f.Close)
	c, err := toggl.New(toggl.Params{
		Name: "toggl-conf", BaseURL: f.URL(), Token: f.Token(), WorkspaceID: f.WorkspaceID(),
		RateLimit: o.RateLimit, Resources: toggl.Resources,
		Logger: zerolog.New(zerolog.NewTestWriter(t)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return &fake{Server: f, clk: clk, src: c}
}

type fake struct {
	*toggltest.Server // Requests, Versions
	clk               *fakeapi.Clock
	src               *toggl.Client
}

func (f *fake) Source() clients.Source { return f.src }
func (f *fake) Tick(d time.Duration)   { f.clk.Advance(d) }

// Put stores content where the mirror's content column reads it: an
// entry's description, a name, or a user's fullname (first_name up to the
// first space).
func (f *fake) Put(r clients.Resource, id int64, content string) {
	switch r {
	case clients.TimeEntries:
		now := f.clk.Now()
		f.PutTimeEntry(toggltest.TimeEntry{
			ID: id, UserID: 7, ProjectID: 8, Description: &content,
			Start: now.Add(-time.Hour), Stop: &now, Duration: 3600,
		})
	case clients.Projects:
		f.PutProject(toggltest.Project{ID: id, ClientID: 9, Name: content, Active: true})
	case clients.Clients:
		f.PutClient(toggltest.Client{ID: id, Name: content})
	case clients.Users:
		f.PutUser(toggltest.User{ID: id, Fullname: content, Email: "u@example.com"})
	case clients.Tasks:
		f.PutTask(toggltest.Task{ID: id, ProjectID: 8, Name: content, Active: true})
	default:
		panic("toggl conformance: no record for " + string(r))
	}
}

func (f *fake) Delete(r clients.Resource, id int64) { f.Server.Delete(r, id) }

func (f *fake) Malform(r clients.Resource, m conformance.Malformation) { f.MalformResource(r, m) }
