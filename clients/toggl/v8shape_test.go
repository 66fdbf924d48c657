package toggl_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/internal/sourcetest"
	"github.com/tidemarkhq/tidemark/clients/toggl"
	"github.com/tidemarkhq/tidemark/schema"
)

// The docs' tracking example is v8-shaped: wid and pid, and no user id at
// all. In /me/time_entries every entry is the token owner's, so the owner's
// id (GET /me) stands in, and pid is the project.
func TestV8ShapedEntryTakesTheOwnerAndPid(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Date", time.Date(2026, 1, 30, 9, 10, 0, 0, time.UTC).Format(http.TimeFormat))
		switch {
		case strings.HasSuffix(r.URL.Path, "/me/time_entries"):
			fmt.Fprint(w, `[{
"id": 436694100,
"wid": 777,
"pid": 193791,
"billable": false,
"start": "2026-01-30T09:08:04+00:00",
"duration": -1,
"description": "Running time entry",
"at": "2026-01-30T09:08:12+00:00"
}]`)
		case strings.HasSuffix(r.URL.Path, "/me"):
			fmt.Fprint(w, `{"id": 5123, "email": "a@example.com", "fullname": "A", "timezone": "Europe/Berlin"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c := kind.Build(t, toggl.Params{
		Name: "tg", BaseURL: srv.URL + "/api/v9", Token: "secret-token", WorkspaceID: 777, Version: "test",
		RateLimit: httpx.RateLimit{Requests: 1000, Per: time.Second}, Logger: zerolog.New(zerolog.NewTestWriter(t)),
		Quota: &toggl.Quota{},
	})
	pages, err := sourcetest.Collect(t, c, clients.TimeEntries, clients.Window{})
	if err != nil {
		t.Fatal(err)
	}
	recs := sourcetest.Records(pages)
	rec, ok := recs["436694100"]
	if !ok {
		t.Fatalf("entry not served: %v", recs)
	}
	te := schema.TimeEntries
	if got := te.Text(rec, "user_id"); got != "5123" {
		t.Errorf("user_id %q, want the /me id 5123", got)
	}
	if got := te.Text(rec, "project_id"); got != "193791" {
		t.Errorf("project_id %q, want pid 193791", got)
	}
	if !te.Bool(rec, "is_running") {
		t.Error("a running entry (duration -1) is not running")
	}
}
