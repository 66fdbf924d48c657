package budget

import (
	"strings"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/internal/config"
)

func source(t *testing.T, body string) *config.Source {
	t.Helper()
	c, err := config.Parse("t.yaml", []byte("sources:\n  - name: s\n    token: x\n"+body), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return &c.Sources[0]
}

func planOf(t *testing.T, body string) Report {
	t.Helper()
	r, err := ForSource(source(t, body), Assume{})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(r.Summary())
	return r
}

const toggl = "    kind: toggl\n    workspace_id: \"1\"\n"
const clockify = "    kind: clockify\n    workspace_id: 5f1e0c2a9b3d4e5f6a7b8c9d\n"

func TestPasses(t *testing.T) {
	for spec, want := range map[string]struct {
		n   int
		gap time.Duration
	}{
		"*/5 * * * *":    {12, 5 * time.Minute},
		"*/15 * * * *":   {4, 15 * time.Minute},
		"@every 30s":     {120, 30 * time.Second},
		"0 3 * * *":      {1, 24 * time.Hour},
		"0,1 9 * * 1-5":  {2, time.Minute},
		"0 0 1 1 *":      {1, 7 * 24 * time.Hour},
		"30 * * * *":     {1, time.Hour},
		"0,59 * * * *":   {2, time.Minute},
		"*/20 8-9 * * *": {3, 20 * time.Minute},
	} {
		n, gap, err := Passes(spec)
		if err != nil || n != want.n || gap != want.gap {
			t.Errorf("%s: %d passes/h, gap %s, %v; want %d, %s", spec, n, gap, err, want.n, want.gap)
		}
	}
	if _, _, err := Passes("every now and then"); err == nil {
		t.Fatal("a bad spec passed")
	}
}

func TestTogglFreeEveryFiveMinutesDoesNotFit(t *testing.T) {
	r := planOf(t, toggl+"    schedule: \"*/5 * * * *\"\n")
	// 5 resources × 12 passes, and /me for the time zone once a day.
	if r.Plan != "free" || r.PassRequests != 5 || r.PassesPerHour != 12 || r.HourlyRequests != 61 || r.Quota != 30 || r.Verdict != DoesNotFit || r.Refuse {
		t.Fatalf("%+v", r)
	}
	if len(r.Caps) != 1 || r.Caps[0] != (CapUse{Name: "/me", Hourly: 13, Quota: 30}) {
		t.Fatalf("caps %+v", r.Caps)
	}
	if r.Suggest != "*/15 * * * *" || !strings.Contains(r.Summary(), "61 requests in the busiest hour against 30/h (plan free)") {
		t.Fatalf("suggest %q; %s", r.Suggest, r.Summary())
	}
}

func TestTogglFreeEveryFifteenMinutesFits(t *testing.T) {
	r := planOf(t, toggl+"    schedule: \"*/15 * * * *\"\n")
	if r.HourlyRequests != 21 || r.Verdict != Fits || r.Suggest != "" {
		t.Fatalf("%+v", r)
	}
	// Starter's 240 an hour holds every 2 minutes of 5 resources (151),
	// but /me's own 30 an hour does not hold /me/time_entries 30 times.
	r = planOf(t, toggl+"    plan: starter\n    schedule: \"*/2 * * * *\"\n")
	if r.HourlyRequests != 151 || r.Quota != 240 || r.Verdict != DoesNotFit || r.Caps[0].Hourly != 31 {
		t.Fatalf("%+v", r)
	}
	r = planOf(t, toggl+"    plan: starter\n    schedule: \"*/3 * * * *\"\n")
	if r.Verdict != Fits || r.Caps[0].Hourly != 21 || r.HourlyRequests != 101 {
		t.Fatalf("%+v", r)
	}
}

func TestTogglFreeEveryFiveMinutesFewerResourcesFits(t *testing.T) {
	r := planOf(t, toggl+"    schedule: \"*/5 * * * *\"\n    resources: [time_entries]\n")
	if r.HourlyRequests != 13 || r.Verdict != Fits {
		t.Fatalf("%+v", r)
	}
}

func TestClockifyFree(t *testing.T) {
	// Every 5 minutes with a 10 minute overlap: each pass reads 15 minutes
	// of the feed, deletions by the minute (16) + created + updated + the
	// clock = 19; clients, users, projects 1 each; tasks 1 + 1 project.
	r := planOf(t, clockify+"    schedule: \"*/5 * * * *\"\n")
	if r.Plan != "free" || r.Quota != 30 || r.PassRequests != 24 || r.HourlyRequests != 288 || r.Verdict != DoesNotFit || r.Refuse {
		t.Fatalf("%+v", r)
	}
	if r.MinPassRequests != 9 || r.Suggest != "0 * * * *" {
		t.Fatalf("min %d, suggest %q", r.MinPassRequests, r.Suggest)
	}
	// Hourly fits: one pass over 70 minutes, deletions in one request.
	r = planOf(t, clockify+"    schedule: \"0 * * * *\"\n")
	if r.HourlyRequests != 9 || r.Verdict != Fits {
		t.Fatalf("%+v", r)
	}
	// The rate limit is the budget when it allows less than the plan.
	r = planOf(t, clockify+"    schedule: \"0 * * * *\"\n    rate_limit: {requests: 10, per: 1h}\n")
	if r.Quota != 10 || r.QuotaFrom != "rate_limit 10 per 1h0m0s" || r.Verdict != Tight {
		t.Fatalf("%+v", r)
	}
	// Paid: 10 requests/s and no hourly quota.
	r = planOf(t, clockify+"    plan: paid\n    schedule: \"@every 10s\"\n")
	if r.Quota != 36000 || r.Verdict != Fits {
		t.Fatalf("%+v", r)
	}
}

func TestRefuseWhenOnePassAnHourCannotFit(t *testing.T) {
	r, err := ForSource(source(t, clockify+"    schedule: \"0 * * * *\"\n"), Assume{Projects: 40})
	if err != nil {
		t.Fatal(err)
	}
	// tasks: the projects listing and one per project = 41 > 30.
	if !r.Refuse || r.Verdict != DoesNotFit || r.MinPassRequests != 48 || !strings.Contains(r.Summary(), "even one pass an hour (48 requests) does not fit") {
		t.Fatalf("%s", r.Summary())
	}
}

func TestHarvestHasNoQuota(t *testing.T) {
	r := planOf(t, "    kind: harvest\n    account_id: \"1\"\n    schedule: \"@every 1s\"\n")
	// 100 per 15 s is 24,000 an hour; 5 resources a second is 18,000.
	if r.Plan != "" || r.Quota != 24000 || r.HourlyRequests != 18000 || r.Verdict != Fits {
		t.Fatalf("%+v", r)
	}
}

func TestTogglWorkspaceScope(t *testing.T) {
	r := planOf(t, toggl+"    scope: workspace\n    schedule: \"*/15 * * * *\"\n")
	// The Reports API search is not a /me call: only /me (zone) once a day.
	if r.HourlyRequests != 21 || r.Verdict != Fits || r.Caps[0].Hourly != 0 || !strings.Contains(r.Resources[4].Note, "14 trailing days") {
		t.Fatalf("%+v", r)
	}
}
