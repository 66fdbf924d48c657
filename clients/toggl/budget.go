package toggl

import (
	"cmp"
	"fmt"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/provider"
)

// CapMe names the hourly cap of /me calls (/me/time_entries and /me): 30
// an hour on every plan.
const CapMe = "/me"

// DefaultPlan is the plan of a source that names none: the smallest, so
// that an account whose plan is not stated is never sent past its quota.
const DefaultPlan = "free"

// Plans are Toggl's budgets: about 1 request a second (the leaky bucket)
// and an hourly quota per user and organization; /me calls have their own
// 30 an hour on every plan (APIS.md "Limits", support.toggl.com
// api-webhook-limits). Enterprise's quota is not in the sources we have:
// Premium's 600 is assumed as its floor.
var Plans = []provider.Plan{
	togglPlan("free", 30, "Toggl Free: 30 requests/h per user and organization"),
	togglPlan("starter", 240, "Toggl Starter: 240 requests/h per user and organization"),
	togglPlan("premium", 600, "Toggl Premium: 600 requests/h per user and organization"),
	togglPlan("enterprise", 600, "Toggl Enterprise: not published in our sources; Premium's 600/h assumed as a floor"),
}

func togglPlan(name string, hourly int, doc string) provider.Plan {
	return provider.Plan{Name: name, RateLimit: DefaultRateLimit, Hourly: hourly, Caps: map[string]int{CapMe: 30}, Doc: doc + "; /me calls 30/h; about 1 request/s"}
}

// PassCost is what one incremental pass of r costs at least (one page per
// listing): time entries are one GET /me/time_entries?since (no paging) and
// GET /me for the user's time zone once per ZoneRefresh, both /me calls;
// projects and tasks one page of PerPage; clients and users one response.
//
// With scope: workspace, time entries are the Reports API's detailed search
// over trailing_days of spent dates: at least one page (of ReportPageSize;
// a busy workspace's fortnight is several), not a /me call, plus a search
// by id in every pass in which an entry left its day (Churn: an edited
// workspace's every pass), and GET /me once a day for the owner's zone.
//
// A reconcile run lists the same ways over its days: time entries by
// start_date/end_date (or the Reports API search), the rest whole.
func PassCost(r clients.Resource, p provider.PassShape, s provider.Settings) provider.Cost {
	switch r {
	case clients.TimeEntries:
		if s.Scope == ScopeWorkspace && p.Reconcile {
			n := lookups(p.Days, 0)
			return provider.Cost{Requests: 1, Churn: n, Note: fmt.Sprintf("Reports API search over %d days: one request per %d entries; +%d searches by id when an entry left its day (a deleted one is looked for a year either side, then a search a year back to the workspace's earliest entries)", p.Days, ReportPageSize, n)}
		}
		if s.Scope == ScopeWorkspace {
			days := cmp.Or(s.TrailingDays, DefaultTrailingDays)
			n := lookups(days, 1)
			return provider.Cost{Requests: 1, Churn: n, Daily: 1, Note: fmt.Sprintf("Reports API search over %d trailing days: one request per %d entries; +%d searches by id when an entry left its day (a deleted one is looked for a year either side, then a search a year back to the workspace's earliest entries); and GET /me (time zone) once a day",
				days, ReportPageSize, n)}
		}
		if p.Reconcile {
			return provider.Cost{Requests: 1, Cap: CapMe, Note: fmt.Sprintf("GET /me/time_entries over %d days (split while a range holds %d)", p.Days, EntryCap)}
		}
		return provider.Cost{Requests: 1, Daily: 1, Cap: CapMe, Note: "GET /me/time_entries?since (no paging), and GET /me (time zone) once a day"}
	case clients.Projects, clients.Tasks:
		return provider.Cost{Requests: 1, Note: "one page of 200 with since (more pages: more requests)"}
	default:
		return provider.Cost{Requests: 1, Note: "listed whole in one response"}
	}
}

// lookups is how many searches by id an entry absent from a listing of the
// days before today (to ahead days after it) costs when it is gone: every
// range of confirmRanges.
func lookups(days, ahead int) int {
	today := clients.DateOf(time.Now().UTC())
	return len(confirmRanges(today.AddDays(-days), today.AddDays(ahead), today))
}
