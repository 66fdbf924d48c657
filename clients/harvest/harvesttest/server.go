// Package harvesttest is a fake Harvest API v2 server for tests and for the
// simulated tracker. It follows the documented API (envelope, links.next,
// page-number and cursor pagination, updated_since and from/to filters,
// ordering, per_page bounds, auth headers, User-Agent, the 100-per-15-s
// rate limit with Retry-After) and injects faults on demand (5xx, slow or
// dropped responses, malformed pages). Records are stored compactly and
// rendered per request.
package harvesttest

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"fmt"
	"math"
	"math/rand/v2"
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
	DefaultToken     = "harvesttest-token"
	DefaultAccountID = "123456"
	MaxPerPage       = 2000
)

// Options configures a Server.
type Options struct {
	Token, AccountID string
	// RateLimit is enforced as a sliding window over served requests (429s
	// do not count). Zero means Harvest's 100 per 15 s; NoRateLimit turns it
	// off.
	RateLimit   httpx.RateLimit
	NoRateLimit bool
	// Cursor switches list pagination to cursors: links.next carries
	// cursor=…, and page / next_page / previous_page are null.
	Cursor bool
	// UpdatedSinceExclusive makes updated_since filter with > instead of >=.
	UpdatedSinceExclusive bool
	// Clock is the source's clock before Skew (default time.Now).
	Clock func() time.Time
	// Skew offsets the source's clock from ours (Date header, default
	// stamps, visibility).
	Skew time.Duration
	// VisibilityDelay makes a write visible that long after its updated_at
	// (a deletion: after it happens), as with replica lag.
	VisibilityDelay time.Duration
	// FaultRate is the probability that a request answers 500;
	// RateLimitRate the probability of a spurious 429 (Retry-After: 1).
	FaultRate, RateLimitRate float64
	// Seed seeds the random faults.
	Seed uint64
}

// Malformation selects how a page is broken by Malform.
type Malformation int

const (
	// BadJSON answers a whole body that is not JSON (a stray comma after
	// the opening bracket): a malformed page, for the provider to report.
	// A body cut short is CutShort, a transport fault that httpx retries.
	BadJSON Malformation = iota + 1
	// HTMLPage answers 200 with an HTML error page.
	HTMLPage
	// MissingUpdatedAt drops updated_at from the page's first record.
	MissingUpdatedAt
	// WrongType renders the first record's updated_at as a number.
	WrongType
	// CutShort sends half the body (with a Content-Length to match).
	CutShort
)

// Request is one logged request.
type Request struct {
	Seq       int
	At        time.Time // our clock, on arrival
	Method    string
	Path      string
	Query     url.Values
	UserAgent string
	Status    int // 0 when the connection was dropped
}

type pendingOp struct {
	visibleAt time.Time
	res       clients.Resource
	id        int64
	del       bool
	val       any
}

type listKey struct {
	res   clients.Resource
	query string
}

type listCache struct {
	gen uint64
	pos []int32
}

// Server is a running fake. Every method is safe for concurrent use.
type Server struct {
	srv  *httptest.Server
	opts Options

	mu      sync.Mutex
	tables  *tables
	gen     uint64
	pending []pendingOp
	cache   map[listKey]listCache
	served  []time.Time // sliding window of served requests
	reqs    []Request
	rng     *rand.Rand

	failN      int
	failStatus int
	dropN      int
	slowN      int
	slowD      time.Duration
	limitN     int
	limitAfter string
	malformed  map[malKey]Malformation
	onList     func(Request)
}

type malKey struct {
	res  clients.Resource
	page int
}

// New starts a fake on a loopback port. Close it when done.
func New(o Options) *Server {
	o.Token = cmp.Or(o.Token, DefaultToken)
	o.AccountID = cmp.Or(o.AccountID, DefaultAccountID)
	if o.RateLimit == (httpx.RateLimit{}) {
		o.RateLimit = httpx.RateLimit{Requests: 100, Per: 15 * time.Second}
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	s := &Server{
		opts:      o,
		tables:    newTables(),
		cache:     map[listKey]listCache{},
		rng:       rand.New(rand.NewPCG(o.Seed, 0x5eed)),
		malformed: map[malKey]Malformation{},
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL is the API base, like https://api.harvestapp.com/v2.
func (s *Server) URL() string { return s.srv.URL + "/v2" }

// Token and AccountID are the credentials the fake accepts.
func (s *Server) Token() string     { return s.opts.Token }
func (s *Server) AccountID() string { return s.opts.AccountID }

// Close shuts the server down.
func (s *Server) Close() { s.srv.CloseClientConnections(); s.srv.Close() }

// Now is the source's clock.
func (s *Server) Now() time.Time { return s.opts.Clock().Add(s.opts.Skew) }

// stamp is the source clock truncated to Harvest's one-second precision.
func (s *Server) stamp() time.Time { return s.Now().UTC().Truncate(time.Second) }

// ---- store -----------------------------------------------------------------

// PutTimeEntry inserts or replaces an entry. A zero UpdatedAt becomes the
// source's now; a zero CreatedAt keeps the stored one, or UpdatedAt.
func (s *Server) PutTimeEntry(e TimeEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.UpdatedAt.IsZero() {
		e.UpdatedAt = s.stamp()
	}
	if e.CreatedAt.IsZero() {
		if old, ok := s.getLocked(clients.TimeEntries, e.ID); ok {
			e.CreatedAt = old.(TimeEntry).CreatedAt
		} else {
			e.CreatedAt = e.UpdatedAt
		}
	}
	s.write(clients.TimeEntries, e.ID, e.UpdatedAt, e)
}

// PutProject inserts or replaces a project (stamps as for PutTimeEntry).
func (s *Server) PutProject(p Project) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p.CreatedAt, p.UpdatedAt = s.stamps(clients.Projects, p.ID, p.CreatedAt, p.UpdatedAt, func(v any) time.Time { return v.(Project).CreatedAt })
	s.write(clients.Projects, p.ID, p.UpdatedAt, p)
}

// PutClient inserts or replaces a client.
func (s *Server) PutClient(c Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.CreatedAt, c.UpdatedAt = s.stamps(clients.Clients, c.ID, c.CreatedAt, c.UpdatedAt, func(v any) time.Time { return v.(Client).CreatedAt })
	s.write(clients.Clients, c.ID, c.UpdatedAt, c)
}

// PutUser inserts or replaces a user.
func (s *Server) PutUser(u User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u.CreatedAt, u.UpdatedAt = s.stamps(clients.Users, u.ID, u.CreatedAt, u.UpdatedAt, func(v any) time.Time { return v.(User).CreatedAt })
	s.write(clients.Users, u.ID, u.UpdatedAt, u)
}

// PutTask inserts or replaces a task.
func (s *Server) PutTask(t Task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t.CreatedAt, t.UpdatedAt = s.stamps(clients.Tasks, t.ID, t.CreatedAt, t.UpdatedAt, func(v any) time.Time { return v.(Task).CreatedAt })
	s.write(clients.Tasks, t.ID, t.UpdatedAt, t)
}

func (s *Server) stamps(r clients.Resource, id int64, created, updated time.Time, createdOf func(any) time.Time) (time.Time, time.Time) {
	if updated.IsZero() {
		updated = s.stamp()
	}
	if created.IsZero() {
		if old, ok := s.getLocked(r, id); ok {
			created = createdOf(old)
		} else {
			created = updated
		}
	}
	return created, updated
}

// LoadTimeEntries bulk-inserts entries (no visibility delay): the fast path
// for generating large histories.
func (s *Server) LoadTimeEntries(es []TimeEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tables.entries.load(es)
	s.gen++
}

// Delete removes a record; it vanishes from every listing (Harvest reports
// no deletions). It reports whether the id existed.
func (s *Server) Delete(r clients.Resource, id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.getLocked(r, id); !ok {
		return false
	}
	s.enqueue(pendingOp{visibleAt: s.Now().Add(s.opts.VisibilityDelay), res: r, id: id, del: true})
	return true
}

// TimeEntry returns an entry's latest state (including writes not yet
// visible).
func (s *Server) TimeEntry(id int64) (TimeEntry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.getLocked(clients.TimeEntries, id)
	if !ok {
		return TimeEntry{}, false
	}
	return v.(TimeEntry), true
}

// Get returns any resource's latest state (TimeEntry, Project, Client, User
// or Task).
func (s *Server) Get(r clients.Resource, id int64) (any, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.getLocked(r, id)
}

// IDs returns r's visible ids in listing order.
func (s *Server) IDs(r clients.Resource) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flush()
	var out []int64
	s.each(r, func(id int64) { out = append(out, id) })
	return out
}

func (s *Server) each(r clients.Resource, fn func(id int64)) {
	ts := s.tables
	switch r {
	case clients.TimeEntries:
		for _, p := range ts.entries.order {
			fn(ts.entries.items[p].ID)
		}
	case clients.Projects:
		for _, p := range ts.projects.order {
			fn(ts.projects.items[p].ID)
		}
	case clients.Clients:
		for _, p := range ts.clients.order {
			fn(ts.clients.items[p].ID)
		}
	case clients.Users:
		for _, p := range ts.users.order {
			fn(ts.users.items[p].ID)
		}
	case clients.Tasks:
		for _, p := range ts.tasks.order {
			fn(ts.tasks.items[p].ID)
		}
	}
}

// Count returns the number of visible records of r.
func (s *Server) Count(r clients.Resource) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flush()
	return s.count(r)
}

func (s *Server) count(r clients.Resource) int {
	ts := s.tables
	switch r {
	case clients.TimeEntries:
		return ts.entries.len()
	case clients.Projects:
		return ts.projects.len()
	case clients.Clients:
		return ts.clients.len()
	case clients.Users:
		return ts.users.len()
	case clients.Tasks:
		return ts.tasks.len()
	}
	return 0
}

// State returns what the fake serves now (writes not yet visible excluded).
func (s *Server) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flush()
	return s.tables.state()
}

// Pending returns how many writes are not yet visible.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flush()
	return len(s.pending)
}

func (s *Server) getLocked(r clients.Resource, id int64) (any, bool) {
	for i := len(s.pending) - 1; i >= 0; i-- {
		if op := s.pending[i]; op.res == r && op.id == id {
			return op.val, !op.del
		}
	}
	ts := s.tables
	switch r {
	case clients.TimeEntries:
		return boxed(ts.entries.get(id))
	case clients.Projects:
		return boxed(ts.projects.get(id))
	case clients.Clients:
		return boxed(ts.clients.get(id))
	case clients.Users:
		return boxed(ts.users.get(id))
	case clients.Tasks:
		return boxed(ts.tasks.get(id))
	}
	return nil, false
}

func boxed[T any](v T, ok bool) (any, bool) {
	if !ok {
		return nil, false
	}
	return v, true
}

func (s *Server) write(r clients.Resource, id int64, updated time.Time, v any) {
	s.enqueue(pendingOp{visibleAt: updated.Add(s.opts.VisibilityDelay), res: r, id: id, val: v})
}

func (s *Server) enqueue(op pendingOp) {
	if s.opts.VisibilityDelay <= 0 {
		s.apply(op)
		return
	}
	s.pending = append(s.pending, op)
	s.flush()
}

// flush applies the writes whose time has come, in the order they were made.
func (s *Server) flush() {
	if len(s.pending) == 0 {
		return
	}
	now := s.Now()
	keep := s.pending[:0]
	blocked := map[[2]any]bool{} // a later write of an id waits for an earlier one
	for _, op := range s.pending {
		k := [2]any{op.res, op.id}
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
	s.gen++
	ts := s.tables
	if op.del {
		var ok bool
		switch op.res {
		case clients.TimeEntries:
			ok = ts.entries.del(op.id)
		case clients.Projects:
			ok = ts.projects.del(op.id)
		case clients.Clients:
			ok = ts.clients.del(op.id)
		case clients.Users:
			ok = ts.users.del(op.id)
		case clients.Tasks:
			ok = ts.tasks.del(op.id)
		}
		if ok {
			if ts.deleted[op.res] == nil {
				ts.deleted[op.res] = map[int64]time.Time{}
			}
			ts.deleted[op.res][op.id] = op.visibleAt.Add(-s.opts.VisibilityDelay).UTC()
		}
		return
	}
	delete(ts.deleted[op.res], op.id)
	switch v := op.val.(type) {
	case TimeEntry:
		ts.entries.put(v)
	case Project:
		ts.projects.put(v)
	case Client:
		ts.clients.put(v)
	case User:
		ts.users.put(v)
	case Task:
		ts.tasks.put(v)
	}
}

// ---- faults and log ----------------------------------------------------------

// FailNext makes the next n requests answer status (e.g. 500, 502, 503).
func (s *Server) FailNext(n, status int) {
	s.mu.Lock()
	s.failN, s.failStatus = n, status
	s.mu.Unlock()
}

// DropNext makes the next n requests close the connection without answer.
func (s *Server) DropNext(n int) {
	s.mu.Lock()
	s.dropN = n
	s.mu.Unlock()
}

// SlowNext delays the next n responses by d (or until the client gives up).
func (s *Server) SlowNext(n int, d time.Duration) {
	s.mu.Lock()
	s.slowN, s.slowD = n, d
	s.mu.Unlock()
}

// RateLimitNext makes the next n requests answer 429 with the given
// Retry-After header value ("" sends none).
func (s *Server) RateLimitNext(n int, retryAfter string) {
	s.mu.Lock()
	s.limitN, s.limitAfter = n, retryAfter
	s.mu.Unlock()
}

// Malform breaks page `page` (from 1) of every listing of r until cleared
// with Malform(r, page, 0).
func (s *Server) Malform(r clients.Resource, page int, m Malformation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m == 0 {
		delete(s.malformed, malKey{r, page})
		return
	}
	s.malformed[malKey{r, page}] = m
}

// OnList calls fn before each list request is answered (nil: none), outside
// the server's lock, so fn may change the store: a record deleted or moved
// while a client walks the pages of a listing.
func (s *Server) OnList(fn func(Request)) {
	s.mu.Lock()
	s.onList = fn
	s.mu.Unlock()
}

// SetFaultRates changes the random 5xx and 429 probabilities.
func (s *Server) SetFaultRates(fault, rateLimit float64) {
	s.mu.Lock()
	s.opts.FaultRate, s.opts.RateLimitRate = fault, rateLimit
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

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

func (s *Server) serve(hw http.ResponseWriter, r *http.Request) {
	w := &statusWriter{ResponseWriter: hw}
	s.mu.Lock()
	seq := len(s.reqs)
	s.reqs = append(s.reqs, Request{
		Seq: seq + 1, At: time.Now(), Method: r.Method, Path: r.URL.Path,
		Query: r.URL.Query(), UserAgent: r.UserAgent(),
	})
	action, wait, retryAfter := s.decideLocked()
	s.mu.Unlock()

	defer func() {
		s.mu.Lock()
		s.reqs[seq].Status = w.status
		s.mu.Unlock()
	}()
	w.Header().Set("Date", s.Now().UTC().Format(http.TimeFormat))

	if wait > 0 {
		select {
		case <-time.After(wait):
		case <-r.Context().Done():
			return
		}
	}
	switch action {
	case "drop":
		if conn, _, err := hw.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
		return
	case "429":
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		writeJSON(w, http.StatusTooManyRequests, `{"message":"Too Many Requests"}`)
		return
	case "":
	default:
		code, _ := strconv.Atoi(action)
		writeJSON(w, code, `{"status":`+action+`,"error":"Internal Server Error"}`)
		return
	}

	if r.UserAgent() == "" {
		writeJSON(w, http.StatusBadRequest, `{"error":"bad_request","error_description":"Missing User-Agent header: name your application and give a contact"}`)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+s.opts.Token || r.Header.Get("Harvest-Account-Id") != s.opts.AccountID {
		writeJSON(w, http.StatusUnauthorized, `{"error":"invalid_token","error_description":"The access token provided is expired, revoked, malformed or invalid for other reasons."}`)
		return
	}
	res, ok := strings.CutPrefix(r.URL.Path, "/v2/")
	if !ok || r.Method != http.MethodGet {
		writeJSON(w, http.StatusNotFound, `{"status":404,"error":"Not Found"}`)
		return
	}
	resource, err := clients.ParseResource(res)
	if err != nil {
		writeJSON(w, http.StatusNotFound, `{"status":404,"error":"Not Found"}`)
		return
	}
	s.mu.Lock()
	hook, req := s.onList, s.reqs[seq]
	s.mu.Unlock()
	if hook != nil {
		hook(req)
	}
	s.list(w, r, resource)
}

// decideLocked picks the fault (if any) for this request, and enforces the
// rate limit.
func (s *Server) decideLocked() (action string, wait time.Duration, retryAfter string) {
	now := time.Now()
	if !s.opts.NoRateLimit {
		rl := s.opts.RateLimit
		cut := 0
		for cut < len(s.served) && now.Sub(s.served[cut]) >= rl.Per {
			cut++
		}
		s.served = s.served[cut:]
		if len(s.served) >= rl.Requests {
			secs := math.Ceil(s.served[0].Add(rl.Per).Sub(now).Seconds())
			return "429", 0, strconv.Itoa(max(int(secs), 1))
		}
	}
	if s.limitN > 0 {
		s.limitN--
		return "429", 0, s.limitAfter
	}
	if s.opts.RateLimitRate > 0 && s.rng.Float64() < s.opts.RateLimitRate {
		return "429", 0, "1"
	}
	s.served = append(s.served, now)
	if s.slowN > 0 {
		s.slowN--
		wait = s.slowD
	}
	switch {
	case s.dropN > 0:
		s.dropN--
		return "drop", wait, ""
	case s.failN > 0:
		s.failN--
		return strconv.Itoa(s.failStatus), wait, ""
	case s.opts.FaultRate > 0 && s.rng.Float64() < s.opts.FaultRate:
		return "500", wait, ""
	}
	return "", wait, ""
}

type filter struct {
	since     time.Time
	exclusive bool
	from, to  int64 // date keys, 0 = open
	running   int   // 0 any, 1 true, 2 false
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, res clients.Resource) {
	q := r.URL.Query()
	perPage := MaxPerPage
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPerPage {
			writeJSON(w, http.StatusUnprocessableEntity, `{"message":"per_page must be between 1 and 2000"}`)
			return
		}
		perPage = n
	}
	f := filter{exclusive: s.opts.UpdatedSinceExclusive}
	if v := q.Get("updated_since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			writeJSON(w, http.StatusUnprocessableEntity, `{"message":"updated_since must be an ISO 8601 date and time"}`)
			return
		}
		f.since = t
	}
	if res == clients.TimeEntries {
		for _, p := range []struct {
			name string
			dst  *int64
		}{{"from", &f.from}, {"to", &f.to}} {
			if v := q.Get(p.name); v != "" {
				d, err := clients.ParseDate(v)
				if err != nil {
					writeJSON(w, http.StatusUnprocessableEntity, `{"message":"`+p.name+` must be a date (YYYY-MM-DD)"}`)
					return
				}
				*p.dst = dateKey(d)
			}
		}
		switch q.Get("is_running") {
		case "true":
			f.running = 1
		case "false":
			f.running = 2
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.flush()
	pos := s.filtered(res, f)
	total := len(pos)
	totalPages := max((total+perPage-1)/perPage, 1)

	// Where this page starts.
	start, page := 0, 1
	if s.opts.Cursor {
		if c := q.Get("cursor"); c != "" {
			k, ok := decodeCursor(c)
			if !ok {
				writeJSON(w, http.StatusUnprocessableEntity, `{"message":"invalid cursor"}`)
				return
			}
			start, _ = slices.BinarySearchFunc(pos, k, func(p int32, k [2]int64) int { return s.cmpKey(res, p, k) })
			// The cursor names the last record served: start after it.
			if start < len(pos) && s.cmpKey(res, pos[start], k) == 0 {
				start++
			}
		}
		page = start/perPage + 1
	} else if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeJSON(w, http.StatusUnprocessableEntity, `{"message":"page must be a positive integer"}`)
			return
		}
		page = n
		start = min((page-1)*perPage, total)
		if (page-1)*perPage > total {
			start = total
		}
	}
	end := min(start+perPage, total)
	mal := s.malformed[malKey{res, page}]

	if mal == HTMLPage {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("<!DOCTYPE html>\n<html><head><title>Harvest is down for maintenance</title></head><body><h1>We'll be right back.</h1></body></html>\n"))
		return
	}

	b := make([]byte, 0, 64+(end-start)*900)
	b = append(b, '{', '"')
	b = append(b, res...)
	b = append(b, '"', ':', '[')
	for i := start; i < end; i++ {
		if i > start {
			b = append(b, ',')
		}
		var o renderOpts
		if i == start {
			o = renderOpts{noUpdatedAt: mal == MissingUpdatedAt, wrongTypeStamp: mal == WrongType}
		}
		b = s.render(b, res, pos[i], o)
	}
	b = append(b, ']')

	link := func(set func(url.Values)) []byte {
		lq := url.Values{}
		for k, v := range q {
			lq[k] = v
		}
		lq.Del("page")
		lq.Del("cursor")
		lq.Set("per_page", strconv.Itoa(perPage))
		set(lq)
		u := url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path, RawQuery: lq.Encode()}
		return appendString(nil, u.String())
	}
	null := []byte("null")
	nextLink, prevLink, firstLink, lastLink := null, null, null, null
	if s.opts.Cursor {
		b = appendInt(b, "per_page", int64(perPage))
		b = appendInt(b, "total_pages", int64(totalPages))
		b = appendInt(b, "total_entries", int64(total))
		b = append(b, `,"next_page":null,"previous_page":null,"page":null`...)
		firstLink = link(func(url.Values) {})
		if end < total {
			k := s.key(res, pos[end-1])
			nextLink = link(func(v url.Values) { v.Set("cursor", encodeCursor(k)) })
		}
	} else {
		b = appendInt(b, "per_page", int64(perPage))
		b = appendInt(b, "total_pages", int64(totalPages))
		b = appendInt(b, "total_entries", int64(total))
		b = appendKey(b, "next_page")
		if page < totalPages {
			b = strconv.AppendInt(b, int64(page+1), 10)
			nextLink = link(func(v url.Values) { v.Set("page", strconv.Itoa(page+1)) })
		} else {
			b = append(b, null...)
		}
		b = appendKey(b, "previous_page")
		if page > 1 {
			b = strconv.AppendInt(b, int64(page-1), 10)
			prevLink = link(func(v url.Values) { v.Set("page", strconv.Itoa(page-1)) })
		} else {
			b = append(b, null...)
		}
		b = appendInt(b, "page", int64(page))
		firstLink = link(func(v url.Values) { v.Set("page", "1") })
		lastLink = link(func(v url.Values) { v.Set("page", strconv.Itoa(totalPages)) })
	}
	b = append(b, `,"links":{"first":`...)
	b = append(b, firstLink...)
	b = append(b, `,"next":`...)
	b = append(b, nextLink...)
	b = append(b, `,"previous":`...)
	b = append(b, prevLink...)
	b = append(b, `,"last":`...)
	b = append(b, lastLink...)
	b = append(b, '}', '}')
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
}

func encodeCursor(k [2]int64) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d.%d", k[0], k[1]))
}

func decodeCursor(c string) ([2]int64, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return [2]int64{}, false
	}
	a, b, ok := bytes.Cut(raw, []byte("."))
	x, err1 := strconv.ParseInt(string(a), 10, 64)
	y, err2 := strconv.ParseInt(string(b), 10, 64)
	return [2]int64{x, y}, ok && err1 == nil && err2 == nil
}

func (s *Server) key(res clients.Resource, p int32) [2]int64 {
	ts := s.tables
	switch res {
	case clients.TimeEntries:
		return ts.entries.key(&ts.entries.items[p])
	case clients.Projects:
		return ts.projects.key(&ts.projects.items[p])
	case clients.Clients:
		return ts.clients.key(&ts.clients.items[p])
	case clients.Users:
		return ts.users.key(&ts.users.items[p])
	default:
		return ts.tasks.key(&ts.tasks.items[p])
	}
}

func (s *Server) cmpKey(res clients.Resource, p int32, k [2]int64) int {
	return s.tables.entries.less(s.key(res, p), k)
}

func (s *Server) render(b []byte, res clients.Resource, p int32, o renderOpts) []byte {
	ts := s.tables
	switch res {
	case clients.TimeEntries:
		return s.appendTimeEntry(b, &ts.entries.items[p], o)
	case clients.Projects:
		return s.appendProject(b, &ts.projects.items[p], o)
	case clients.Clients:
		return s.appendClient(b, &ts.clients.items[p], o)
	case clients.Users:
		return s.appendUser(b, &ts.users.items[p], o)
	default:
		return s.appendTask(b, &ts.tasks.items[p], o)
	}
}

// filtered returns the positions matching f in listing order, cached per
// (resource, filter) until the store changes.
func (s *Server) filtered(res clients.Resource, f filter) []int32 {
	k := listKey{res, fmt.Sprint(f)}
	if c, ok := s.cache[k]; ok && c.gen == s.gen {
		return c.pos
	}
	match := func(updated time.Time) bool {
		if f.since.IsZero() {
			return true
		}
		if f.exclusive {
			return updated.After(f.since)
		}
		return !updated.Before(f.since)
	}
	var out []int32
	ts := s.tables
	switch res {
	case clients.TimeEntries:
		out = make([]int32, 0, len(ts.entries.order))
		for _, p := range ts.entries.order {
			e := &ts.entries.items[p]
			dk := dateKey(e.SpentDate)
			if (f.from != 0 && dk < f.from) || (f.to != 0 && dk > f.to) ||
				(f.running == 1 && !e.IsRunning) || (f.running == 2 && e.IsRunning) || !match(e.UpdatedAt) {
				continue
			}
			out = append(out, p)
		}
	case clients.Projects:
		out = filterTable(&ts.projects, match)
	case clients.Clients:
		out = filterTable(&ts.clients, match)
	case clients.Users:
		out = filterTable(&ts.users, match)
	case clients.Tasks:
		out = filterTable(&ts.tasks, match)
	}
	if len(s.cache) > 32 {
		clear(s.cache)
	}
	s.cache[k] = listCache{gen: s.gen, pos: out}
	return out
}

func filterTable[T any](t *table[T], match func(time.Time) bool) []int32 {
	var out []int32
	for _, p := range t.order {
		if match(t.updated(&t.items[p])) {
			out = append(out, p)
		}
	}
	return out
}

// TimeEntriesWhere returns the visible entries for which match is true (in
// listing order). match must not call the Server.
func (s *Server) TimeEntriesWhere(match func(*TimeEntry) bool) []TimeEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flush()
	var out []TimeEntry
	t := &s.tables.entries
	for _, p := range t.order {
		if match(&t.items[p]) {
			out = append(out, t.items[p])
		}
	}
	return out
}
