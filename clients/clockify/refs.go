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
	zones   idMap // user id → IANA zone ("": none)
	clients idMap // project id → client id ("": none)
}

func newRefs() *refs {
	return &refs{zones: idMap{m: map[string]string{}}, clients: idMap{m: map[string]string{}}}
}

// idMap maps ids to what entries need of them; "" is a value too: known
// to have none. Safe for concurrent use.
type idMap struct {
	mu sync.Mutex
	m  map[string]string
}

func (c *idMap) get(id string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[id]
	return v, ok
}

// set records id's value; no id, nothing to record.
func (c *idMap) set(id, v string) {
	if id == "" {
		return
	}
	c.mu.Lock()
	c.m[id] = v
	c.mu.Unlock()
}

// forget marks ids a whole listing did not show as known-without-value.
func (c *idMap) forget(ids map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range ids {
		if _, ok := c.m[id]; !ok {
			c.m[id] = ""
		}
	}
}

// misses collects, while a page is decoded, the users and projects the
// refs did not know (nil: nobody asks).
type misses struct{ users, projects map[string]bool }

func (m *misses) user(id string) {
	if m != nil {
		note(&m.users, id)
	}
}

func (m *misses) project(id string) {
	if m != nil {
		note(&m.projects, id)
	}
}

func note(set *map[string]bool, id string) {
	if *set == nil {
		*set = map[string]bool{}
	}
	(*set)[id] = true
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
