package clockify

import (
	"sync"
	"time"

	// Zone names are resolved from the embedded database too, so that a
	// host without /usr/share/zoneinfo dates entries the same way.
	_ "time/tzdata"
)

// refs is what a source knows about its users and projects beyond the
// entries themselves: each user's settings.timeZone (to date an entry the
// way Clockify's reports do) and each project's clientId (non-hydrated
// entries carry only projectId). It is filled by every users and projects
// listing the client makes and, when an entry names a user or project it
// does not know, by one listing of that collection per List call. An id
// still unknown after such a listing is remembered as known-without-value
// (UTC, no client), so it costs no further request until a listing shows
// it. Safe for concurrent use.
type refs struct {
	mu      sync.Mutex
	zones   map[string]string // user id → IANA zone ("": none)
	clients map[string]string // project id → client id ("": none)
}

func newRefs() *refs { return &refs{zones: map[string]string{}, clients: map[string]string{}} }

func (r *refs) zone(user string) (string, bool) {
	if r == nil {
		return "", false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	z, ok := r.zones[user]
	return z, ok
}

func (r *refs) client(project string) (string, bool) {
	if r == nil {
		return "", false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.clients[project]
	return c, ok
}

func (r *refs) setZone(user, zone string) {
	if r == nil || user == "" {
		return
	}
	r.mu.Lock()
	r.zones[user] = zone
	r.mu.Unlock()
}

func (r *refs) setClient(project, client string) {
	if r == nil || project == "" {
		return
	}
	r.mu.Lock()
	r.clients[project] = client
	r.mu.Unlock()
}

// forget marks ids a whole listing did not show as known-without-value.
func (r *refs) forget(m map[string]string, ids map[string]bool) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for id := range ids {
		if _, ok := m[id]; !ok {
			m[id] = ""
		}
	}
}

// misses collects, while a page is decoded, the users and projects the
// refs did not know.
type misses struct{ users, projects map[string]bool }

func (m *misses) user(id string) {
	if m == nil {
		return
	}
	if m.users == nil {
		m.users = map[string]bool{}
	}
	m.users[id] = true
}

func (m *misses) project(id string) {
	if m == nil {
		return
	}
	if m.projects == nil {
		m.projects = map[string]bool{}
	}
	m.projects[id] = true
}

var zoneCache sync.Map // name → *time.Location (nil: not a zone)

// loadZone resolves an IANA zone name once (time.LoadLocation reads the
// database on every call); nil for "" or a name it does not know.
func loadZone(name string) *time.Location {
	if name == "" {
		return nil
	}
	if v, ok := zoneCache.Load(name); ok {
		return v.(*time.Location)
	}
	loc, err := time.LoadLocation(name)
	if err != nil || name == "Local" {
		loc = nil
	}
	zoneCache.Store(name, loc)
	return loc
}

// DateIn returns the calendar day of the instant t in the first of zones
// that names a known IANA zone, and that zone's name; with none, the UTC
// day and "UTC". (A helper other providers may share; it lives here until
// the lead moves it.)
func DateIn(t time.Time, zones ...string) (y int, m time.Month, d int, zone string) {
	for _, z := range zones {
		if loc := loadZone(z); loc != nil {
			y, m, d = t.In(loc).Date()
			return y, m, d, z
		}
	}
	y, m, d = t.UTC().Date()
	return y, m, d, "UTC"
}
