// Package harvestfake is a fake Harvest API v2 server, for tests and for the
// simulated tracker that tidemark demo serves (so it is not a test
// package). It follows the documented API (envelope, links.next,
// page-number and cursor pagination, updated_since and from/to filters,
// ordering, per_page bounds, auth headers, User-Agent, the 100-per-15-s
// rate limit with Retry-After) and injects faults on demand through the
// fake kit (internal/fakeapi). Records are stored compactly and rendered
// per request.
package harvestfake

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/harvest"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
	"github.com/tidemarkhq/tidemark/schema"
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
	// LateEvery, above 1, delays only every LateEvery-th write (the others
	// are visible at once), as a few long transactions among quick ones.
	LateEvery int
	// FaultRate is the probability that a request answers 500;
	// RateLimitRate the probability of a spurious 429 (Retry-After: 1).
	FaultRate, RateLimitRate float64
	// Seed seeds the random faults.
	Seed uint64
	// PerPageCap, above 0, caps the records a page serves whatever
	// per_page asks, as Harvest served 100 a page in 2019; per_page in the
	// envelope and the links says what was served.
	PerPageCap int
	// Forbidden resources answer 403 (as do the lists under their
	// records), as Harvest does when the token's user lacks the right:
	// invoices, estimates and rates need an administrator or manager.
	Forbidden []clients.Resource
}

// write is a put (val) or a deletion (val nil) of one record, made at
// deletedAt, waiting in Late until it is visible.
type write struct {
	val       any
	deletedAt time.Time
}

type listKey struct {
	res   clients.Resource
	query string
}

type listCache struct {
	gen uint64
	pos []int32
}

// Server is a running fake: the kit's faults, request log, rate limit and
// clock (fakeapi.Kit; Malform endpoints are the resource names, e.g.
// "time_entries", with Harvest's page numbers) around Harvest's routes.
// Every method is safe for concurrent use.
type Server struct {
	*fakeapi.Kit
	opts Options

	late    fakeapi.Late[fakeapi.Key[int64], write] // the store's lock; writes not yet visible
	tables  *tables
	deleted map[clients.Resource]map[int64]time.Time // when, on the source clock
	gen     uint64
	cache   map[listKey]listCache
}

var dialect = fakeapi.Dialect{
	Base: "/v2",
	Fault: func(status int) string {
		if status == http.StatusTooManyRequests {
			return `{"message":"Too Many Requests"}`
		}
		return `{"status":` + strconv.Itoa(status) + `,"error":"Internal Server Error"}`
	},
	HTMLPage:   "<!DOCTYPE html>\n<html><head><title>Harvest is down for maintenance</title></head><body><h1>We'll be right back.</h1></body></html>\n",
	PageParams: []string{"page", "cursor"},
}

// New starts a fake on a loopback port. Close it when done.
func New(o Options) *Server {
	o.Token = cmp.Or(o.Token, DefaultToken)
	o.AccountID = cmp.Or(o.AccountID, DefaultAccountID)
	if o.RateLimit == (httpx.RateLimit{}) {
		o.RateLimit = httpx.RateLimit{Requests: 100, Per: 15 * time.Second}
	}
	if o.NoRateLimit {
		o.RateLimit = httpx.RateLimit{}
	}
	s := &Server{opts: o, tables: newTables(), deleted: map[clients.Resource]map[int64]time.Time{}, cache: map[listKey]listCache{}}
	s.late.Delay, s.late.Every, s.late.Apply = o.VisibilityDelay, o.LateEvery, s.apply
	s.Kit = fakeapi.New(dialect, fakeapi.Config{
		Clock: o.Clock, Skew: o.Skew, Window: o.RateLimit, WindowRetryAfter: true,
		FaultRate: o.FaultRate, RateLimitRate: o.RateLimitRate, Seed: o.Seed,
	}, s.route)
	s.late.Now = s.Now
	return s
}

// Token and AccountID are the credentials the fake accepts.
func (s *Server) Token() string     { return s.opts.Token }
func (s *Server) AccountID() string { return s.opts.AccountID }

// stamp is the source clock truncated to Harvest's one-second precision.
func (s *Server) stamp() time.Time { return s.Now().UTC().Truncate(time.Second) }

// ---- store -----------------------------------------------------------------

// PutTimeEntry inserts or replaces an entry. A zero UpdatedAt becomes the
// source's now; a zero CreatedAt keeps the stored one, or UpdatedAt.
func (s *Server) PutTimeEntry(e TimeEntry) { s.put(clients.TimeEntries, e) }

// PutProject inserts or replaces a project (stamps as for PutTimeEntry).
func (s *Server) PutProject(p Project) { s.put(clients.Projects, p) }

// PutClient inserts or replaces a client.
func (s *Server) PutClient(c Client) { s.put(clients.Clients, c) }

// PutUser inserts or replaces a user.
func (s *Server) PutUser(u User) { s.put(clients.Users, u) }

// PutTask inserts or replaces a task.
func (s *Server) PutTask(t Task) { s.put(clients.Tasks, t) }

func (s *Server) put(r clients.Resource, v any) {
	s.late.Lock()
	defer s.late.Unlock()
	t := s.tables.by[r]
	id, created, updated := t.stamps(v)
	if updated.IsZero() {
		updated = s.stamp()
	}
	if created.IsZero() {
		created = updated
		if old, ok := s.getLocked(r, id); ok {
			_, created, _ = t.stamps(old)
		}
	}
	s.enqueue(r, id, updated, write{val: t.withStamps(v, created, updated)})
	if d, ok := v.(Doc); ok {
		s.touchParent(r, d.Parent, updated)
	}
}

// touchParent moves the updated_at of the record a nested record of r is
// listed under, as the nested record's change shows in it.
func (s *Server) touchParent(r clients.Resource, parent int64, at time.Time) {
	def, ok := schema.Lookup(r)
	if !ok || def.Parent == "" {
		return
	}
	pv, ok := s.getLocked(def.Parent, parent)
	if !ok {
		return
	}
	pt := s.tables.by[def.Parent]
	_, created, updated := pt.stamps(pv)
	if !at.After(updated) {
		return
	}
	s.enqueue(def.Parent, parent, at, write{val: pt.withStamps(pv, created, at)})
}

// LoadTimeEntries bulk-inserts entries (no visibility delay): the fast path
// for generating large histories.
func (s *Server) LoadTimeEntries(es []TimeEntry) {
	s.late.Lock()
	defer s.late.Unlock()
	s.tables.entries.load(es)
	s.gen++
}

// Delete removes a record; it vanishes from every listing (Harvest reports
// no deletions). It reports whether the id existed.
func (s *Server) Delete(r clients.Resource, id int64) bool {
	s.late.Lock()
	defer s.late.Unlock()
	if _, ok := s.getLocked(r, id); !ok {
		return false
	}
	now := s.Now()
	if v, _ := s.getLocked(r, id); v != nil {
		if d, ok := v.(Doc); ok {
			s.touchParent(r, d.Parent, now.UTC().Truncate(time.Second))
		}
	}
	s.enqueue(r, id, now, write{deletedAt: now})
	return true
}

// TimeEntry returns an entry's latest state (including writes not yet
// visible).
func (s *Server) TimeEntry(id int64) (TimeEntry, bool) {
	s.late.Lock()
	defer s.late.Unlock()
	v, _ := s.getLocked(clients.TimeEntries, id)
	e, ok := v.(TimeEntry)
	return e, ok
}

// Get returns any resource's latest state (TimeEntry, Project, Client, User
// or Task).
func (s *Server) Get(r clients.Resource, id int64) (any, bool) {
	s.late.Lock()
	defer s.late.Unlock()
	return s.getLocked(r, id)
}

// IDs returns r's visible ids in listing order.
func (s *Server) IDs(r clients.Resource) []int64 {
	s.late.Lock()
	defer s.late.Unlock()
	t := s.tables.by[r]
	out := make([]int64, 0, t.len())
	for _, p := range t.listing() {
		out = append(out, t.id(p))
	}
	return out
}

// Count returns the number of visible records of r.
func (s *Server) Count(r clients.Resource) int {
	s.late.Lock()
	defer s.late.Unlock()
	return s.tables.by[r].len()
}

// State returns what the fake serves now (writes not yet visible excluded;
// running timers' hours as of now).
func (s *Server) State() State {
	s.late.Lock()
	defer s.late.Unlock()
	st := newState(s.tables, s.deleted, s.opts.AccountID)
	now := s.Now()
	for id, e := range st.TimeEntries {
		if h := e.HoursAt(now); h != e.Hours {
			e.Hours = h
			st.TimeEntries[id] = e
		}
	}
	return st
}

// Versions returns r's visible ids (decimal text, as in the mirror) with
// their updated_at: the ground truth of a conformance check.
func (s *Server) Versions(r clients.Resource) map[string]time.Time { return s.State().Versions(r) }

// MalformResource breaks page 1 of every listing of r until cleared with
// m = 0: each resource is one endpoint.
func (s *Server) MalformResource(r clients.Resource, m fakeapi.Malformation) {
	s.Malform(string(r), 1, m)
}

// Pending returns how many writes are not yet visible.
func (s *Server) Pending() int { return s.late.Pending() }

func (s *Server) getLocked(r clients.Resource, id int64) (any, bool) {
	if w, ok := s.late.Last(fakeapi.Key[int64]{Resource: r, ID: id}); ok {
		return w.val, w.val != nil
	}
	return s.tables.by[r].get(id)
}

// enqueue makes w, stamped at, visible at once or VisibilityDelay later.
func (s *Server) enqueue(r clients.Resource, id int64, at time.Time, w write) {
	s.late.Write(fakeapi.Key[int64]{Resource: r, ID: id}, at, w)
}

func (s *Server) apply(k fakeapi.Key[int64], w write) {
	s.gen++
	if w.val != nil {
		delete(s.deleted[k.Resource], k.ID)
		s.tables.by[k.Resource].put(w.val)
		return
	}
	if s.tables.by[k.Resource].del(k.ID) {
		if s.deleted[k.Resource] == nil {
			s.deleted[k.Resource] = map[int64]time.Time{}
		}
		s.deleted[k.Resource][k.ID] = w.deletedAt.UTC()
		// The records listed under it go with it.
		for _, n := range nestedUnder[k.Resource] {
			t := s.tables.by[n].(*table[Doc])
			var gone []int64
			for id, p := range t.pos {
				if t.items[p].Parent == k.ID {
					gone = append(gone, id)
				}
			}
			for _, id := range gone {
				s.apply(fakeapi.Key[int64]{Resource: n, ID: id}, write{deletedAt: w.deletedAt})
			}
		}
	}
}

// nestedUnder maps a resource to those listed under its records.
var nestedUnder = func() map[clients.Resource][]clients.Resource {
	m := map[clients.Resource][]clients.Resource{}
	for r := range harvest.Endpoints {
		if def, _ := schema.Lookup(r); def.Parent != "" {
			m[def.Parent] = append(m[def.Parent], r)
		}
	}
	return m
}()

// nestedRoutes maps "{parent path}/{path}" to the nested resource.
var nestedRoutes = func() map[string]clients.Resource {
	m := map[string]clients.Resource{}
	for r, ep := range harvest.Endpoints {
		if def, _ := schema.Lookup(r); def.Parent != "" {
			m[harvest.EndpointOf(def.Parent).Path+"/"+ep.Path] = r
		}
	}
	return m
}()

// ---- HTTP ------------------------------------------------------------------

func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	if r.UserAgent() == "" {
		fakeapi.WriteJSON(w, http.StatusBadRequest, `{"error":"bad_request","error_description":"Missing User-Agent header: name your application and give a contact"}`)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+s.opts.Token || r.Header.Get("Harvest-Account-Id") != s.opts.AccountID {
		fakeapi.WriteJSON(w, http.StatusUnauthorized, `{"error":"invalid_token","error_description":"The access token provided is expired, revoked, malformed or invalid for other reasons."}`)
		return
	}
	res, ok := strings.CutPrefix(r.URL.Path, dialect.Base+"/")
	resource := clients.Resource(res)
	var parent int64
	if parts := strings.Split(res, "/"); len(parts) == 3 {
		n, err := strconv.ParseInt(parts[1], 10, 64)
		resource, parent = nestedRoutes[parts[0]+"/"+parts[2]], n
		if err != nil || n <= 0 {
			resource = ""
		}
	}
	def, known := schema.Lookup(resource)
	if slices.Contains(s.opts.Forbidden, resource) || (def != nil && def.Parent != "" && slices.Contains(s.opts.Forbidden, def.Parent)) {
		fakeapi.WriteJSON(w, http.StatusForbidden, `{"status":403,"error":"Forbidden"}`)
		return
	}
	if _, served := s.tables.by[resource]; !ok || !known || !served || r.Method != http.MethodGet || (def.Parent != "") != (parent != 0) {
		fakeapi.WriteJSON(w, http.StatusNotFound, `{"status":404,"error":"Not Found"}`)
		return
	}
	s.Listing(r)
	if def.Singleton {
		s.one(w, resource)
		return
	}
	s.list(w, r, resource, parent)
}

// one serves a resource that is one object (the company).
func (s *Server) one(w http.ResponseWriter, res clients.Resource) {
	s.late.Lock()
	defer s.late.Unlock()
	mal := s.Malformed(string(res), 1)
	t := s.tables.by[res]
	if t.len() == 0 {
		fakeapi.WriteJSON(w, http.StatusNotFound, `{"status":404,"error":"Not Found"}`)
		return
	}
	s.WritePage(w, t.appendJSON(s, nil, t.listing()[0], renderOpts{}), mal)
}

type filter struct {
	since     time.Time
	exclusive bool
	from, to  int64 // date keys, 0 = open
	running   int   // 0 any, 1 true, 2 false
	parent    int64 // a nested list's parent record
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, res clients.Resource, parent int64) {
	q := r.URL.Query()
	perPage := MaxPerPage
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPerPage {
			fakeapi.WriteJSON(w, http.StatusUnprocessableEntity, `{"message":"per_page must be between 1 and 2000"}`)
			return
		}
		perPage = n
	}
	if c := s.opts.PerPageCap; c > 0 {
		perPage = min(perPage, c)
	}
	f := filter{exclusive: s.opts.UpdatedSinceExclusive, parent: parent}
	if v := q.Get("updated_since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			fakeapi.WriteJSON(w, http.StatusUnprocessableEntity, `{"message":"updated_since must be an ISO 8601 date and time"}`)
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
					fakeapi.WriteJSON(w, http.StatusUnprocessableEntity, `{"message":"`+p.name+` must be a date (YYYY-MM-DD)"}`)
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

	s.late.Lock()
	defer s.late.Unlock()
	if def, _ := schema.Lookup(res); parent != 0 {
		if _, ok := s.tables.by[def.Parent].get(parent); !ok {
			// The parent is gone (or never was): Harvest has no such path.
			fakeapi.WriteJSON(w, http.StatusNotFound, `{"status":404,"error":"Not Found"}`)
			return
		}
	}
	pos := s.filtered(res, f)
	total := len(pos)
	totalPages := max((total+perPage-1)/perPage, 1)

	// Where this page starts.
	start, page := 0, 1
	if s.opts.Cursor {
		if c := q.Get("cursor"); c != "" {
			k, ok := decodeCursor(c)
			if !ok {
				fakeapi.WriteJSON(w, http.StatusUnprocessableEntity, `{"message":"invalid cursor"}`)
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
			fakeapi.WriteJSON(w, http.StatusUnprocessableEntity, `{"message":"page must be a positive integer"}`)
			return
		}
		page = n
		start = min((page-1)*perPage, total)
		if (page-1)*perPage > total {
			start = total
		}
	}
	end := min(start+perPage, total)
	mal := s.Malformed(string(res), page)
	if mal == fakeapi.HTMLPage {
		s.WritePage(w, nil, mal)
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
			o = renderOpts{noUpdatedAt: mal == fakeapi.MissingVersion, wrongTypeStamp: mal == fakeapi.WrongType}
		}
		at := len(b)
		b = s.tables.by[res].appendJSON(s, b, pos[i], o)
		if i == start && mal == fakeapi.MissingID {
			// Every record opens with its id.
			b = append(b[:at], bytes.Replace(b[at:], []byte(`{"id":`), []byte(`{"ident":`), 1)...)
		}
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
			k := s.tables.by[res].keyAt(pos[end-1])
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
	s.WritePage(w, b, mal)
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

func (s *Server) cmpKey(res clients.Resource, p int32, k [2]int64) int {
	return cmpKeys(s.tables.by[res].keyAt(p), k)
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
	if res == clients.TimeEntries {
		t := s.tables.entries
		out = make([]int32, 0, len(t.order))
		for _, p := range t.order {
			e := &t.items[p]
			dk := dateKey(e.SpentDate)
			if (f.from != 0 && dk < f.from) || (f.to != 0 && dk > f.to) ||
				(f.running == 1 && !e.IsRunning) || (f.running == 2 && e.IsRunning) || !match(e.UpdatedAt) {
				continue
			}
			out = append(out, p)
		}
	} else if dt, ok := s.tables.by[res].(*table[Doc]); ok && f.parent != 0 {
		for _, p := range dt.order {
			if dt.items[p].Parent == f.parent && match(dt.items[p].UpdatedAt) {
				out = append(out, p)
			}
		}
	} else {
		t := s.tables.by[res]
		for _, p := range t.listing() {
			if match(t.updated(p)) {
				out = append(out, p)
			}
		}
	}
	if len(s.cache) > 32 {
		clear(s.cache)
	}
	s.cache[k] = listCache{gen: s.gen, pos: out}
	return out
}

// TimeEntriesWhere returns the visible entries for which match is true (in
// listing order). match must not call the Server.
func (s *Server) TimeEntriesWhere(match func(*TimeEntry) bool) []TimeEntry {
	s.late.Lock()
	defer s.late.Unlock()
	var out []TimeEntry
	t := s.tables.entries
	for _, p := range t.order {
		if match(&t.items[p]) {
			out = append(out, t.items[p])
		}
	}
	return out
}
