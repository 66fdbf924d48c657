// Package toggltest is a fake Toggl Track API v9 server for tests. It follows
// what APIS.md documents (Basic <token>:api_token auth with 403 on bad
// credentials; GET /me/time_entries with `since` — deleted entries included
// with server_deleted_at — or start_date/end_date; `since` older than about
// 3 months refused; bare JSON arrays; workspace projects, clients, tasks and
// users; a leaky bucket answering 429; hourly quotas answering 402) and
// injects faults on demand (5xx, malformed pages). The source's clock is
// skewable and drives the Date header, default stamps and the limits.
//
// What it assumes where the documentation is silent: end_date is
// exclusive; start_date/end_date listings leave deleted entries out; a
// listing of /me/time_entries without parameters returns every live entry;
// projects and tasks page with page/per_page (default 151, at most 200) and
// answer `since` with deleted records included; clients and users are not
// paginated; the text of the 400, 402 and 429 bodies; a 429 carries no
// Retry-After unless Options.RetryAfter is set.
package toggltest

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
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
	// Quota is the number of requests served per QuotaWindow (aligned on the
	// source clock, default one hour) before answering 402. Zero: no quota.
	Quota       int
	QuotaWindow time.Duration
	// ForbidUsers answers 403 to the workspace users list (a non-admin
	// token).
	ForbidUsers bool
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
	// LateEvery, when above 1, delays only every LateEvery-th write (the
	// others are visible at once), like a few long transactions among
	// quick ones: a listing then shows writes stamped after one it does
	// not show yet.
	LateEvery int
}

// Malformation selects how a listing is broken by Malform.
type Malformation int

const (
	// BadJSON answers a whole body that is not JSON (a stray comma after
	// the opening bracket): a malformed page, for the provider to report.
	// A body cut short is CutShort, a transport fault that httpx retries.
	BadJSON Malformation = iota + 1
	// HTMLPage answers 200 with an HTML page.
	HTMLPage
	// MissingAt drops `at` from the first record.
	MissingAt
	// WrongType renders the first record's `at` as a number.
	WrongType
	// CutShort sends half the body (with a Content-Length to match).
	CutShort
)

// Request is one logged request.
type Request struct {
	Seq    int
	At     time.Time // our clock, on arrival
	Method string
	Path   string
	Query  url.Values
	Status int
}

// Server is a running fake. Every method is safe for concurrent use.
type Server struct {
	srv  *httptest.Server
	opts Options

	mu       sync.Mutex
	entries  map[int64]TimeEntry
	projects map[int64]Project
	clients  map[int64]Client
	tasks    map[int64]Task
	users    map[int64]User
	reqs     []Request

	level     float64 // leaky bucket
	levelAt   time.Time
	quotaWin  int64
	quotaUsed int

	failN, failStatus int
	limitN            int
	malformed         map[clients.Resource]Malformation

	pending []pendingOp // writes not yet visible (VisibilityDelay)
	writes  int         // writes made (LateEvery)
	onList  func(Request)
}

// pendingOp is a write waiting for its visibility time: val is the record
// put (TimeEntry, Project, Client, Task or User), or nil for a deletion
// made at delAt.
type pendingOp struct {
	visibleAt time.Time
	res       clients.Resource
	id        int64
	val       any
	delAt     time.Time
}

// New starts a fake on a loopback port. Close it when done.
func New(o Options) *Server {
	o.Token = cmp.Or(o.Token, DefaultToken)
	o.WorkspaceID = cmp.Or(o.WorkspaceID, DefaultWorkspaceID)
	o.SinceLimit = cmp.Or(o.SinceLimit, DefaultSinceLimit)
	o.QuotaWindow = cmp.Or(o.QuotaWindow, time.Hour)
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Zone == nil {
		o.Zone = time.UTC
	}
	s := &Server{
		opts:      o,
		entries:   map[int64]TimeEntry{},
		projects:  map[int64]Project{},
		clients:   map[int64]Client{},
		tasks:     map[int64]Task{},
		users:     map[int64]User{},
		malformed: map[clients.Resource]Malformation{},
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL is the API base, like https://api.track.toggl.com/api/v9.
func (s *Server) URL() string { return s.srv.URL + "/api/v9" }

// Token and WorkspaceID are what the fake accepts.
func (s *Server) Token() string      { return s.opts.Token }
func (s *Server) WorkspaceID() int64 { return s.opts.WorkspaceID }
func (s *Server) Close()             { s.srv.CloseClientConnections(); s.srv.Close() }
func (s *Server) Now() time.Time     { return s.opts.Clock().Add(s.opts.Skew) }
func (s *Server) stamp() time.Time   { return s.Now().UTC().Truncate(time.Second) }
func (s *Server) fmtTime(t time.Time) string {
	return t.In(s.opts.Zone).Format("2006-01-02T15:04:05-07:00")
}

// ---- store -----------------------------------------------------------------

// PutTimeEntry inserts or replaces an entry. A zero At becomes the source's
// now (second precision); a zero WorkspaceID the server's.
func (s *Server) PutTimeEntry(e TimeEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.At.IsZero() {
		e.At = s.stamp()
	}
	e.WorkspaceID = cmp.Or(e.WorkspaceID, s.opts.WorkspaceID)
	s.write(clients.TimeEntries, e.ID, e.At, e)
}

// PutProject inserts or replaces a project (a zero At is now).
func (s *Server) PutProject(p Project) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.At.IsZero() {
		p.At = s.stamp()
	}
	s.write(clients.Projects, p.ID, p.At, p)
}

// PutClient inserts or replaces a client.
func (s *Server) PutClient(c Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.At.IsZero() {
		c.At = s.stamp()
	}
	s.write(clients.Clients, c.ID, c.At, c)
}

// PutTask inserts or replaces a task.
func (s *Server) PutTask(t Task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.At.IsZero() {
		t.At = s.stamp()
	}
	s.write(clients.Tasks, t.ID, t.At, t)
}

// PutUser inserts or replaces a workspace user.
func (s *Server) PutUser(u User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u.At.IsZero() {
		u.At = s.stamp()
	}
	s.write(clients.Users, u.ID, u.At, u)
}

// Delete marks a record deleted at the source's now (server_deleted_at, and
// `at` moves too). It reports whether a live record had the id.
func (s *Server) Delete(r clients.Resource, id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.stamp()
	if s.opts.VisibilityDelay > 0 {
		s.flush()
		if !s.liveLocked(r, id) {
			return false
		}
		delay := s.opts.VisibilityDelay
		if !s.late() {
			delay = 0
		}
		s.enqueue(pendingOp{visibleAt: now.Add(delay), res: r, id: id, delAt: now})
		return true
	}
	return s.deleteLocked(r, id, now)
}

func (s *Server) deleteLocked(r clients.Resource, id int64, now time.Time) bool {
	switch r {
	case clients.TimeEntries:
		return markDeleted(s.entries, id, now, func(v *TimeEntry) (*time.Time, *time.Time) { return &v.At, v.DeletedAt }, func(v *TimeEntry, t time.Time) { v.DeletedAt = &t })
	case clients.Projects:
		return markDeleted(s.projects, id, now, func(v *Project) (*time.Time, *time.Time) { return &v.At, v.DeletedAt }, func(v *Project, t time.Time) { v.DeletedAt = &t })
	case clients.Clients:
		return markDeleted(s.clients, id, now, func(v *Client) (*time.Time, *time.Time) { return &v.At, v.DeletedAt }, func(v *Client, t time.Time) { v.DeletedAt = &t })
	case clients.Tasks:
		return markDeleted(s.tasks, id, now, func(v *Task) (*time.Time, *time.Time) { return &v.At, v.DeletedAt }, func(v *Task, t time.Time) { v.DeletedAt = &t })
	case clients.Users:
		return markDeleted(s.users, id, now, func(v *User) (*time.Time, *time.Time) { return &v.At, v.DeletedAt }, func(v *User, t time.Time) { v.DeletedAt = &t })
	}
	return false
}

func markDeleted[T any](m map[int64]T, id int64, now time.Time, get func(*T) (*time.Time, *time.Time), set func(*T, time.Time)) bool {
	v, ok := m[id]
	if !ok {
		return false
	}
	at, del := get(&v)
	if del != nil {
		return false
	}
	*at = now
	set(&v, now)
	m[id] = v
	return true
}

// TimeEntry returns an entry (deleted ones too) as last written, visible
// or not yet (VisibilityDelay).
func (s *Server) TimeEntry(id int64) (TimeEntry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flush()
	for i := len(s.pending) - 1; i >= 0; i-- {
		if op := s.pending[i]; op.res == clients.TimeEntries && op.id == id {
			if op.val != nil {
				return op.val.(TimeEntry), true
			}
			e := s.latestEntryBefore(i)
			at := op.delAt
			e.At, e.DeletedAt = at, &at
			return e, true
		}
	}
	e, ok := s.entries[id]
	return e, ok
}

// latestEntryBefore returns the entry pending[i] deletes as written before
// it.
func (s *Server) latestEntryBefore(i int) TimeEntry {
	id := s.pending[i].id
	for j := i - 1; j >= 0; j-- {
		if op := s.pending[j]; op.res == clients.TimeEntries && op.id == id && op.val != nil {
			return op.val.(TimeEntry)
		}
	}
	return s.entries[id]
}

// Pending returns how many writes are not yet visible (VisibilityDelay).
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flush()
	return len(s.pending)
}

// write stores v now, or queues it until at + VisibilityDelay.
func (s *Server) write(r clients.Resource, id int64, at time.Time, v any) {
	op := pendingOp{res: r, id: id, val: v}
	if s.opts.VisibilityDelay > 0 && s.late() {
		op.visibleAt = at.Add(s.opts.VisibilityDelay)
	}
	// Queued even when visible at once: it must not overtake an earlier
	// write of the same record.
	s.enqueue(op)
}

// late counts a write and reports whether it is one VisibilityDelay
// applies to.
func (s *Server) late() bool {
	s.writes++
	return s.opts.LateEvery <= 1 || s.writes%s.opts.LateEvery == 0
}

func (s *Server) enqueue(op pendingOp) {
	s.pending = append(s.pending, op)
	s.flush()
}

// flush applies the writes whose time has come, in the order they were
// made; a later write of a record waits for an earlier one.
func (s *Server) flush() {
	if len(s.pending) == 0 {
		return
	}
	now := s.Now()
	keep := s.pending[:0]
	type key struct {
		res clients.Resource
		id  int64
	}
	blocked := map[key]bool{}
	for _, op := range s.pending {
		k := key{op.res, op.id}
		if blocked[k] || op.visibleAt.After(now) {
			blocked[k] = true
			keep = append(keep, op)
			continue
		}
		s.apply(op)
	}
	clear(s.pending[len(keep):])
	s.pending = keep
}

func (s *Server) apply(op pendingOp) {
	switch v := op.val.(type) {
	case nil:
		s.deleteLocked(op.res, op.id, op.delAt)
	case TimeEntry:
		s.entries[v.ID] = v
	case Project:
		s.projects[v.ID] = v
	case Client:
		s.clients[v.ID] = v
	case Task:
		s.tasks[v.ID] = v
	case User:
		s.users[v.ID] = v
	}
}

// liveLocked reports whether r's id is live as last written (pending writes
// included).
func (s *Server) liveLocked(r clients.Resource, id int64) bool {
	for i := len(s.pending) - 1; i >= 0; i-- {
		if op := s.pending[i]; op.res == r && op.id == id {
			if op.val == nil {
				return false
			}
			switch v := op.val.(type) {
			case TimeEntry:
				return v.DeletedAt == nil
			case Project:
				return v.DeletedAt == nil
			case Client:
				return v.DeletedAt == nil
			case Task:
				return v.DeletedAt == nil
			case User:
				return v.DeletedAt == nil
			}
		}
	}
	switch r {
	case clients.TimeEntries:
		v, ok := s.entries[id]
		return ok && v.DeletedAt == nil
	case clients.Projects:
		v, ok := s.projects[id]
		return ok && v.DeletedAt == nil
	case clients.Clients:
		v, ok := s.clients[id]
		return ok && v.DeletedAt == nil
	case clients.Tasks:
		v, ok := s.tasks[id]
		return ok && v.DeletedAt == nil
	case clients.Users:
		v, ok := s.users[id]
		return ok && v.DeletedAt == nil
	}
	return false
}

// State returns a snapshot of the store as listings serve it now (writes
// not yet visible excluded).
func (s *Server) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flush()
	st := State{
		TimeEntries: make(map[int64]TimeEntry, len(s.entries)),
		Projects:    make(map[int64]Project, len(s.projects)),
		Clients:     make(map[int64]Client, len(s.clients)),
		Tasks:       make(map[int64]Task, len(s.tasks)),
		Users:       make(map[int64]User, len(s.users)),
	}
	for k, v := range s.entries {
		st.TimeEntries[k] = v
	}
	for k, v := range s.projects {
		st.Projects[k] = v
	}
	for k, v := range s.clients {
		st.Clients[k] = v
	}
	for k, v := range s.tasks {
		st.Tasks[k] = v
	}
	for k, v := range s.users {
		st.Users[k] = v
	}
	return st
}

// ---- faults and log --------------------------------------------------------

// FailNext makes the next n requests answer status (e.g. 500, 503).
func (s *Server) FailNext(n, status int) {
	s.mu.Lock()
	s.failN, s.failStatus = n, status
	s.mu.Unlock()
}

// RateLimitNext makes the next n requests answer 429.
func (s *Server) RateLimitNext(n int) {
	s.mu.Lock()
	s.limitN = n
	s.mu.Unlock()
}

// Malform breaks every listing of r until cleared with Malform(r, 0).
func (s *Server) Malform(r clients.Resource, m Malformation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m == 0 {
		delete(s.malformed, r)
		return
	}
	s.malformed[r] = m
}

// SetForbidUsers switches the 403 on the users list.
func (s *Server) SetForbidUsers(v bool) {
	s.mu.Lock()
	s.opts.ForbidUsers = v
	s.mu.Unlock()
}

// OnList calls fn before each authorized request is answered (nil: none),
// outside the server's lock, so fn may change the store: a record deleted
// while a client walks the pages of a listing.
func (s *Server) OnList(fn func(Request)) {
	s.mu.Lock()
	s.onList = fn
	s.mu.Unlock()
}

// Requests returns the request log.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// RequestCount returns how many requests arrived.
func (s *Server) RequestCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// ResetRequests clears the request log.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	s.reqs = nil
	s.mu.Unlock()
}

// ---- HTTP ------------------------------------------------------------------

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	seq := len(s.reqs)
	s.reqs = append(s.reqs, Request{Seq: seq + 1, At: time.Now(), Method: r.Method, Path: r.URL.Path, Query: r.URL.Query()})
	status, body := s.decideLocked()
	s.mu.Unlock()

	var code int
	defer func() {
		s.mu.Lock()
		s.reqs[seq].Status = code
		s.mu.Unlock()
	}()
	w.Header().Set("Date", s.Now().UTC().Format(http.TimeFormat))
	if status != 0 {
		code = status
		if status == http.StatusTooManyRequests && s.opts.RetryAfter != "" {
			w.Header().Set("Retry-After", s.opts.RetryAfter)
		}
		writeJSON(w, status, body)
		return
	}
	code = s.handle(w, r)
}

// decideLocked applies injected faults, the leaky bucket and the quota.
func (s *Server) decideLocked() (int, string) {
	if s.limitN > 0 {
		s.limitN--
		return http.StatusTooManyRequests, `"Too Many Requests"`
	}
	if b := s.opts.Bucket; b.Requests > 0 && b.Per > 0 {
		now := time.Now()
		leak := float64(b.Requests) * now.Sub(s.levelAt).Seconds() / b.Per.Seconds()
		s.level, s.levelAt = max(s.level-leak, 0), now
		if s.level+1 > float64(b.Requests) {
			return http.StatusTooManyRequests, `"Too Many Requests"`
		}
		s.level++
	}
	if s.opts.Quota > 0 {
		win := s.Now().UnixNano() / int64(s.opts.QuotaWindow)
		if win != s.quotaWin {
			s.quotaWin, s.quotaUsed = win, 0
		}
		if s.quotaUsed >= s.opts.Quota {
			return http.StatusPaymentRequired, `"You have hit your hourly limit for API calls. Upgrade your plan or wait for the limit to reset."`
		}
		s.quotaUsed++
	}
	if s.failN > 0 {
		s.failN--
		return s.failStatus, `"Internal Server Error"`
	}
	return 0, ""
}

func (s *Server) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte(s.opts.Token+":api_token"))
	return h == want
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) int {
	if !s.authorized(r) {
		writeJSON(w, http.StatusForbidden, `"Incorrect username and/or password"`)
		return http.StatusForbidden
	}
	s.mu.Lock()
	hook := s.onList
	s.mu.Unlock()
	if hook != nil {
		hook(Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query()})
	}
	path, ok := strings.CutPrefix(r.URL.Path, "/api/v9/")
	if !ok || r.Method != http.MethodGet {
		writeJSON(w, http.StatusNotFound, `"Not Found"`)
		return http.StatusNotFound
	}
	if path == "me/time_entries" {
		return s.listEntries(w, r.URL.Query())
	}
	parts := strings.Split(path, "/")
	if len(parts) != 3 || parts[0] != "workspaces" {
		writeJSON(w, http.StatusNotFound, `"Not Found"`)
		return http.StatusNotFound
	}
	if wid, err := strconv.ParseInt(parts[1], 10, 64); err != nil || wid != s.opts.WorkspaceID {
		writeJSON(w, http.StatusForbidden, `"Incorrect username and/or password"`)
		return http.StatusForbidden
	}
	res, err := clients.ParseResource(parts[2])
	if err != nil || res == clients.TimeEntries {
		writeJSON(w, http.StatusNotFound, `"Not Found"`)
		return http.StatusNotFound
	}
	return s.listWorkspace(w, res, r.URL.Query())
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

func (s *Server) listEntries(w http.ResponseWriter, q url.Values) int {
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
			from, err1 = parseDay(q.Get("start_date"))
			to, err2 = parseDay(q.Get("end_date"))
			if err1 != nil || err2 != nil {
				bad = `"start_date and end_date must be YYYY-MM-DD or RFC 3339"`
			} else if to.Before(from) {
				bad = `"end_date must not be earlier than start_date"`
			}
		}
	}
	if bad != "" {
		writeJSON(w, http.StatusBadRequest, string(bad))
		return http.StatusBadRequest
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flush()
	var out []TimeEntry
	for _, e := range s.entries {
		switch {
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
	// Newest start first, as Toggl lists them.
	slices.SortFunc(out, func(a, b TimeEntry) int {
		if c := b.Start.Compare(a.Start); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	if c := s.opts.EntryCap; c > 0 && len(out) > c {
		out = out[:c]
	}
	objs := make([]map[string]any, len(out))
	for i, e := range out {
		objs[i] = s.entryJSON(e)
	}
	return s.writeList(w, clients.TimeEntries, objs)
}

func parseDay(v string) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	return time.Parse(time.RFC3339, v)
}

func (s *Server) listWorkspace(w http.ResponseWriter, res clients.Resource, q url.Values) int {
	if res == clients.Users && s.opts.ForbidUsers {
		writeJSON(w, http.StatusForbidden, `"Forbidden: only workspace admins can list users"`)
		return http.StatusForbidden
	}
	since, bad := s.parseSince(q)
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
	if bad != "" {
		writeJSON(w, http.StatusBadRequest, string(bad))
		return http.StatusBadRequest
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flush()
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
	switch res {
	case clients.Projects:
		for _, p := range s.projects {
			if keep(p.At, p.DeletedAt) {
				items = append(items, item{p.ID, map[string]any{"id": p.ID, "workspace_id": s.opts.WorkspaceID,
					"client_id": nullID(p.ClientID), "name": p.Name, "active": p.Active, "billable": p.Billable,
					"is_private": false, "color": "#06aaf5", "at": s.fmtTime(p.At), "server_deleted_at": s.optTime(p.DeletedAt)}})
			}
		}
	case clients.Clients:
		for _, c := range s.clients {
			if keep(c.At, c.DeletedAt) {
				items = append(items, item{c.ID, map[string]any{"id": c.ID, "wid": s.opts.WorkspaceID, "name": c.Name,
					"archived": c.Archived, "at": s.fmtTime(c.At), "server_deleted_at": s.optTime(c.DeletedAt)}})
			}
		}
	case clients.Tasks:
		for _, t := range s.tasks {
			if keep(t.At, t.DeletedAt) {
				items = append(items, item{t.ID, map[string]any{"id": t.ID, "workspace_id": s.opts.WorkspaceID,
					"project_id": t.ProjectID, "name": t.Name, "active": t.Active, "at": s.fmtTime(t.At),
					"server_deleted_at": s.optTime(t.DeletedAt)}})
			}
		}
	case clients.Users:
		for _, u := range s.users {
			if keep(u.At, u.DeletedAt) {
				items = append(items, item{u.ID, map[string]any{"id": u.ID, "email": u.Email, "fullname": u.Fullname,
					"inactive": u.Inactive, "at": s.fmtTime(u.At), "server_deleted_at": s.optTime(u.DeletedAt)}})
			}
		}
	}
	slices.SortFunc(items, func(a, b item) int { return cmp.Compare(a.id, b.id) })
	if perPage > 0 {
		lo := min((page-1)*perPage, len(items))
		items = items[lo:min(lo+perPage, len(items))]
	}
	objs := make([]map[string]any, len(items))
	for i, it := range items {
		objs[i] = it.obj
	}
	return s.writeList(w, res, objs)
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

// writeList renders a bare JSON array, breaking it as asked by Malform.
// Called with s.mu held.
func (s *Server) writeList(w http.ResponseWriter, res clients.Resource, objs []map[string]any) int {
	mal := s.malformed[res]
	if mal == HTMLPage {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("<!DOCTYPE html>\n<html><head><title>Toggl Track is down for maintenance</title></head><body><h1>Back soon.</h1></body></html>\n"))
		return http.StatusOK
	}
	if len(objs) > 0 {
		switch mal {
		case MissingAt:
			delete(objs[0], "at")
		case WrongType:
			objs[0]["at"] = 1700000000
		}
	}
	if objs == nil {
		objs = []map[string]any{}
	}
	b, err := json.Marshal(objs)
	if err != nil {
		panic(fmt.Sprintf("toggltest: render: %v", err))
	}
	switch mal {
	case BadJSON:
		b = slices.Insert(b, 1, ',')
	case CutShort:
		b = b[:len(b)/2]
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return http.StatusOK
}
