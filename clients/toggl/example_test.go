package toggl_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/provider"
	"github.com/tidemarkhq/tidemark/clients/toggl"
	"github.com/tidemarkhq/tidemark/clients/toggl/toggltest"
	"github.com/tidemarkhq/tidemark/schema"
)

// Hours are exact decimal text, rounded half up to 6 decimals.
func ExampleHours() {
	fmt.Println(toggl.Hours(5400), toggl.Hours(100), toggl.Hours(3600))
	// Output: 1.5 0.027778 1
}

func ExampleNew() {
	f := toggltest.New(toggltest.Options{})
	defer f.Close()
	start := f.Now().Add(-2 * time.Hour)
	stop := start.Add(90 * time.Minute)
	f.PutTimeEntry(toggltest.TimeEntry{ID: 42, UserID: 7, ProjectID: 8, Start: start, Stop: &stop, Duration: 5400})

	c, err := toggl.New(toggl.Params{Base: provider.Base{Name: "agency", BaseURL: f.URL(), Token: f.Token()}, WorkspaceID: f.WorkspaceID()})
	if err != nil {
		panic(err)
	}
	// The zero window is the first sync: the last 90 days via since.
	_ = c.List(context.Background(), clients.TimeEntries, clients.Window{}, func(_ context.Context, p clients.Page) error {
		for _, r := range p.Records {
			te := schema.TimeEntries
			fmt.Println(r.ID, te.Decimal(r, "hours"), te.Text(r, "user_id"), te.Text(r, "project_id"))
		}
		return nil
	})
	// Output: 42 1.5 7 8
}
