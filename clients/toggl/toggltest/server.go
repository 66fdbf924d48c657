// Package toggltest is a fake Toggl Track API v9 server for tests. It follows
// what APIS.md documents (Basic <token>:api_token auth with 403 on bad
// credentials; GET /me/time_entries with `since` — deleted entries included
// with server_deleted_at — or start_date/end_date; `since` older than about
// 3 months refused; bare JSON arrays; workspace projects, clients, tasks and
// users; a leaky bucket answering 429; hourly quotas answering 402) and
// injects faults on demand through the fake kit (internal/fakeapi). The
// hourly quota is its own: a window from the first request, with Toggl's
// X-Toggl-Quota-* headers. The
// source's clock is skewable and drives the Date header, default stamps
// and the limits.
//
// GET /me serves the token owner with its `timezone` (Options.TimeZone).
//
// The Reports API v3 detailed search (POST /reports/api/v3/workspace/{wid}/
// search/time_entries, every user's entries, paged by the X-Next-* headers)
// and the workspace's tags are served too: see reports.go.
//
// What it assumes where the documentation is silent: end_date is
// exclusive; start_date/end_date are days in the user's zone; start_date/end_date listings leave deleted entries out; a
// listing of /me/time_entries without parameters returns every live entry;
// projects and tasks page with page/per_page (default 151, at most 200) and
// answer `since` with deleted records included; tasks come in the documented
// envelope {data, page, per_page, sort_field, sort_order, total_count}
// (total_count counts the listing, `since` applied), projects as a bare
// array; clients and users are not
// paginated; clients list only active ones unless `status` is archived or
// both, and projects and tasks only active ones unless `active` is false
// or both (Toggl's reference; the filter applies to `since` listings and
// deleted records too); workspace users are served without `at` or
// server_deleted_at (as documented) and listed whole, `since` or not; the
// text of the 400, 402 and 429 bodies; a 429 carries no
// Retry-After unless Options.RetryAfter is set.
package toggltest

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
)

// Defaults.
const (
	DefaultToken       = "toggltest-token-0123456789"
	DefaultWorkspaceID = 4242
	DefaultSinceLimit  = 90 * 24 * time.Hour
	DefaultPerPage     = 151
	MaxPerPage         = 200
)

// Options configures a Server.
type Options struct {
	Token       string
	WorkspaceID int64
	// Clock is the source's clock before Skew (default time.Now).
	Clock func() time.Time
	Skew  time.Duration
	// Zone renders stamps with this zone's offset (default UTC, "+00:00").
	Zone *time.Location
	// SinceLimit is how far back `since` is served (default 90 days).
	SinceLimit time.Duration
	// Bucket is the leaky bucket: at most Requests in a burst, draining one
	// every Per/Requests. Zero: no bucket.
	Bucket httpx.RateLimit
	// RetryAfter, when set, is sent with every 429.
	RetryAfter string
	// Quota is the number of requests served per QuotaWindow (default one
	// hour) before answering 402. Zero: no quota. As Toggl documents it,
	// the window starts at the first request (on the source's clock) and
	// lasts QuotaWindow; the next request after it starts the next one.
	// Every answer then carries X-Toggl-Quota-Remaining and
	// X-Toggl-Quota-Resets-In (whole seconds, rounded up), unless
	// NoQuotaHeaders.
	Quota          int
	QuotaWindow    time.Duration
	NoQuotaHeaders bool
	// ForbidUsers answers 403 to the workspace users list (a non-admin
	// token).
	ForbidUsers bool
	// PlanGated are workspace listings the plan lacks (tasks on Free):
	// they answer 402, after the quota is counted (so with the quota
	// headers, when Quota is set). The body's text is assumed.
	PlanGated []clients.Resource
	// VisibilityDelay makes a write visible to listings (and State) that
	// long after its `at` on the source's clock (a deletion: after the
	// source's now when it was made), as a replica lagging behind or a long
	// transaction would. Writes of one record become visible in the order
	// they were made. Zero: at once.
	VisibilityDelay time.Duration
	// EntryCap, when above 0, cuts every /me/time_entries response to its
	// first EntryCap entries (newest start first): Toggl serves at most
	// 1000 there and says nothing when it cuts.
	EntryCap int
	// IgnoreBefore makes /me/time_entries ignore `before` (the docs do
	// not say whether it combines with `since`).
	IgnoreBefore bool
	// TimeZone is the token owner's zone, served as /me's `timezone`
	// (default "UTC"); start_date/end_date are that zone's days.
	TimeZone string
	// NoMe answers 404 to GET /me (a source that does not serve it).
	NoMe bool
	// UserZones are the users' own zones, by user id, as the Reports API
	// applies them (a user not named: TimeZone).
	UserZones map[int64]*time.Location
	// ReportPageCap caps the detailed search's page_size (default 200).
	ReportPageCap int
	// LateEvery, when above 1, delays only every LateEvery-th write (the
	// others are visible at once), like a few long transactions among
	// quick ones: a listing then shows writes stamped after one it does
	// not show yet.
	LateEvery int
}

// Server is a running fake: the kit's faults, request log, limits and
// clock (fakeapi.Kit; Malform endpoints are the resource names, e.g.
// "time_entries", and a listing without pages is page 1) around Toggl's
// routes. Every method is safe for concurrent use.
type Server struct {
	*fakeapi.Kit
	opts Options

	late   fakeapi.Late[fakeapi.Key[int64], any] // the store's lock; writes not yet visible
	tables map[clients.Resource]records          // deleted records too

	taskTotalBias int                   // SetTaskTotalBias; under the store's lock
	reportQueries []ReportQuery         // under the store's lock
	tagIDs        map[string]int64      // under the store's lock
	owner         atomic.Pointer[owner] // SetOwner: the token accepted and its owner's zone

	quotaMu    sync.Mutex
	quotaStart time.Time // source clock: the first request of the window
	quotaUsed  int

	wh hooks // webhooks.go
}

var dialect = fakeapi.Dialect{
	Base: "/api/v9",
	Fault: func(status int) string {
		switch status {
		case http.StatusTooManyRequests:
			return `"Too Many Requests"`
		case http.StatusPaymentRequired:
			return `"You have hit your hourly limit for API calls. Upgrade your plan or wait for the limit to reset."`
		}
		return `"Internal Server Error"`
	},
	HTMLPage:   "<!DOCTYPE html>\n<html><head><title>Toggl Track is down for maintenance</title></head><body><h1>Back soon.</h1></body></html>\n",
	PageParams: []string{"page"},
	PageFields: []string{"first_id", "first_row_number", "first_timestamp"},
}

// New starts a fake on a loopback port. Close it when done.
func New(o Options) *Server {
	o.Token = cmp.Or(o.Token, DefaultToken)
	o.WorkspaceID = cmp.Or(o.WorkspaceID, DefaultWorkspaceID)
	o.SinceLimit = cmp.Or(o.SinceLimit, DefaultSinceLimit)
	if o.Zone == nil {
		o.Zone = time.UTC
	}
	o.TimeZone = cmp.Or(o.TimeZone, "UTC")
	o.QuotaWindow = cmp.Or(o.QuotaWindow, time.Hour)
	loc, err := time.LoadLocation(o.TimeZone)
	if err != nil {
		panic(fmt.Sprintf("toggltest: time zone %q: %v", o.TimeZone, err))
	}
	s := &Server{opts: o, tables: newTables()}
	s.owner.Store(&owner{token: o.Token, timeZone: o.TimeZone, zone: loc})
	s.late.Delay, s.late.Every, s.late.Apply = o.VisibilityDelay, o.LateEvery, s.apply
	s.Kit = fakeapi.New(dialect, fakeapi.Config{
		Clock: o.Clock, Skew: o.Skew, Bucket: o.Bucket, RetryAfter: o.RetryAfter,
	}, s.route)
	s.late.Now = s.Now
	return s
}

// owner is the token the fake accepts and its owner's zone (/me).
type owner struct {
	token, timeZone string
	zone            *time.Location
}

// SetOwner makes the fake accept token only, owned by someone in zone
// timeZone (an IANA name): the source is given another person's token.
func (s *Server) SetOwner(token, timeZone string) {
	loc, err := time.LoadLocation(timeZone)
	if err != nil {
		panic(fmt.Sprintf("toggltest: time zone %q: %v", timeZone, err))
	}
	s.owner.Store(&owner{token: token, timeZone: timeZone, zone: loc})
}

func (s *Server) userZone() *time.Location { return s.owner.Load().zone }

// Token and WorkspaceID are what the fake accepts.
func (s *Server) Token() string      { return s.owner.Load().token }
func (s *Server) WorkspaceID() int64 { return s.opts.WorkspaceID }
func (s *Server) stamp() time.Time   { return s.Now().UTC().Truncate(time.Second) }
func (s *Server) fmtTime(t time.Time) string {
	return t.In(s.opts.Zone).Format("2006-01-02T15:04:05-07:00")
}

// ---- store -----------------------------------------------------------------

// PutTimeEntry inserts or replaces an entry. A zero At becomes the source's
// now (second precision); a zero WorkspaceID the server's.
func (s *Server) PutTimeEntry(e TimeEntry) {
	e.WorkspaceID = cmp.Or(e.WorkspaceID, s.opts.WorkspaceID)
	s.put(clients.TimeEntries, e)
}

// PutProject inserts or replaces a project (a zero At is now).
func (s *Server) PutProject(p Project) { s.put(clients.Projects, p) }

// PutClient inserts or replaces a client.
func (s *Server) PutClient(c Client) { s.put(clients.Clients, c) }

// PutTask inserts or replaces a task.
func (s *Server) PutTask(t Task) { s.put(clients.Tasks, t) }

// PutUser inserts or replaces a workspace user.
func (s *Server) PutUser(u User) { s.put(clients.Users, u) }

// put stores v now, or queues it until its `at` + VisibilityDelay (Late).
func (s *Server) put(r clients.Resource, v any) {
	s.late.Lock()
	defer s.late.Unlock()
	id, at, del := s.tables[r].stamps(v)
	if at.IsZero() {
		at = s.stamp()
		v = s.tables[r].with(v, at, del)
	}
	_, existed := s.latest(r, id)
	s.write(r, v, at)
	s.emit(r, map[bool]string{true: "updated", false: "created"}[existed], v)
}

// write queues v (even when visible at once: it must not overtake an
// earlier write of the same record), late as Late decides.
func (s *Server) write(r clients.Resource, v any, at time.Time) {
	id, _, _ := s.tables[r].stamps(v)
	s.late.Write(fakeapi.Key[int64]{Resource: r, ID: id}, at, v)
}

func (s *Server) apply(k fakeapi.Key[int64], v any) { s.tables[k.Resource].put(v) }

// latest returns r's id as last written, visible or not yet.
func (s *Server) latest(r clients.Resource, id int64) (any, bool) {
	if v, ok := s.late.Last(fakeapi.Key[int64]{Resource: r, ID: id}); ok {
		return v, true
	}
	return s.tables[r].get(id)
}

// Delete marks a record deleted at the source's now (server_deleted_at, and
// `at` moves too). It reports whether a live record had the id.
func (s *Server) Delete(r clients.Resource, id int64) bool {
	s.late.Lock()
	defer s.late.Unlock()
	v, ok := s.latest(r, id)
	if !ok {
		return false
	}
	if _, _, del := s.tables[r].stamps(v); del != nil {
		return false
	}
	now := s.stamp()
	v = s.tables[r].with(v, now, &now)
	s.write(r, v, now)
	s.emit(r, "deleted", v)
	return true
}

// TimeEntry returns an entry (deleted ones too) as last written, visible
// or not yet (VisibilityDelay).
func (s *Server) TimeEntry(id int64) (TimeEntry, bool) {
	s.late.Lock()
	defer s.late.Unlock()
	v, _ := s.latest(clients.TimeEntries, id)
	e, ok := v.(TimeEntry)
	return e, ok
}

// Pending returns how many writes are not yet visible (VisibilityDelay).
func (s *Server) Pending() int { return s.late.Pending() }

// State returns a snapshot of the store as listings serve it now (writes
// not yet visible excluded).
func (s *Server) State() State {
	s.late.Lock()
	defer s.late.Unlock()
	return newState(s.tables)
}

// Versions returns r's live ids (decimal text, as in the mirror) with their
// versions (`at`), as listings serve them now.
func (s *Server) Versions(r clients.Resource) map[string]time.Time { return s.State().Versions(r) }

// MalformResource breaks page 1 of every listing of r until cleared with
// m = 0: each resource is one endpoint, and a listing without pages is
// page 1.
func (s *Server) MalformResource(r clients.Resource, m fakeapi.Malformation) {
	s.Malform(string(r), 1, m)
}

// SetForbidUsers switches the 403 on the users list.
func (s *Server) SetForbidUsers(v bool) {
	s.late.Lock()
	s.opts.ForbidUsers = v
	s.late.Unlock()
}

// ---- HTTP ------------------------------------------------------------------

func (s *Server) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte(s.Token()+":api_token"))
	return h == want
}

func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		fakeapi.WriteJSON(w, http.StatusForbidden, `"Incorrect username and/or password"`)
		return
	}
	if !s.quota(w, fakeapi.Arrival(r)) {
		fakeapi.WriteJSON(w, http.StatusPaymentRequired, dialect.Fault(http.StatusPaymentRequired))
		return
	}
	if s.routeWebhooks(w, r) {
		return
	}
	s.Listing(r)
	if s.routeReports(w, r) {
		return
	}
	path, ok := strings.CutPrefix(r.URL.Path, dialect.Base+"/")
	if !ok || r.Method != http.MethodGet {
		fakeapi.WriteJSON(w, http.StatusNotFound, `"Not Found"`)
		return
	}
	if path == "me/time_entries" {
		s.listEntries(w, r.URL.Query())
		return
	}
	if path == "me" && !s.opts.NoMe {
		s.writeMe(w)
		return
	}
	parts := strings.Split(path, "/")
	if len(parts) != 3 || parts[0] != "workspaces" {
		fakeapi.WriteJSON(w, http.StatusNotFound, `"Not Found"`)
		return
	}
	if wid, err := strconv.ParseInt(parts[1], 10, 64); err != nil || wid != s.opts.WorkspaceID {
		fakeapi.WriteJSON(w, http.StatusForbidden, `"Incorrect username and/or password"`)
		return
	}
	if parts[2] == "tags" {
		s.writeTags(w)
		return
	}
	res := clients.Resource(parts[2])
	if _, ok := s.tables[res]; !ok || res == clients.TimeEntries {
		fakeapi.WriteJSON(w, http.StatusNotFound, `"Not Found"`)
		return
	}
	s.listWorkspace(w, res, r.URL.Query())
}

// quota counts a request that arrived at now (source clock) against the
// hourly quota and sets the quota headers; false: spent (answer 402).
func (s *Server) quota(w http.ResponseWriter, now time.Time) bool {
	if s.opts.Quota <= 0 {
		return true
	}
	s.quotaMu.Lock()
	defer s.quotaMu.Unlock()
	win := s.opts.QuotaWindow
	if s.quotaStart.IsZero() || !now.Before(s.quotaStart.Add(win)) {
		s.quotaStart, s.quotaUsed = now, 0
	}
	ok := s.quotaUsed < s.opts.Quota
	if ok {
		s.quotaUsed++
	}
	if !s.opts.NoQuotaHeaders {
		left := s.quotaStart.Add(win).Sub(now)
		w.Header().Set("X-Toggl-Quota-Remaining", strconv.Itoa(s.opts.Quota-s.quotaUsed))
		w.Header().Set("X-Toggl-Quota-Resets-In", strconv.Itoa(int(math.Ceil(left.Seconds()))))
	}
	return ok
}

type badRequest string

// parseSince reads `since` (unix seconds) and enforces the age limit.
func (s *Server) parseSince(q url.Values) (time.Time, badRequest) {
	v := q.Get("since")
	if v == "" {
		return time.Time{}, ""
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, `"Invalid value for since: must be a UNIX timestamp"`
	}
	since := time.Unix(n, 0)
	if since.Before(s.Now().Add(-s.opts.SinceLimit)) {
		return time.Time{}, `"The since parameter cannot be older than 3 months. Use start_date and end_date or the Reports API for older data."`
	}
	return since, ""
}

func (s *Server) listEntries(w http.ResponseWriter, q url.Values) {
	since, bad := s.parseSince(q)
	var from, to time.Time
	if bad == "" && (q.Has("start_date") || q.Has("end_date")) {
		switch {
		case q.Has("since"):
			bad = `"since cannot be combined with start_date and end_date"`
		case !q.Has("start_date") || !q.Has("end_date"):
			bad = `"start_date and end_date must be given together"`
		default:
			var err1, err2 error
			from, err1 = parseDay(q.Get("start_date"), s.userZone())
			to, err2 = parseDay(q.Get("end_date"), s.userZone())
			if err1 != nil || err2 != nil {
				bad = `"start_date and end_date must be YYYY-MM-DD or RFC 3339"`
			} else if to.Before(from) {
				bad = `"end_date must not be earlier than start_date"`
			}
		}
	}
	if bad != "" {
		fakeapi.WriteJSON(w, http.StatusBadRequest, string(bad))
		return
	}
	var before time.Time
	if v := q.Get("before"); v != "" && !s.opts.IgnoreBefore {
		var err error
		if before, err = parseDay(v, s.userZone()); err != nil {
			fakeapi.WriteJSON(w, http.StatusBadRequest, `"before must be YYYY-MM-DD or RFC 3339"`)
			return
		}
	}
	s.late.Lock()
	defer s.late.Unlock()
	var out []TimeEntry
	for _, e := range rows[TimeEntry](s.tables[clients.TimeEntries]) {
		switch {
		case !before.IsZero() && !e.Start.Before(before):
			continue
		case !since.IsZero():
			if e.At.Before(since) && (e.DeletedAt == nil || e.DeletedAt.Before(since)) {
				continue
			}
		case e.DeletedAt != nil:
			continue
		case !from.IsZero() && (e.Start.Before(from) || !e.Start.Before(to)):
			continue
		}
		out = append(out, e)
	}
	fakeapi.NewestFirst(out, func(e *TimeEntry) (time.Time, int64) { return e.Start, e.ID })
	if c := s.opts.EntryCap; c > 0 && len(out) > c {
		out = out[:c]
	}
	objs := make([]map[string]any, len(out))
	for i, e := range out {
		objs[i] = s.entryJSON(e)
	}
	s.writeList(w, clients.TimeEntries, 1, objs, nil)
}

// parseDay reads a date (midnight in the user's zone) or an RFC 3339 stamp.
func parseDay(v string, zone *time.Location) (time.Time, error) {
	if t, err := time.ParseInLocation(time.DateOnly, v, zone); err == nil {
		return t, nil
	}
	return time.Parse(time.RFC3339, v)
}

func (s *Server) listWorkspace(w http.ResponseWriter, res clients.Resource, q url.Values) {
	if slices.Contains(s.opts.PlanGated, res) {
		fakeapi.WriteJSON(w, http.StatusPaymentRequired, `"This feature is not available on your workspace's plan"`)
		return
	}
	if res == clients.Users && s.opts.ForbidUsers {
		fakeapi.WriteJSON(w, http.StatusForbidden, `"Forbidden: only workspace admins can list users"`)
		return
	}
	since, bad := s.parseSince(q)
	if res == clients.Users {
		// Users have no `at` to filter on: the listing is always whole.
		since = time.Time{}
	}
	perPage, page := 0, 1
	if res == clients.Projects || res == clients.Tasks {
		perPage = DefaultPerPage
		if v := q.Get("per_page"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxPerPage {
				bad = `"per_page must be between 1 and 200"`
			}
			perPage = n
		}
		if v := q.Get("page"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				bad = `"page must be a positive integer"`
			}
			page = n
		}
	}
	state, sbad := stateFilter(res, q)
	if bad == "" {
		bad = sbad
	}
	if bad != "" {
		fakeapi.WriteJSON(w, http.StatusBadRequest, string(bad))
		return
	}
	s.late.Lock()
	defer s.late.Unlock()
	type item struct {
		id  int64
		obj map[string]any
	}
	var items []item
	keep := func(at time.Time, del *time.Time) bool {
		if since.IsZero() {
			return del == nil
		}
		return !at.Before(since) || (del != nil && !del.Before(since))
	}
	t := s.tables[res]
	for _, v := range t.all() {
		if id, at, del := t.stamps(v); keep(at, del) && state(v) {
			items = append(items, item{id, s.workspaceJSON(v)})
		}
	}
	slices.SortFunc(items, func(a, b item) int { return cmp.Compare(a.id, b.id) })
	total := len(items)
	if perPage > 0 {
		lo := min((page-1)*perPage, len(items))
		items = items[lo:min(lo+perPage, len(items))]
	}
	objs := make([]map[string]any, len(items))
	for i, it := range items {
		objs[i] = it.obj
	}
	if res == clients.Tasks {
		// As documented: an envelope, not a bare array.
		s.writeList(w, res, page, objs, func(data []map[string]any) any {
			return map[string]any{"data": data, "page": page, "per_page": perPage,
				"sort_field": "id", "sort_order": "ASC", "total_count": total + s.taskTotalBias}
		})
		return
	}
	s.writeList(w, res, page, objs, nil)
}

// stateFilter reads the archive filter Toggl documents for res: clients'
// `status` (active, archived or both; "If not provided, only active
// clients are returned") and projects' and tasks' `active` (true, false or
// both). Left out, only active records are listed, as Toggl does. Users
// take no filter.
func stateFilter(res clients.Resource, q url.Values) (func(any) bool, badRequest) {
	param, on, off := "active", "true", "false"
	switch res {
	case clients.Clients:
		param, on, off = "status", "active", "archived"
	case clients.Projects, clients.Tasks:
	default:
		return func(any) bool { return true }, ""
	}
	var want func(active bool) bool
	switch q.Get(param) {
	case "", on:
		want = func(a bool) bool { return a }
	case off:
		want = func(a bool) bool { return !a }
	case "both":
		want = func(bool) bool { return true }
	default:
		return nil, badRequest(fmt.Sprintf(`"%s must be %s, %s or both"`, param, on, off))
	}
	return func(v any) bool {
		switch v := v.(type) {
		case Client:
			return want(!v.Archived)
		case Project:
			return want(v.Active)
		case Task:
			return want(v.Active)
		}
		return true
	}, ""
}

// SetTaskTotalBias adds n to every tasks envelope's total_count: a
// provider whose envelope promises more than it serves (a listing cut
// short).
func (s *Server) SetTaskTotalBias(n int) {
	s.late.Lock()
	s.taskTotalBias = n
	s.late.Unlock()
}

// OwnerID is the token owner's user id, as GET /me serves it: in scope me,
// only its time entries are the source's (Toggl's /me/time_entries; the
// fake serves every entry there, whoever's).
const OwnerID = 1

// writeMe answers GET /me: the token owner, with the documented fields a
// client reads (timezone among them).
func (s *Server) writeMe(w http.ResponseWriter) {
	b, err := json.Marshal(map[string]any{
		"id": OwnerID, "api_token": "********************************", "email": "owner@example.com", "fullname": "Token Owner",
		"timezone": s.owner.Load().timeZone, "default_workspace_id": s.opts.WorkspaceID, "beginning_of_week": 1,
		"image_url": "", "created_at": "2020-01-01T00:00:00Z", "updated_at": "2020-01-01T00:00:00Z",
		"openid_enabled": false, "has_password": true, "at": "2020-01-01T00:00:00Z",
	})
	if err != nil {
		panic(err)
	}
	fakeapi.WriteJSON(w, http.StatusOK, string(b))
}

// workspaceJSON renders a project, client, task or user.
func (s *Server) workspaceJSON(v any) map[string]any {
	switch v := v.(type) {
	case Project:
		return map[string]any{"id": v.ID, "workspace_id": s.opts.WorkspaceID,
			"client_id": nullID(v.ClientID), "name": v.Name, "active": v.Active, "billable": v.Billable,
			"is_private": false, "color": "#06aaf5", "at": s.fmtTime(v.At), "server_deleted_at": s.optTime(v.DeletedAt)}
	case Client:
		return map[string]any{"id": v.ID, "wid": s.opts.WorkspaceID, "name": v.Name,
			"archived": v.Archived, "at": s.fmtTime(v.At), "server_deleted_at": s.optTime(v.DeletedAt)}
	case Task:
		return map[string]any{"id": v.ID, "workspace_id": s.opts.WorkspaceID,
			"project_id": v.ProjectID, "name": v.Name, "active": v.Active, "at": s.fmtTime(v.At),
			"server_deleted_at": s.optTime(v.DeletedAt)}
	case User:
		// As documented: no `at` and no server_deleted_at (a deleted
		// user is left out of the listing).
		return map[string]any{"id": v.ID, "email": v.Email, "fullname": v.Fullname,
			"inactive": v.Inactive, "is_active": !v.Inactive, "is_admin": false, "role": "user"}
	}
	panic(fmt.Sprintf("toggltest: no workspace rendering for %T", v))
}

func nullID(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

func (s *Server) optTime(t *time.Time) any {
	if t == nil {
		return nil
	}
	return s.fmtTime(*t)
}

func (s *Server) entryJSON(e TimeEntry) map[string]any {
	var stop any
	if e.Stop != nil {
		stop = s.fmtTime(*e.Stop)
	}
	tags := e.Tags
	if tags == nil {
		tags = []string{}
	}
	return map[string]any{
		"id": e.ID, "workspace_id": e.WorkspaceID, "project_id": nullID(e.ProjectID), "task_id": nullID(e.TaskID),
		"user_id": e.UserID, "billable": e.Billable, "description": e.Description,
		"start": s.fmtTime(e.Start), "stop": stop, "duration": e.Duration, "duronly": true,
		"tags": tags, "tag_ids": []int64{}, "at": s.fmtTime(e.At), "server_deleted_at": s.optTime(e.DeletedAt),
		"wid": e.WorkspaceID, "pid": nullID(e.ProjectID), "tid": nullID(e.TaskID), "uid": e.UserID,
	}
}

// writeList renders page `page` of res, a bare JSON array or, with wrap,
// the value wrap makes of it (an envelope), breaking it as asked by
// Malform. Called with the store locked.
func (s *Server) writeList(w http.ResponseWriter, res clients.Resource, page int, objs []map[string]any, wrap func([]map[string]any) any) {
	mal := s.Malformed(string(res), page)
	if len(objs) > 0 {
		switch mal {
		case fakeapi.MissingVersion:
			delete(objs[0], "at")
		case fakeapi.WrongType:
			objs[0]["at"] = 1700000000
		case fakeapi.MissingID:
			delete(objs[0], "id")
		}
	}
	if objs == nil {
		objs = []map[string]any{}
	}
	var v any = objs
	if wrap != nil {
		v = wrap(objs)
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("toggltest: render: %v", err))
	}
	s.WritePage(w, b, mal)
}
