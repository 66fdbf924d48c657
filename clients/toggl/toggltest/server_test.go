package toggltest_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/toggl/toggltest"
)

func get(t *testing.T, s *toggltest.Server, token, path string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.URL()+path, nil)
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(token+":api_token")))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func ids(t *testing.T, body string) []int64 {
	t.Helper()
	var recs []struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal([]byte(body), &recs); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	var out []int64
	for _, r := range recs {
		out = append(out, r.ID)
	}
	return out
}

func TestDialect(t *testing.T) {
	t.Parallel()
	clock := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	s := toggltest.New(toggltest.Options{Clock: func() time.Time { return clock }, Skew: -time.Hour})
	defer s.Close()
	day := time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		start := day.AddDate(0, 0, i).Add(time.Hour)
		s.PutTimeEntry(toggltest.TimeEntry{ID: int64(i + 1), UserID: 1, Start: start, Duration: 60, At: start})
	}
	s.Delete(clients.TimeEntries, 2)

	if code, body, _ := get(t, s, "wrong", "/me/time_entries"); code != http.StatusForbidden || !strings.Contains(body, "Incorrect") {
		t.Errorf("bad token: %d %s", code, body)
	}
	code, body, h := get(t, s, s.Token(), "/me/time_entries?since="+strconv.FormatInt(day.Unix(), 10))
	if code != 200 || len(ids(t, body)) != 3 || !strings.Contains(body, `"server_deleted_at":"2026-03-10T11:00:00+00:00"`) {
		t.Errorf("since: %d %s", code, body)
	}
	if d, _ := http.ParseTime(h.Get("Date")); !d.Equal(clock.Add(-time.Hour)) {
		t.Errorf("Date %s, want the skewed source clock", h.Get("Date"))
	}
	// end_date is exclusive; deleted entries are left out of date listings.
	_, body, _ = get(t, s, s.Token(), "/me/time_entries?start_date=2026-03-05&end_date=2026-03-07")
	if got := ids(t, body); len(got) != 1 || got[0] != 1 {
		t.Errorf("date listing ids %v, want [1]", got)
	}
	old := clock.Add(-time.Hour - 91*24*time.Hour).Unix()
	if code, body, _ := get(t, s, s.Token(), "/me/time_entries?since="+strconv.FormatInt(old, 10)); code != 400 || !strings.Contains(body, "3 months") {
		t.Errorf("old since: %d %s", code, body)
	}
	if code, _, _ := get(t, s, s.Token(), "/me/time_entries?since=1&start_date=2026-03-05&end_date=2026-03-07"); code != 400 {
		t.Errorf("since with dates: %d", code)
	}
	if code, _, _ := get(t, s, s.Token(), "/workspaces/1/projects"); code != 403 {
		t.Errorf("other workspace: %d", code)
	}
	st := s.State()
	if v := st.Versions(clients.TimeEntries); len(v) != 2 || v["2"] != (time.Time{}) {
		t.Errorf("versions %v", v)
	}
	if d := st.Deleted(clients.TimeEntries); len(d) != 1 {
		t.Errorf("deleted %v", d)
	}
}

func TestQuotaAndBucket(t *testing.T) {
	t.Parallel()
	s := toggltest.New(toggltest.Options{Quota: 2, QuotaWindow: time.Hour, Clock: func() time.Time {
		return time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	}})
	defer s.Close()
	var codes []int
	for range 3 {
		code, _, _ := get(t, s, s.Token(), "/workspaces/4242/clients")
		codes = append(codes, code)
	}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != 402 {
		t.Errorf("quota codes %v", codes)
	}
	b := toggltest.New(toggltest.Options{Bucket: httpBudget()})
	defer b.Close()
	codes = nil
	for range 3 {
		code, _, _ := get(t, b, b.Token(), "/workspaces/4242/clients")
		codes = append(codes, code)
	}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != 429 {
		t.Errorf("bucket codes %v", codes)
	}
	if r := b.Requests(); len(r) != 3 || r[2].Status != 429 || r[0].At.IsZero() {
		t.Errorf("request log %+v", r)
	}
}

func httpBudget() httpx.RateLimit { return httpx.RateLimit{Requests: 2, Per: time.Minute} }

// Toggl's documented defaults: only active clients unless `status` says
// otherwise, only active projects unless `active` does.
func TestArchivedListedOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	s := toggltest.New(toggltest.Options{})
	defer s.Close()
	s.PutClient(toggltest.Client{ID: 1, Name: "live"})
	s.PutClient(toggltest.Client{ID: 2, Name: "old", Archived: true})
	s.PutProject(toggltest.Project{ID: 1, Name: "live", Active: true})
	s.PutProject(toggltest.Project{ID: 2, Name: "old"})
	for _, c := range []struct {
		path string
		want string
	}{
		{"/workspaces/4242/clients", "[1]"},
		{"/workspaces/4242/clients?status=archived", "[2]"},
		{"/workspaces/4242/clients?status=both", "[1 2]"},
		{"/workspaces/4242/projects", "[1]"},
		{"/workspaces/4242/projects?active=false", "[2]"},
		{"/workspaces/4242/projects?active=both", "[1 2]"},
	} {
		code, body, _ := get(t, s, s.Token(), c.path)
		if got := fmt.Sprint(ids(t, body)); code != http.StatusOK || got != c.want {
			t.Errorf("%s: %d %s, want ids %s", c.path, code, got, c.want)
		}
	}
	if code, _, _ := get(t, s, s.Token(), "/workspaces/4242/clients?status=all"); code != http.StatusBadRequest {
		t.Errorf("status=all: %d, want 400", code)
	}
}
