// Package clockifytest is a fake Clockify API v1 server for tests. It
// follows what Clockify documents: X-Api-Key auth (401 on a bad key),
// per-user time-entry lists filtered by start/end and paged by page (from
// 1) and page-size (at most 5000) as bare JSON arrays, workspace users,
// projects, clients and per-project tasks the same way, and the
// experimental change feed /entities/{created,updated,deleted} with
// type=TIME_ENTRY, start/end (yyyy-MM-ddThh:mm:ssZ, both inclusive to the
// second), page (from 0) and limit (default 50). Deletions reach the feed
// DeletionDelay (one minute) late; an entity created and updated inside a
// window is left out of /updated, and one created and deleted inside a
// window is left out of every feed.
//
// What it assumes, because Clockify does not document it (see package
// clockify): a feed element is {"id", "documentCode":"TIME_ENTRY",
// "createdAt"|"updatedAt"|"deletedAt", "document":{the time entry}}
// (a /created element also carries updatedAt, the entry's latest change), the
// feed body is a bare array (Options.Envelope: {"response":[...]}), and
// only an entry's latest change is reported. Options.LiveFeed serves the
// feed as live probes saw it instead (bare entities with auditMetadata,
// deletions by document._id, page and limit ignored), Options.FeedStatus
// makes it unavailable. Entries carry no clientId (unless set: the client
// takes it from the project), users a settings.timeZone, and an entry may
// carry its own timeInterval.timeZone with offset stamps and a duration
// in seconds (TimeEntry.TimeZone, NumericDuration), as real bodies do;
// Live dates each entry as Clockify's reports do. Over its rate limit (50 per
// second by default) it answers 429 without Retry-After, as Clockify does.
// Its Date header comes from a skewable clock.
package clockifytest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
)

// Defaults.
const (
	DefaultToken         = "clockifytest-api-key-0123456789"
	DefaultWorkspaceID   = "65f0aaaaaaaaaaaaaaaaaaaa"
	DefaultAPIUserID     = "65f0bbbbbbbbbbbbbbbbbbbb"
	MaxPageSize          = 5000
	DefaultFeedLimit     = 50
	DefaultDeletionDelay = time.Minute
)

// Options configures a Server.
type Options struct {
	Token, WorkspaceID string
	// RateLimit is enforced as a sliding window over served requests (429s
	// do not count). Zero means 50 per second; NoRateLimit turns it off.
	RateLimit   httpx.RateLimit
	NoRateLimit bool
	// Clock is the source's clock before Skew (default time.Now); Skew
	// offsets it (Date header, default stamps, feed visibility).
	Clock func() time.Time
	Skew  time.Duration
	// DeletionDelay is how long a deletion takes to reach the feed (default
	// one minute); NoDeletionDelay makes it immediate.
	DeletionDelay   time.Duration
	NoDeletionDelay bool
	// Envelope wraps feed pages in {"response":[...]}.
	Envelope bool
	// LiveFeed serves the feed as third-party live probes saw it (APIS.md):
	// /created and /updated elements are the entry itself plus
	// documentCode and auditMetadata.{createdAt,updatedAt}, no top-level
	// stamp; a /deleted element is {deletedAt, document:{_id,
	// auditMetadata, workspaceId}, documentCode, id} with id the change's
	// own; page and limit are ignored (every page serves the whole
	// window).
	LiveFeed bool
	// FeedStatus, when set, answers every feed request with that status
	// (404: the experimental feed is gone, 403: not allowed).
	FeedStatus int
	// VisibilityDelay makes a time entry's creation or update reach
	// /entities/created and /entities/updated that long after its stamp
	// (per-user lists show it at once). LateEvery, when above 1, delays
	// only every LateEvery-th such write, like a few slow writes among
	// quick ones. The feed shows an entry's latest change only: a write
	// made while an earlier one is still invisible replaces it.
	VisibilityDelay time.Duration
	LateEvery       int
	// OldestFirst serves per-user time entries oldest start first, against
	// Clockify's newest first (a proxy or an API change).
	OldestFirst bool
}

const stampLayout = "2006-01-02T15:04:05.000Z"

// Server is a running fake: the kit's faults, request log and clock
// (fakeapi.Kit; Malform endpoints are "time-entries", "users", "projects",
// "clients", "tasks", "entities/created", "entities/updated",
// "entities/deleted", and pages count as the request does: from 1 for
// lists, from 0 for the feed) around Clockify's routes. Every method is
// safe for concurrent use.
type Server struct {
	*fakeapi.Kit
	opts Options

	mu        sync.Mutex
	st        *store
	late      fakeapi.Delays       // time-entry writes late to the feed
	visibleAt map[string]time.Time // when a late entry's change reaches the feed

	wh hooks // webhooks.go
}

var dialect = fakeapi.Dialect{
	Base: "/api/v1",
	Fault: func(status int) string {
		if status == http.StatusTooManyRequests {
			return `{"message":"Too many requests","code":429}`
		}
		return `{"message":"Internal server error","code":` + strconv.Itoa(status) + `}`
	},
	HTMLPage:   "<!DOCTYPE html>\n<html><body><h1>502 Bad Gateway</h1></body></html>\n",
	PageParams: []string{"page"},
}

// New starts a fake on a loopback port. Close it when done.
func New(o Options) *Server {
	o.Token = cmp.Or(o.Token, DefaultToken)
	o.WorkspaceID = cmp.Or(o.WorkspaceID, DefaultWorkspaceID)
	if o.RateLimit == (httpx.RateLimit{}) {
		o.RateLimit = httpx.RateLimit{Requests: 50, Per: time.Second}
	}
	if o.NoRateLimit {
		o.RateLimit = httpx.RateLimit{}
	}
	if o.NoDeletionDelay {
		o.DeletionDelay = 0
	} else {
		o.DeletionDelay = cmp.Or(o.DeletionDelay, DefaultDeletionDelay)
	}
	s := &Server{
		opts: o, st: newStore(), visibleAt: map[string]time.Time{},
		late: fakeapi.Delays{Delay: o.VisibilityDelay, Every: o.LateEvery},
	}
	s.Kit = fakeapi.New(dialect, fakeapi.Config{Clock: o.Clock, Skew: o.Skew, Window: o.RateLimit}, s.route)
	return s
}

// Token and WorkspaceID are what the fake accepts.
func (s *Server) Token() string       { return s.opts.Token }
func (s *Server) WorkspaceID() string { return s.opts.WorkspaceID }

// MalformResource breaks the first page of every listing a client reads r
// from, until cleared with m = 0: for time entries the three feeds (page
// 0) and the per-user lists (page 1), for the others their list (page 1).
func (s *Server) MalformResource(r clients.Resource, m fakeapi.Malformation) {
	if r != clients.TimeEntries {
		s.Malform(string(r), 1, m)
		return
	}
	for _, e := range []string{"entities/created", "entities/updated", "entities/deleted"} {
		s.Malform(e, 0, m)
	}
	s.Malform("time-entries", 1, m)
}

// ---- HTTP ------------------------------------------------------------------

func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, dialect.Base)
	if r.Header.Get("X-Api-Key") != s.opts.Token {
		fakeapi.WriteJSON(w, http.StatusUnauthorized, `{"message":"Full authentication is required to access this resource","code":1000}`)
		return
	}
	if s.routeWebhooks(w, r, path) {
		return
	}
	if r.Method != http.MethodGet {
		fakeapi.WriteJSON(w, http.StatusMethodNotAllowed, `{"message":"Method not allowed","code":405}`)
		return
	}
	if path == "/user" {
		fakeapi.WriteJSON(w, http.StatusOK, `{"id":"`+DefaultAPIUserID+`","name":"API user","email":"api@example.com","activeWorkspace":"`+s.opts.WorkspaceID+`","defaultWorkspace":"`+s.opts.WorkspaceID+`","status":"ACTIVE"}`)
		return
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) < 3 || parts[0] != "workspaces" {
		fakeapi.WriteJSON(w, http.StatusNotFound, `{"message":"Not found","code":404}`)
		return
	}
	if parts[1] != s.opts.WorkspaceID {
		fakeapi.WriteJSON(w, http.StatusForbidden, `{"message":"Access Denied","code":1000}`)
		return
	}
	rest := parts[2:]
	q := r.URL.Query()
	s.Listing(r)
	switch {
	case len(rest) == 1 && (rest[0] == "users" || rest[0] == "projects" || rest[0] == "clients"):
		s.list(w, q, rest[0], "")
	case len(rest) == 3 && rest[0] == "projects" && rest[2] == "tasks":
		s.list(w, q, "tasks", rest[1])
	case len(rest) == 3 && rest[0] == "user" && rest[2] == "time-entries":
		s.list(w, q, "time-entries", rest[1])
	case len(rest) == 2 && rest[0] == "entities" && (rest[1] == "created" || rest[1] == "updated" || rest[1] == "deleted"):
		s.feed(w, q, rest[1], fakeapi.Arrival(r))
	default:
		fakeapi.WriteJSON(w, http.StatusNotFound, `{"message":"Not found","code":404}`)
	}
}

func badRequest(w http.ResponseWriter, msg string) {
	b, _ := json.Marshal(map[string]any{"message": msg, "code": 501})
	fakeapi.WriteJSON(w, http.StatusBadRequest, string(b))
}

func parseStamp(v string) (time.Time, bool) {
	t, err := time.Parse("2006-01-02T15:04:05Z", v)
	return t, err == nil
}

// paging reads a request's page number (page, counted from first) and its
// page size (the parameter size, def when absent, at most max). A value out
// of range is answered 400, naming the rule, and ok is false.
func paging(w http.ResponseWriter, q url.Values, first int, size string, def, max int) (page, n int, ok bool) {
	page, n = first, def
	for _, p := range []struct {
		name   string
		dst    *int
		lo, hi int
	}{{"page", &page, first, math.MaxInt}, {size, &n, 1, max}} {
		v := q.Get(p.name)
		if v == "" {
			continue
		}
		x, err := strconv.Atoi(v)
		if err != nil || x < p.lo || x > p.hi {
			badRequest(w, p.name+" must be "+rule(p.lo, p.hi))
			return 0, 0, false
		}
		*p.dst = x
	}
	return page, n, true
}

// rule says what an integer parameter within [lo, hi] must be.
func rule(lo, hi int) string {
	switch {
	case hi != math.MaxInt:
		return fmt.Sprintf("between %d and %d", lo, hi)
	case lo == 0:
		return "a non-negative integer"
	}
	return "a positive integer"
}

// list serves a page-numbered collection as a bare array.
func (s *Server) list(w http.ResponseWriter, q url.Values, endpoint, owner string) {
	page, size, ok := paging(w, q, 1, "page-size", 50, MaxPageSize)
	if !ok {
		return
	}
	var start, end time.Time
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"start", &start}, {"end", &end}} {
		if v := q.Get(p.name); v != "" && endpoint == "time-entries" {
			t, ok := parseStamp(v)
			if !ok {
				badRequest(w, p.name+" must be in yyyy-MM-ddThh:mm:ssZ format")
				return
			}
			*p.dst = t
		}
	}
	s.mu.Lock()
	var elems []json.RawMessage
	switch endpoint {
	case "time-entries":
		var es []TimeEntry
		for _, e := range s.st.entries.rows {
			if e.UserID != owner || (!start.IsZero() && e.Start.Before(start)) || (!end.IsZero() && e.Start.After(end)) {
				continue
			}
			es = append(es, e)
		}
		fakeapi.NewestFirst(es, func(e *TimeEntry) (time.Time, string) { return e.Start, e.ID })
		if s.opts.OldestFirst {
			slices.Reverse(es)
		}
		for _, e := range es {
			elems = append(elems, s.renderEntry(e))
		}
	case "users":
		status := q.Get("status")
		for _, id := range sortedKeys(s.st.users.rows) {
			u := s.st.users.rows[id]
			if status != "" && status != "ALL" && status != u.Status {
				continue
			}
			elems = append(elems, mustJSON(map[string]any{
				"id": u.ID, "name": u.Name, "email": u.Email, "status": u.Status,
				"activeWorkspace": s.opts.WorkspaceID, "defaultWorkspace": s.opts.WorkspaceID,
				"memberships": []any{}, "profilePicture": "", "settings": map[string]any{"weekStart": "MONDAY", "timeZone": nilIfEmpty(u.zone())},
			}))
		}
	case "projects":
		for _, id := range sortedKeys(s.st.projects.rows) {
			p := s.st.projects.rows[id]
			elems = append(elems, mustJSON(map[string]any{
				"id": p.ID, "name": p.Name, "clientId": p.ClientID, "workspaceId": s.opts.WorkspaceID,
				"billable": p.Billable, "archived": p.Archived, "color": "#03A9F4", "public": true,
				"hourlyRate": map[string]any{"amount": 0, "currency": "USD"}, "memberships": []any{},
			}))
		}
	case "clients":
		for _, id := range sortedKeys(s.st.clients.rows) {
			c := s.st.clients.rows[id]
			elems = append(elems, mustJSON(map[string]any{
				"id": c.ID, "name": c.Name, "workspaceId": s.opts.WorkspaceID, "archived": c.Archived,
				"currencyCode": c.CurrencyCode, "address": nil, "note": "",
			}))
		}
	case "tasks":
		if _, ok := s.st.projects.rows[owner]; !ok {
			s.mu.Unlock()
			fakeapi.WriteJSON(w, http.StatusNotFound, `{"message":"Project doesn't belong to Workspace","code":501}`)
			return
		}
		for _, id := range sortedKeys(s.st.tasks.rows) {
			t := s.st.tasks.rows[id]
			if t.ProjectID != owner {
				continue
			}
			elems = append(elems, mustJSON(map[string]any{
				"id": t.ID, "name": t.Name, "projectId": t.ProjectID, "status": t.Status,
				"assigneeIds": []string{}, "estimate": "PT0S", "billable": true,
			}))
		}
	}
	mal := s.Malformed(endpoint, page)
	s.mu.Unlock()
	lo := min((page-1)*size, len(elems))
	hi := min(lo+size, len(elems))
	s.write(w, elems[lo:hi], mal, false)
}

// feed serves one change feed: time entries changed in [start, end].
func (s *Server) feed(w http.ResponseWriter, q url.Values, kind string, now time.Time) {
	if st := s.opts.FeedStatus; st != 0 {
		fakeapi.WriteJSON(w, st, `{"message":"`+http.StatusText(st)+`","code":`+strconv.Itoa(st)+`}`)
		return
	}
	if q.Get("type") != "TIME_ENTRY" {
		badRequest(w, "type must be TIME_ENTRY for this fake")
		return
	}
	page, limit, ok := paging(w, q, 0, "limit", DefaultFeedLimit, math.MaxInt)
	if !ok {
		return
	}
	start, ok1 := parseStamp(q.Get("start"))
	end, ok2 := parseStamp(q.Get("end"))
	if !ok1 || !ok2 {
		badRequest(w, "start and end must be in yyyy-MM-ddThh:mm:ssZ format")
		return
	}
	in := func(t time.Time) bool {
		t = t.Truncate(time.Second)
		return !t.Before(start) && !t.After(end)
	}
	type change struct {
		at, created, updated time.Time
		id                   string
		doc                  json.RawMessage
	}
	var cs []change
	s.mu.Lock()
	switch kind {
	case "created":
		for _, e := range s.st.entries.rows {
			if in(e.CreatedAt) && !now.Before(s.visibleAt[e.ID]) {
				cs = append(cs, change{e.CreatedAt, e.CreatedAt, e.UpdatedAt, e.ID, s.renderEntry(e)})
			}
		}
	case "updated":
		for _, e := range s.st.entries.rows {
			if in(e.UpdatedAt) && !in(e.CreatedAt) && !now.Before(s.visibleAt[e.ID]) {
				cs = append(cs, change{e.UpdatedAt, e.CreatedAt, e.UpdatedAt, e.ID, s.renderEntry(e)})
			}
		}
	case "deleted":
		for id, d := range s.st.deleted[clients.TimeEntries] {
			if in(d.at) && !in(d.createdAt) && !now.Before(d.at.Add(s.opts.DeletionDelay)) {
				cs = append(cs, change{d.at, d.createdAt, d.last.(TimeEntry).UpdatedAt, id, s.renderEntry(d.last.(TimeEntry))})
			}
		}
	}
	mal := s.Malformed("entities/"+kind, page)
	s.mu.Unlock()
	slices.SortFunc(cs, func(a, b change) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	if s.opts.LiveFeed {
		s.write(w, liveChanges(kind, cs, func(c change) (time.Time, time.Time, time.Time, string, json.RawMessage) {
			return c.at, c.created, c.updated, c.id, c.doc
		}, s.opts.WorkspaceID), mal, s.opts.Envelope)
		return
	}
	stampKey := map[string]string{"created": "createdAt", "updated": "updatedAt", "deleted": "deletedAt"}[kind]
	lo := min(page*limit, len(cs))
	hi := min(lo+limit, len(cs))
	elems := make([]json.RawMessage, 0, hi-lo)
	for _, c := range cs[lo:hi] {
		m := map[string]any{
			"id": c.id, "documentCode": "TIME_ENTRY", stampKey: c.at.UTC().Format(stampLayout), "document": c.doc,
		}
		if kind == "created" {
			// The document is the entry's current state: say when it was
			// last changed.
			m["updatedAt"] = c.updated.UTC().Format(stampLayout)
		}
		elems = append(elems, mustJSON(m))
	}
	s.write(w, elems, mal, s.opts.Envelope)
}

// liveChanges renders a whole window in the live feed's shape.
func liveChanges[C any](kind string, cs []C, parts func(C) (at, created, updated time.Time, id string, doc json.RawMessage), ws string) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(cs))
	for _, c := range cs {
		at, created, updated, id, doc := parts(c)
		audit := map[string]any{"createdAt": created.UTC().Format(stampLayout), "updatedAt": updated.UTC().Format(stampLayout)}
		if kind == "deleted" {
			out = append(out, mustJSON(map[string]any{
				"deletedAt": at.UTC().Format(stampLayout), "documentCode": "TIME_ENTRY", "id": NewID(),
				"document": map[string]any{"_id": id, "auditMetadata": audit, "workspaceId": ws},
			}))
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(doc, &m); err != nil {
			panic(err)
		}
		m["documentCode"], m["auditMetadata"] = "TIME_ENTRY", audit
		out = append(out, mustJSON(m))
	}
	return out
}

func (s *Server) write(w http.ResponseWriter, elems []json.RawMessage, mal fakeapi.Malformation, envelope bool) {
	if len(elems) > 0 {
		first := string(elems[0])
		switch mal {
		case fakeapi.BadDuration:
			first = strings.Replace(first, `"duration":"`, `"duration":"PT8X`, 1)
			first = strings.Replace(first, `"duration":null`, `"duration":"8 hours"`, 1)
		case fakeapi.MissingID:
			first = strings.ReplaceAll(first, `"id":`, `"ident":`)
		case fakeapi.MissingVersion:
			for _, k := range []string{"createdAt", "updatedAt", "deletedAt"} {
				first = strings.Replace(first, `"`+k+`":`, `"x`+k+`":`, 1)
			}
		case fakeapi.WrongType:
			first = strings.Replace(first, `"billable":true`, `"billable":"yes"`, 1)
			first = strings.Replace(first, `"billable":false`, `"billable":"no"`, 1)
		}
		elems = append([]json.RawMessage{json.RawMessage(first)}, elems[1:]...)
	}
	b := []byte{'['}
	for i, e := range elems {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e...)
	}
	b = append(b, ']')
	if envelope || mal == fakeapi.Envelope {
		b = append(append([]byte(`{"response":`), b...), '}')
	}
	s.WritePage(w, b, mal)
}

// renderEntry renders an entry as Clockify's per-user list does (with
// fields the client ignores): no clientId unless the entry has one set,
// timeInterval in UTC with an ISO 8601 duration, or, for an entry with a
// TimeZone, in that zone's offset with the newer fields (and the duration
// in seconds when NumericDuration).
func (s *Server) renderEntry(e TimeEntry) json.RawMessage {
	loc := time.UTC
	if e.TimeZone != "" {
		if l, err := time.LoadLocation(e.TimeZone); err == nil {
			loc = l
		}
	}
	stampIn := func(t time.Time) string { return t.In(loc).Format(time.RFC3339) }
	var end, dur any
	if e.End != nil {
		end = stampIn(*e.End)
		d := e.End.Sub(e.Start).Truncate(time.Second)
		dur = isoDuration(d)
		if e.NumericDuration {
			dur = int64(d / time.Second)
		}
	}
	if e.Duration != "" {
		dur = e.Duration
	}
	ti := map[string]any{"start": stampIn(e.Start), "end": end, "duration": dur}
	if e.TimeZone != "" {
		_, off := e.Start.In(loc).Zone()
		ti["timeZone"], ti["offStart"], ti["offEnd"] = e.TimeZone, off, off
		ti["zonedStart"], ti["zonedEnd"] = e.Start.In(loc).Format("2006-01-02T15:04:05"), nil
		if e.End != nil {
			_, offEnd := e.End.In(loc).Zone()
			ti["offEnd"], ti["zonedEnd"] = offEnd, e.End.In(loc).Format("2006-01-02T15:04:05")
		}
	}
	tags := e.TagIDs
	if tags == nil {
		tags = []string{}
	}
	m := map[string]any{
		"id": e.ID, "description": e.Description, "tagIds": tags, "userId": e.UserID,
		"billable": e.Billable, "taskId": nilIfEmpty(e.TaskID), "projectId": nilIfEmpty(e.ProjectID),
		"workspaceId": s.opts.WorkspaceID, "isLocked": e.IsLocked, "type": "REGULAR", "kioskId": nil,
		"hourlyRate": map[string]any{"amount": 10000, "currency": "USD"}, "costRate": nil,
		"customFieldValues": []any{},
		"timeInterval":      ti,
	}
	if e.ClientID != "" {
		m["clientId"] = e.ClientID
	}
	return mustJSON(m)
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
