package clockify

import (
	"fmt"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/provider"
)

// DefaultPlan is the plan of a source that names none: the smallest, so
// that a workspace whose plan is not stated is never sent past its quota
// (10 requests/s would spend a free workspace's hour in 3 s).
const DefaultPlan = "free"

// FreeRateLimit keeps a free workspace within its 30 requests an hour in
// any window of an hour, even right after start-up.
var FreeRateLimit = httpx.RateLimit{Requests: 30, Per: time.Hour}

// Plans are Clockify's budgets (APIS.md "Limits", clockify.me/help
// webhook-and-api-limitations): newly created free workspaces 30 requests
// an hour for the whole workspace; paid ones 50 requests a second, of which
// DefaultRateLimit is a safe share (other integrations use the same budget).
var Plans = []provider.Plan{
	{Name: "free", RateLimit: FreeRateLimit, Hourly: 30, Doc: "Clockify free (new workspaces): 30 requests/h for the whole workspace"},
	{Name: "paid", RateLimit: DefaultRateLimit, Doc: "Clockify paid: 50 requests/s per workspace (10/s used by default)"},
}

// PassCost is what one incremental pass of r costs at least (one page per
// listing, page size DefaultPageSize):
//
//   - time entries, by the change feed (clockify.go, feed): GET /user for
//     the source's clock, then per feed window (at most DefaultFeedWindow)
//     /entities/created and /entities/updated, and /entities/deleted in
//     sub-windows of DefaultDeletionWindow (each starting a second before
//     the previous ended) when the pass spans at most DefaultDeletionSpan,
//     else once per window. The pass spans the time since the previous
//     pass plus the overlap. Not counted: a second page 0 confirmation
//     when more than DefaultFeedLimit changes fall in a window, the users
//     and projects walks a page with unknown users or projects costs once,
//     and the fallback (feed unusable): GET users plus one listing per user.
//   - tasks: the projects listing, then one listing per project.
//   - clients, projects, users: one page each.
//
// A reconcile run lists time entries per user over its days (GET users,
// then one listing per user) and every other resource as above.
func PassCost(r clients.Resource, p provider.PassShape, _ provider.Settings) provider.Cost {
	users := max(p.Users, 1)
	perUser := 1 + users
	switch {
	case r == clients.TimeEntries && p.Reconcile:
		return provider.Cost{Requests: perUser, Note: fmt.Sprintf("GET users + one listing per user over %d days (%d user(s) assumed)", p.Days, users)}
	case r == clients.TimeEntries:
		created, deleted := feedRequests(p.Span, DefaultFeedWindow, DefaultDeletionWindow, DefaultDeletionSpan)
		return provider.Cost{Requests: 1 + created + deleted, Fallback: perUser, Note: fmt.Sprintf(
			"change feed: GET /user (clock) + %d created/updated + %d deleted (sub-windows of %s over a %s span); feed unusable: GET users + one listing per user",
			created, deleted, DefaultDeletionWindow, p.Span.Round(time.Second))}
	case r == clients.Tasks:
		n := max(p.Projects, 1)
		return provider.Cost{Requests: 1 + n, Note: fmt.Sprintf("projects listing + one per project (%d assumed)", n)}
	default:
		return provider.Cost{Requests: 1, Note: "one page of 1000"}
	}
}

// feedRequests counts the feed requests of a pass over span as feed walks
// it: created+updated requests and deleted requests, one page each.
func feedRequests(span, window, delWindow, delSpan time.Duration) (createdUpdated, deleted int) {
	span = span.Truncate(time.Second)
	if span <= 0 {
		return 0, 0
	}
	var start time.Duration
	end := span
	for ws := start; ws < end; {
		we := min(ws+window, end)
		createdUpdated += 2
		step := delWindow
		if end-start > delSpan {
			step = we - ws
		}
		for ds := ws; ds < we; {
			de := min(ds+step, we)
			deleted++
			if de >= we {
				break
			}
			ds = de - time.Second
		}
		if we >= end {
			break
		}
		ws = we - time.Second
	}
	return createdUpdated, deleted
}
