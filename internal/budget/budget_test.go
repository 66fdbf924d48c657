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
	if len(r.Caps) != 1 || r.Caps[0] != (CapUse{Name: "/me", Hourly: 14, Quota: 30}) {
		t.Fatalf("caps %+v", r.Caps)
	}
	// The daily reconcile (5 requests) makes */15's busiest hour 26 of 30:
	// tight; */20 fits.
	if r.Suggest != "*/20 * * * *" || !strings.Contains(r.Summary(), "61 requests in the busiest hour, 66 with a reconcile run") {
		t.Fatalf("suggest %q; %s", r.Suggest, r.Summary())
	}
}

func TestTogglFreeEveryFifteenMinutesIsTightInTheReconcileHour(t *testing.T) {
	r := planOf(t, toggl+"    schedule: \"*/15 * * * *\"\n")
	if r.HourlyRequests != 21 || r.PeakHourlyRequests != 26 || r.Verdict != Tight || r.Suggest != "" {
		t.Fatalf("%+v", r)
	}
	// Starter's 240 an hour holds every 2 minutes of 5 resources (151),
	// but /me's own 30 an hour does not hold /me/time_entries 30 times.
	r = planOf(t, toggl+"    plan: starter\n    schedule: \"*/2 * * * *\"\n")
	if r.HourlyRequests != 151 || r.Quota != 240 || r.Verdict != DoesNotFit || r.Caps[0].Hourly != 32 {
		t.Fatalf("%+v", r)
	}
	r = planOf(t, toggl+"    plan: starter\n    schedule: \"*/3 * * * *\"\n")
	if r.Verdict != Fits || r.Caps[0].Hourly != 22 || r.HourlyRequests != 101 {
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
	// Its weekly reconcile (7 requests) makes that hour 16: over.
	if r.Quota != 10 || r.QuotaFrom != "rate_limit 10 per 1h0m0s" || r.Verdict != DoesNotFit {
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
	r := planOf(t, "    kind: harvest\n    account_id: \"1\"\n    schedule: \"@every 1s\"\n    resources: [clients, users, projects, tasks, time_entries]\n")
	// 100 per 15 s is 24,000 an hour; 5 resources a second is 18,000.
	if r.Plan != "" || r.Quota != 24000 || r.HourlyRequests != 18000 || r.Verdict != Fits {
		t.Fatalf("%+v", r)
	}
}

func TestTogglWorkspaceScope(t *testing.T) {
	r := planOf(t, toggl+"    scope: workspace\n    schedule: \"*/15 * * * *\"\n")
	// The Reports API search is not a /me call: only /me (zone) once a day.
	// A pass: 4 resources, the search and the id check of a deleted entry
	// (3 searches, a year either side): 8; 4 an hour and /me: 33; 41 with
	// the daily reconcile.
	if r.HourlyRequests != 33 || r.PeakHourlyRequests != 41 || r.Verdict != DoesNotFit || r.Suggest != "0 * * * *" || r.Caps[0].Hourly != 0 || !strings.Contains(r.Resources[4].Note, "14 trailing days") {
		t.Fatalf("%+v", r)
	}
}

// The hour a reconcile runs in is the busiest: its requests count in the
// verdict. A Clockify source whose feed is unusable reads time entries by
// per-user listings: that hour is judged too.
func TestReconcileHourAndFallbackAreCounted(t *testing.T) {
	r := planOf(t, clockify+"    schedule: \"*/20 * * * *\"\n    reconcile: {schedule: \"0 4 * * 0\", lookback_days: 30}\n")
	// A pass: clients, users, projects 1 each, tasks 2, time entries by
	// the feed 1+2+21 (a 30 min span): 29; three passes an hour: 87.
	if r.ReconcileSchedule != "0 4 * * 0" || r.ReconcileRequests != 7 || r.PeakHourlyRequests != r.HourlyRequests+7 {
		t.Fatalf("reconcile: %+v", r)
	}
	if len(r.Reconcile) != 5 || !strings.Contains(r.Reconcile[4].Note, "38 days") {
		t.Fatalf("reconcile lines: %+v", r.Reconcile)
	}
	// Fallback: time entries cost GET users + one listing per user (2).
	if r.FallbackPassRequests != r.PassRequests-r.Resources[4].Requests+2 || r.FallbackVerdict != Fits {
		t.Fatalf("fallback: %+v", r)
	}
	if !strings.Contains(r.Summary(), "with a reconcile run") || !strings.Contains(r.Summary(), "without the change feed") {
		t.Fatalf("summary: %s", r.Summary())
	}
	// No reconcile schedule: nothing counted.
	r = planOf(t, toggl+"    schedule: \"0 * * * *\"\n")
	if r.ReconcileRequests == 0 {
		t.Fatalf("toggl's default reconcile (daily) not counted: %+v", r)
	}
}

// A reconcile counts once per run of its own schedule: every minute is 60
// runs an hour (issue 23, item 5: doctor counted one and said it fit).
func TestReconcileCountsEveryRunOfItsSchedule(t *testing.T) {
	for _, spec := range []string{"* * * * *", "@every 1m"} {
		r := planOf(t, toggl+"    plan: free\n    schedule: \"0 * * * *\"\n    resources: [time_entries]\n    reconcile: {schedule: \""+spec+"\", lookback_days: 7}\n")
		// One incremental pass an hour (1 + /me once a day), and 60
		// reconciles of one /me/time_entries request each.
		if r.ReconcilesPerHour != 60 || r.ReconcileRequests != 1 || r.PeakHourlyRequests != 2+60 || r.Verdict != DoesNotFit || r.Caps[0].Hourly != 62 {
			t.Fatalf("%s: %+v", spec, r)
		}
		if !strings.Contains(r.Summary(), "62 with 60 reconcile runs") {
			t.Fatalf("summary: %s", r.Summary())
		}
	}
}
