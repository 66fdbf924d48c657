// Package clockify is the Clockify API v1 provider. It lists time entries per
// user (bare JSON arrays, paged until a short page), projects, clients,
// users and tasks, and follows the experimental entity-change feed for
// incremental passes, under the source's rate limit. Every record keeps its
// JSON exactly as received.
//
// Versions. Clockify has no update stamp outside its change feed, so:
//
//   - A record from the feed carries the feed's change stamp (createdAt,
//     updatedAt or deletedAt of the change document, see below), in UTC.
//   - A record from a listing (per-user time entries, projects, clients,
//     users, tasks) carries the source's clock when the page was served,
//     its Date header, less SafetyLag. The Date comes after the read: a
//     change committed between the two (a second boundary, or Clockify's
//     front ends' clocks ahead of its database's, which stamps the feed)
//     has a feed stamp before the Date although the listing shows the
//     state before it, and stamped at the Date that older state would win
//     and the change be dropped as stale until the entry next changed.
//     Stamped SafetyLag earlier, a listing claims only what it surely
//     holds; a change inside the lag that it already shows comes again
//     from the feed with its own, later stamp, so the newest state still
//     wins. Listings compare with each other as before (all shifted
//     alike), and a page's SourceTime stays its Date.
//
// Incremental time entries (Window.UpdatedSince set) read the change feed:
// GET /workspaces/{ws}/entities/{created,updated,deleted}?type=TIME_ENTRY
// &start&end&page&limit, in back-to-back windows of at most FeedWindow that
// end SafetyLag before the source's clock (the Date header of GET /user,
// one cheap request at the start of the pass). Clockify documents that
// deletions show up about a minute late, that an entity created and
// updated inside one window is left out of /updated (so /created is read
// too), and that one created and deleted inside a window is left out of
// both. Each window starts one second before the previous one ended,
// because whether start and end are inclusive is not documented; records at
// the seam come twice, which the version guard makes harmless. Every page of
// a feed listing carries the end of its last window as SourceTime, not the
// source's clock: the poller caps the high water by it, so the next pass
// starts (an overlap) before the end of what was read, never after changes
// made inside the lag and not yet listed.
//
// The feed's response shape is barely documented, and live probes saw
// another one than the docs (APIS.md, "Change feed, as third-party live
// probes saw it"; realworld/clockify/evidence). The client accepts both:
//
//   - a body that is a bare JSON array or the documented envelope
//     {"response":[...]};
//   - created and updated elements either shaped like the documented
//     LogBinDocumentDto, {"id", "documentCode", "<stamp>", "document":{the
//     entry}} with <stamp> createdAt (/created) or updatedAt (/updated),
//     or as the live feed serves them: the entry itself plus documentCode
//     and auditMetadata.{createdAt,updatedAt}, no top-level stamp;
//   - deletion elements {"deletedAt", "document":{…}, "id"}: the entity
//     id is document.id, else document._id (the live feed, whose element
//     id is the change's own), else, without a document, the element's id;
//   - pages numbered from 0, limit records each, ending at a short page;
//     the live feed ignores the page size (and the page): a page 0 with
//     more than limit changes is taken as the whole window once page 1
//     serves nothing it did not (one more request), and a later page that
//     only repeats earlier ones ends the walk.
//
// When the feed is unusable. The feed is experimental (APIS.md: "plan for
// it to change or vanish"). A pass whose feed requests answer 403, 404,
// 405, 410 or 501, whose elements have a shape neither of the above
// (bare ids, objects with neither a document nor a timeInterval, an
// object without response), or whose window cannot be walked stably
// (clients.ErrCapped from the page walk, a page size ignored in a way page
// 1 does not confirm) does not fail: the source falls back to per-user
// listings by start date, from FallbackDays (14) before the cursor to now,
// versioned by each page's clock like every listing; unchanged entries
// are discarded by the write's content-hash comparison; deletions are
// then found by reconcile only, and edits to entries started before the
// window too. The first switch is logged at Warn (later ones at Info);
// the feed is tried again FeedRetry (6h) later. A malformed element of a
// known shape (a stamp or id missing, a bad duration) still fails the
// pass, naming the field. FeedMode() returns "feed" or "listing: <why>".
// Showing the mode in `tidemark cursors` needs the lead's wiring: the
// command holds clients.Source values, so it would type-assert an
// interface{ FeedMode() string } on the built source (the mode lives in
// the running daemon's client: a separate `cursors` process sees "feed"
// until its own pass fails, so a persisted mode would need a column or a
// cursor note written by the poller when FeedMode changes).
//
// Time entries (real shapes: APIS.md "Real bodies"; realworld/clockify).
// timeInterval.duration is ISO 8601 text ("PT3H") on older bodies and a
// number of seconds (4) on newer ones: both are accepted; start and end
// may carry an offset (+02:00) and are stored as instants (started_at,
// ended_at; ended_at null while running); offStart, offEnd, timeZone,
// zonedStart and zonedEnd may be present. spent_date is the entry's start
// dated as Clockify's own reports date it: in timeInterval.timeZone when
// the entry has one, else in its user's settings.timeZone (a hydrated
// entry's user, or the users listing), else in UTC; time_zone stores the
// zone used ("UTC" in the last case). client_id is the entry's clientId,
// else a hydrated entry's project.clientId, else its project's clientId
// from the projects listing: non-hydrated entries, which this client
// requests, carry only projectId (realworld: time_entries_notes_*,
// time_entries_trace_*). The users' zones and the projects' clients are
// cached per source (refs.go): every users or projects listing the client
// makes (the users walk of per-user listings, a pass's users and projects
// resources, which run before time entries) refreshes them, and an entry
// naming a user or project the cache does not know costs one walk of that
// collection per listing (an id the walk does not show is then known as
// "none": UTC, no client). tags is a JSON array of tag names when the body
// carries tag objects with names (hydrated entries, webhook bodies), else
// of the tag ids (tagIds: what non-hydrated listings and the feed carry),
// [] when the body has an empty list, null when it has neither (tagIds
// null). Zone names are resolved with the embedded tz database
// (time/tzdata). DateIn is the zone-dating helper, here until shared.
//
// A first sync (the zero UpdatedSince) reads the feed as well, from
// FirstSyncDays back: a per-user listing would version entries by its
// clock, and the feed would then re-deliver the same states with older
// stamps. Older history comes in by backfill. Backfill and reconcile
// (Window.From/To) list per user by date, from From 00:00Z to To+1 00:00Z,
// page-size PageSize, versioned by each page's Date header; with UserIDs
// configured they cover only those users (ListScope). A /created
// element's version is the later of its createdAt and updatedAt (an entry
// created and updated inside one window is only in /created, with the
// later state).
//
// Every listing and the feed page by number over a live list (bare
// arrays, no total): clients/pagewalk confirms a walk of several pages with
// a second one and walks again while it shifts; one that will not hold
// still, or a listing past MaxPages, fails with clients.ErrCapped.
//
// Because the feed is experimental, a weekly reconcile is on by default
// (DefaultReconcileSchedule): it re-lists recent entries and tombstones the
// ones the source no longer returns.
package clockify

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/provider"
	"github.com/tidemarkhq/tidemark/clients/provider/listing"
	"github.com/tidemarkhq/tidemark/schema"
)

// Defaults.
const (
	DefaultBaseURL = "https://api.clockify.me/api/v1"
	// DefaultPageSize is the page-size of every listing. Clockify defaults
	// to 50 and documents 5000 as the largest; 1000 keeps a page around a
	// megabyte while needing few requests.
	DefaultPageSize = 1000
	MaxPageSize     = 5000
	// DefaultFeedLimit is the change feed's documented default limit. A
	// larger one is not documented: a server that silently capped it would
	// make the walk stop early at what looks like a short page.
	DefaultFeedLimit = 50
	// DefaultFeedWindow bounds one feed window (the feed's own default
	// range is 30 days).
	DefaultFeedWindow = 7 * 24 * time.Hour
	// DefaultDeletionWindow and DefaultDeletionSpan shape the reads of
	// /entities/deleted (see feed).
	DefaultDeletionWindow = time.Minute
	DefaultDeletionSpan   = time.Hour
	// DefaultSafetyLag keeps feed windows this far behind the source's
	// clock: deletions reach the feed about a minute late.
	DefaultSafetyLag = 2 * time.Minute
	// DefaultFirstSyncDays is the range a first sync lists.
	DefaultFirstSyncDays = 90
	// DefaultMaxPages caps one walk of a listing (not of the feed): a
	// per-user list that needs more fails with clients.ErrCapped rather
	// than going on forever.
	DefaultMaxPages = 1000
	// DefaultRetryAfter is the wait after a 429: Clockify sends no
	// Retry-After, and its paid budget is per second.
	DefaultRetryAfter = 5 * time.Second
	// DefaultReconcileSchedule: the feed is experimental, so reconcile is
	// on by default for Clockify, weekly (Sunday 04:00 UTC).
	DefaultReconcileSchedule = "0 4 * * 0"
)

// DefaultRateLimit is a safe share of Clockify's paid budget (50 requests/s).
// Free workspaces get 30 requests an hour: configure {30, 1h} for those.
var DefaultRateLimit = httpx.RateLimit{Requests: 10, Per: time.Second}

// Params configures a Client. Base.Token is the API key (X-Api-Key);
// Base.BaseURL defaults to DefaultBaseURL (regional prefixes exist).
type Params struct {
	provider.Base
	WorkspaceID string
	// UserIDs limits the per-user time-entry listings; empty means every
	// user of the workspace (GET /workspaces/{ws}/users, once per listing).
	UserIDs []string
	// PageSize (listings) defaults to DefaultPageSize, FeedLimit (change
	// feed) to DefaultFeedLimit, FeedWindow to DefaultFeedWindow.
	PageSize   int
	FeedLimit  int
	FeedWindow time.Duration
	// DeletionWindow (default DefaultDeletionWindow) and DeletionSpan
	// (default DefaultDeletionSpan) shape the reads of /entities/deleted.
	DeletionWindow, DeletionSpan time.Duration
	// SafetyLag defaults to DefaultSafetyLag.
	SafetyLag time.Duration
	// FirstSyncDays defaults to DefaultFirstSyncDays.
	FirstSyncDays int
	// MaxPages defaults to DefaultMaxPages.
	MaxPages int
	// FallbackDays (default DefaultFallbackDays) and FeedRetry (default
	// DefaultFeedRetry) shape the listings used while the feed is
	// unusable.
	FallbackDays int
	FeedRetry    time.Duration
	// Overlap, when set, is the poller's overlap for this source: Validate
	// refuses one shorter than SafetyLag (see CheckOverlap).
	Overlap time.Duration
}

// Client is a Clockify workspace as a clients.Source.
type Client struct {
	name       string
	base       *url.URL
	ws         string
	userIDs    []string
	pageSize   int
	feedLimit  int
	feedWindow time.Duration
	delWindow  time.Duration
	delSpan    time.Duration
	lag        time.Duration
	firstDays  int
	maxPages   int
	// fallbackDays, feedRetry and fs: the feed's fallback (fallback.go).
	fallbackDays int
	feedRetry    time.Duration
	fs           feedState
	resources    []clients.Resource
	http         *httpx.Client
	dec          decoder
	log          zerolog.Logger
}

var _ clients.Source = (*Client)(nil)

func (p Params) withDefaults() Params {
	p.Base = p.Fill(defaults, Resources)
	p.PageSize = cmp.Or(p.PageSize, DefaultPageSize)
	p.FeedLimit = cmp.Or(p.FeedLimit, DefaultFeedLimit)
	p.FeedWindow = cmp.Or(p.FeedWindow, DefaultFeedWindow)
	p.DeletionWindow = cmp.Or(p.DeletionWindow, DefaultDeletionWindow)
	p.DeletionSpan = cmp.Or(p.DeletionSpan, DefaultDeletionSpan)
	p.SafetyLag = cmp.Or(p.SafetyLag, DefaultSafetyLag)
	p.FirstSyncDays = cmp.Or(p.FirstSyncDays, DefaultFirstSyncDays)
	p.MaxPages = cmp.Or(p.MaxPages, DefaultMaxPages)
	p.FallbackDays = cmp.Or(p.FallbackDays, DefaultFallbackDays)
	p.FeedRetry = cmp.Or(p.FeedRetry, DefaultFeedRetry)
	return p
}

// Validate reports the first missing or invalid parameter, by its name.
func (p Params) Validate() error {
	p = p.withDefaults()
	return p.Check("clockify", p.check)
}

// check checks what only Clockify's Params have.
func (p Params) check() error {
	switch {
	case p.WorkspaceID == "":
		return errors.New("workspace_id is required")
	case !validID(p.WorkspaceID):
		return fmt.Errorf("workspace_id %q is not a Clockify id", p.WorkspaceID)
	case p.PageSize < 1 || p.PageSize > MaxPageSize:
		return fmt.Errorf("page_size %d out of 1..%d", p.PageSize, MaxPageSize)
	case p.FeedLimit < 1:
		return fmt.Errorf("feed_limit %d must be ≥ 1", p.FeedLimit)
	case p.FeedWindow < time.Minute:
		return fmt.Errorf("feed_window %s must be at least 1m", p.FeedWindow)
	case p.DeletionWindow < 2*time.Second || p.DeletionSpan < 0:
		return fmt.Errorf("deletion_window %s must be at least 2s", p.DeletionWindow)
	case p.SafetyLag < 0:
		return fmt.Errorf("safety_lag %s must not be negative", p.SafetyLag)
	case p.FirstSyncDays < 1:
		return fmt.Errorf("first_sync_days %d must be ≥ 1", p.FirstSyncDays)
	case p.MaxPages < 1:
		return fmt.Errorf("max_pages %d must be ≥ 1", p.MaxPages)
	case p.FallbackDays < 1 || p.FeedRetry < 0:
		return fmt.Errorf("fallback_days %d must be ≥ 1", p.FallbackDays)
	}
	if p.Overlap != 0 {
		if err := CheckOverlap(p.Overlap, p.SafetyLag); err != nil {
			return err
		}
	}
	for i, id := range p.UserIDs {
		if !validID(id) {
			return fmt.Errorf("user_ids[%d] %q is not a Clockify id", i, id)
		}
	}
	return nil
}

// CheckOverlap refuses a poller overlap shorter than the feed's safety lag.
// The high water stops at the end of what the feed listed (SafetyLag before
// the source's clock), so the next window starts an overlap before it; an
// overlap of at least the lag keeps that true even were a page to carry the
// source's clock, and re-reads a deletion that reached the feed later than
// the lag.
func CheckOverlap(overlap, safetyLag time.Duration) error {
	if safetyLag == 0 {
		safetyLag = DefaultSafetyLag
	}
	if overlap < safetyLag {
		return fmt.Errorf("overlap %s is shorter than the change feed's safety lag %s: changes made within the lag before a pass could fall between two passes; use overlap ≥ %s", overlap, safetyLag, safetyLag)
	}
	return nil
}

// HTTPConfig is the httpx configuration New uses: the API key (secret),
// User-Agent, rate limit, 429 wait and hooks. Tests tweak it and pass
// httpx.New(cfg) as Params.HTTP.
func HTTPConfig(p Params) httpx.Config {
	p = p.withDefaults()
	cfg := p.Base.HTTPConfig()
	cfg.Headers = http.Header{"X-Api-Key": {p.Token}}
	cfg.DefaultRetryAfter = DefaultRetryAfter
	return cfg
}

// New validates p and returns a Client.
func New(p Params) (*Client, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p = p.withDefaults()
	base, hc := p.Open(HTTPConfig(p))
	return &Client{
		name:         p.Name,
		base:         base,
		ws:           p.WorkspaceID,
		userIDs:      slices.Clone(p.UserIDs),
		pageSize:     p.PageSize,
		feedLimit:    p.FeedLimit,
		feedWindow:   p.FeedWindow,
		delWindow:    p.DeletionWindow,
		delSpan:      p.DeletionSpan,
		lag:          p.SafetyLag,
		firstDays:    p.FirstSyncDays,
		maxPages:     p.MaxPages,
		fallbackDays: p.FallbackDays,
		feedRetry:    p.FeedRetry,
		resources:    slices.Clone(p.Resources),
		http:         hc,
		dec:          newDecoder(p.Name, hc),
		log:          p.Log(),
	}, nil
}

// Name returns the source name.
func (c *Client) Name() string { return c.name }

var _ clients.Scoper = (*Client)(nil)

// ListScope says what a listing covers: time entries by date are listed per
// configured user, so a reconcile may tombstone only those users' entries.
// Everything else (the feed, every user, the reference lists) is the whole
// workspace.
func (c *Client) ListScope(r clients.Resource, w clients.Window) clients.Scope {
	if r == clients.TimeEntries && w.ByDate() && len(c.userIDs) > 0 {
		return clients.Scope{UserIDs: slices.Clone(c.userIDs)}
	}
	return clients.Scope{}
}

// Resources returns the configured resources.
func (c *Client) Resources() []clients.Resource { return slices.Clone(c.resources) }

// List streams r's records for w, one normalized page at a time. Only time
// entries accept a spent-date window; the other resources are listed whole
// whatever UpdatedSince says (Clockify has no filter for them).
func (c *Client) List(ctx context.Context, r clients.Resource, w clients.Window, fn func(context.Context, clients.Page) error) error {
	if err := listing.Check(c.name, c.resources, r, w); err != nil {
		return err
	}
	l := &lister{c: c, fn: fn}
	switch r {
	case clients.TimeEntries:
		switch {
		case w.ByDate():
			// Clockify filters on the start instant (UTC); spent_date is the
			// start's day in the entry's or user's zone, up to 14 hours off.
			// Ask one day wider on each side, so that every entry dated in
			// the window is listed: a reconcile tombstones what it was not
			// handed within From..To. The entries dated just outside are
			// handed over too (current records, written by version): a
			// stored row dated inside whose entry is now dated outside is
			// then rewritten, not tombstoned.
			from, to := w.From, w.To
			if from.IsZero() {
				from = clients.Date{Year: 1970, Month: 1, Day: 2}
			}
			var end time.Time
			if !to.IsZero() {
				end = to.AddDays(2).Time()
			}
			return l.entries(ctx, from.AddDays(-1).Time(), end)
		default:
			// The zero UpdatedSince (first sync) reads the feed too, from
			// FirstSyncDays back: versions then always come from the same
			// stamps, whichever pass saw the entry first.
			return l.incremental(ctx, w.UpdatedSince)
		}
	case clients.Projects:
		return l.plain(ctx, r, c.path("projects"), nil)
	case clients.Clients:
		return l.plain(ctx, r, c.path("clients"), nil)
	case clients.Users:
		return l.plain(ctx, r, c.path("users"), url.Values{"status": {"ALL"}})
	case clients.Tasks:
		return l.tasks(ctx)
	}
	return fmt.Errorf("%s: resource %s: %w", c.name, r, clients.ErrUnsupported)
}

// lister numbers the pages of one listing.
type lister struct {
	c    *Client
	fn   func(context.Context, clients.Page) error
	page int
	// usersRead and projectsRead say this listing already walked the
	// users or projects (to learn zones and clients): at most once each.
	usersRead, projectsRead bool
	// feedFrom is where the feed read starts.
	feedFrom time.Time
	// lastStart is the start of the last time entry listed (userEntries),
	// and disorder, when set, says where its page was not newest first.
	lastStart time.Time
	disorder  string
}

// decodeEntries runs decode (a page of time entries) and, when it met a
// user or project the source's refs did not know, walks that collection
// once per listing and decodes the page again.
func (l *lister) decodeEntries(ctx context.Context, decode func(ms *misses) error) error {
	var ms misses
	if err := decode(&ms); err != nil {
		return err
	}
	again := false
	if len(ms.users) > 0 && !l.usersRead {
		if _, err := l.users(ctx, true); err != nil {
			return err
		}
		l.c.dec.refs.zones.forget(ms.users)
		again = true
	}
	if len(ms.projects) > 0 && !l.projectsRead {
		if _, err := l.ids(ctx, clients.Projects, l.c.path("projects"), nil); err != nil {
			return err
		}
		l.projectsRead = true
		l.c.dec.refs.clients.forget(ms.projects)
		again = true
	}
	if again {
		return decode(nil)
	}
	return nil
}

func (c *Client) path(parts ...string) string {
	// Ids are validated (validID): nothing here needs escaping.
	return "workspaces/" + c.ws + "/" + strings.Join(parts, "/")
}

func (c *Client) url(path string, q url.Values) string {
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + "/" + path
	u.RawQuery = q.Encode()
	return u.String()
}

func (c *Client) get(ctx context.Context, path string, q url.Values, r string, page int) (*httpx.Response, error) {
	return c.http.Do(ctx, httpx.Request{URL: c.url(path, q), Resource: r, Page: page})
}

// clock returns the source's clock: the Date header of GET /user, the
// cheapest call there is; ours when a proxy dropped it (the feed's safety
// lag absorbs ordinary skew, and failing would stop the feed for ever).
func (c *Client) clock(ctx context.Context) (time.Time, error) {
	resp, err := c.get(ctx, "user", nil, string(clients.TimeEntries), 0)
	if err != nil {
		return time.Time{}, err
	}
	return resp.Clock(), nil
}

// stamp formats a feed or listing bound as Clockify asks:
// yyyy-MM-ddThh:mm:ssZ.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// plain lists a workspace collection whole, versioned by each page's clock.
func (l *lister) plain(ctx context.Context, r clients.Resource, path string, extra url.Values) error {
	c := l.c
	return listing.UntilShort(ctx, path, 1, c.pageSize, c.maxPages, func(ctx context.Context, page int) ([]string, int, error) {
		q := url.Values{"page": {strconv.Itoa(page)}, "page-size": {strconv.Itoa(c.pageSize)}}
		for k, v := range extra {
			q[k] = v
		}
		return l.listed(ctx, r, path, q)
	})
}

// listed fetches one listing page, normalizes it and hands it to fn; it
// returns the ids served and how many there were.
func (l *lister) listed(ctx context.Context, r clients.Resource, path string, q url.Values) ([]string, int, error) {
	c := l.c
	l.page++
	resp, err := c.get(ctx, path, q, string(r), l.page)
	if err != nil {
		return nil, 0, err
	}
	var recs []clients.Record
	err = l.decodeEntries(ctx, func(ms *misses) (err error) {
		if r != clients.TimeEntries {
			ms = nil
		}
		// Listed records are versioned by the page's clock (ours without
		// Date: SourceTime stays zero, so the poller knows it has none).
		recs, err = c.dec.decodeListM(r, l.page, resp.Body, resp.Clock().Add(-c.lag), resp.ReceivedAt, ms)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	if len(recs) > c.pageSize {
		return nil, 0, c.dec.Errf(string(r), l.page, "(page)", fmt.Sprintf("%d records on a page of %d", len(recs), c.pageSize), nil)
	}
	ids, n := listing.IDs(recs), len(recs)
	if r == clients.TimeEntries && n > 0 {
		l.lastStart, l.disorder = newestFirst(recs)
	}
	c.log.Debug().Str("resource", string(r)).Int("page", l.page).Int("records", len(recs)).Msg("page fetched")
	if err := l.fn(ctx, clients.Page{Resource: r, Number: l.page, SourceTime: resp.Date, Records: recs}); err != nil {
		return nil, 0, err
	}
	return ids, n, nil
}

// ids walks a listing for its ids (users, projects): the union of every
// walk, in first-seen order. The records are decoded whole, so that the
// source's refs learn the users' zones and the projects' clients.
func (l *lister) ids(ctx context.Context, r clients.Resource, path string, extra url.Values) ([]string, error) {
	c := l.c
	var ids []string
	seen := map[string]bool{}
	err := listing.UntilShort(ctx, path, 1, c.pageSize, c.maxPages, func(ctx context.Context, page int) ([]string, int, error) {
		q := url.Values{"page": {strconv.Itoa(page)}, "page-size": {strconv.Itoa(c.pageSize)}}
		for k, v := range extra {
			q[k] = v
		}
		resp, err := c.get(ctx, path, q, string(r), page)
		if err != nil {
			return nil, 0, err
		}
		recs, err := c.dec.decodeList(r, page, resp.Body, resp.Clock(), resp.ReceivedAt)
		if err != nil {
			return nil, 0, err
		}
		got := listing.IDs(recs)
		for _, id := range got {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		return got, len(got), nil
	})
	return ids, err
}

// users returns the configured user ids, or (all, or none configured)
// every user of the workspace.
func (l *lister) users(ctx context.Context, all bool) ([]string, error) {
	if len(l.c.userIDs) > 0 && !all {
		return l.c.userIDs, nil
	}
	l.usersRead = true
	return l.ids(ctx, clients.Users, l.c.path("users"), url.Values{"status": {"ALL"}})
}

// entries lists every user's time entries whose start is in [start, end)
// (end zero: open).
func (l *lister) entries(ctx context.Context, start, end time.Time) error {
	c := l.c
	users, err := l.users(ctx, false)
	if err != nil {
		return err
	}
	for _, uid := range users {
		if err := l.userEntries(ctx, c.path("user", uid, "time-entries"), start, end); err != nil {
			return err
		}
	}
	return nil
}

// userEntries lists one user's entries, newest start first, by keyset: a
// full page is followed by page 1 again with `end` at the start of its
// last entry plus a second (whether Clockify's `end` is inclusive is not
// documented: the entries of that second are served again, harmless as the
// write is versioned, and none is skipped). No page is numbered past 1, so
// an entry deleted or moved above the walk between two requests costs
// nothing; one moved from below to above it changed, and the change feed
// (or the next reconcile) reads it.
func (l *lister) userEntries(ctx context.Context, path string, start, end time.Time) error {
	c := l.c
	upper := end
	for pages := 1; ; pages++ {
		q := url.Values{"page": {"1"}, "page-size": {strconv.Itoa(c.pageSize)}, "start": {stamp(start)}}
		if !upper.IsZero() {
			q.Set("end", stamp(upper))
		}
		l.lastStart, l.disorder = time.Time{}, ""
		_, n, err := l.listed(ctx, clients.TimeEntries, path, q)
		if err != nil {
			return err
		}
		if l.disorder != "" {
			// The walk goes on below the last entry's start: on a page in
			// another order, the entries between would be skipped.
			return fmt.Errorf("%s: %s: %w: page %d is not newest first (%s): the walk cannot go on below it without skipping entries",
				c.name, path, clients.ErrCapped, l.page, l.disorder)
		}
		if n < c.pageSize {
			return nil
		}
		next := l.lastStart.UTC().Truncate(time.Second).Add(time.Second)
		switch {
		case l.lastStart.IsZero():
			return fmt.Errorf("%s: %s: %w: a full page without a start to go on from", c.name, path, clients.ErrCapped)
		case !upper.IsZero() && !next.Before(upper):
			return fmt.Errorf("%s: %s: %w: more than %d entries start in the second %s", c.name, path, clients.ErrCapped, c.pageSize, stamp(l.lastStart))
		case pages >= c.maxPages:
			return fmt.Errorf("%s: %s: %w: more than %d pages", c.name, path, clients.ErrCapped, c.maxPages)
		}
		upper = next
	}
}

// newestFirst returns the start of the last of recs (time entries), and
// where a start is later than the one before ("" when the page is newest
// first, as the keyset walk needs).
func newestFirst(recs []clients.Record) (time.Time, string) {
	var prev time.Time
	for i := range recs {
		s, _ := recs[i].Row[schema.TE.Started].(time.Time)
		if i > 0 && s.After(prev) {
			return s, fmt.Sprintf("entry %s starts at %s, after %s", recs[i].ID, stamp(s), stamp(prev))
		}
		prev = s
	}
	return prev, ""
}

// tasks lists every project's tasks.
func (l *lister) tasks(ctx context.Context) error {
	c := l.c
	pids, err := l.ids(ctx, clients.Projects, c.path("projects"), nil)
	if err != nil {
		return err
	}
	l.projectsRead = true
	for _, pid := range pids {
		if err := l.plain(ctx, clients.Tasks, c.path("projects", pid, "tasks"), nil); err != nil {
			return err
		}
	}
	return nil
}

// Feed kinds, in the order a window reads them.
var feedKinds = []feedKind{feedCreated, feedUpdated, feedDeleted}

// feed reads the change feed from since to SafetyLag before the source's
// clock, window by window. Every page carries the end of the last window as
// its SourceTime: the poller caps the new high water by it, and nothing
// after it was listed (a /created element's version, the later of its
// creation and its last update, may be later still). Each also says it
// covers up to DeletionSpan before that end, so an idle cursor keeps up.
func (l *lister) feed(ctx context.Context, since time.Time) error {
	c := l.c
	now, err := c.clock(ctx)
	if err != nil {
		return err
	}
	end := now.Add(-c.lag).Truncate(time.Second)
	start := since.UTC().Truncate(time.Second)
	if since.IsZero() {
		start = now.AddDate(0, 0, -c.firstDays).Truncate(time.Second)
	}
	l.feedFrom = start
	for ws := start; ws.Before(end); {
		we := ws.Add(c.feedWindow)
		if we.After(end) {
			we = end
		}
		for _, k := range feedKinds[:2] {
			if err := l.feedWindow(ctx, k, ws, we, end); err != nil {
				return err
			}
		}
		// Clockify leaves out of /deleted an entity created and deleted
		// inside the window asked for. A pass's window starts an overlap
		// before the newest change seen, so it often holds the creation of
		// an entry already mirrored: deletions are read in sub-windows of
		// DeletionWindow, so that only an entry created and deleted within
		// one of them (and mirrored in between) is missed until reconcile.
		// A catch-up over more than DeletionSpan uses whole windows.
		step := c.delWindow
		if end.Sub(start) > c.delSpan {
			step = we.Sub(ws)
		}
		for ds := ws; ds.Before(we); {
			de := ds.Add(step)
			if de.After(we) {
				de = we
			}
			if err := l.feedWindow(ctx, feedDeleted, ds, de, end); err != nil {
				return err
			}
			if !de.Before(we) {
				break
			}
			ds = de.Add(-time.Second)
		}
		if !we.Before(end) {
			break
		}
		ws = we.Add(-time.Second)
	}
	return nil
}

// feedWindow reads one feed window. The feed pages by page number over a
// live list: a change leaving the list while we walk it (an entry deleted,
// or updated out of the window) shifts the rest back by one, and the entry
// at the page boundary is never served. pagewalk confirms a window of
// several pages with a second walk and walks again while it shifts.
// listedTo is the end of the pass's last window: every page's SourceTime.
func (l *lister) feedWindow(ctx context.Context, k feedKind, start, end, listedTo time.Time) error {
	c := l.c
	path := c.path("entities", string(k))
	what := fmt.Sprintf("feed %s %s..%s", k, stamp(start), stamp(end))
	// fetch reads feed page fp of this window.
	fetch := func(ctx context.Context, fp int) ([]clients.Record, int, error) {
		l.page++
		q := url.Values{
			"type": {"TIME_ENTRY"}, "start": {stamp(start)}, "end": {stamp(end)},
			"page": {strconv.Itoa(fp)}, "limit": {strconv.Itoa(c.feedLimit)},
		}
		resp, err := c.get(ctx, path, q, string(clients.TimeEntries), l.page)
		if err != nil {
			return nil, 0, err
		}
		var recs []clients.Record
		var n int
		err = l.decodeEntries(ctx, func(ms *misses) (err error) {
			recs, n, err = c.dec.decodeFeedM(k, l.page, resp.Body, resp.ReceivedAt, ms)
			return err
		})
		c.log.Debug().Str("feed", string(k)).Int("page", l.page).Int("records", len(recs)).
			Time("start", start).Time("end", end).Msg("feed page fetched")
		return recs, n, err
	}
	seen := map[string]bool{} // ids served by this walk's pages
	err := listing.UntilShort(ctx, what, 0, c.feedLimit, 0, func(ctx context.Context, fp int) ([]string, int, error) {
		if fp == 0 {
			clear(seen)
		}
		recs, n, err := fetch(ctx, fp)
		if err != nil {
			return nil, 0, err
		}
		ids := listing.IDs(recs)
		switch {
		case n > c.feedLimit && fp == 0:
			// The feed ignored limit (as live probes saw it do). Page 0 is
			// the whole window if page 1 serves nothing new.
			more, _, err := fetch(ctx, 1)
			if err != nil {
				return nil, 0, err
			}
			in := map[string]bool{}
			for _, id := range ids {
				in[id] = true
			}
			for _, r := range more {
				if !in[r.ID] {
					return nil, 0, fmt.Errorf("%s: %w: %d changes on a page of limit %d, and page 1 serves others", what, errUnstable, n, c.feedLimit)
				}
			}
			n = 0 // one page, the whole window
		case n > c.feedLimit:
			return nil, 0, fmt.Errorf("%s: %w: %d changes on page %d of limit %d", what, errUnstable, n, fp, c.feedLimit)
		case fp > 0 && n > 0 && all(ids, seen):
			// The feed ignored page: this page repeats earlier ones.
			return nil, 0, nil
		}
		for _, id := range ids {
			seen[id] = true
		}
		// A feed read through listedTo covers every change up to it. The
		// cursor may follow to DeletionSpan before it, no nearer, once the
		// read spans over CoverAfter: an idle source's window then stays
		// within a day or so (whole-window reads, three requests) and its
		// cursor is written about once a day, where the newest change seen
		// would leave the window growing with the idle time, a request per
		// kind per FeedWindow.
		var covered time.Time
		if listedTo.Sub(l.feedFrom) > clients.CoverAfter {
			covered = listedTo.Add(-c.delSpan)
		}
		if err := l.fn(ctx, clients.Page{Resource: clients.TimeEntries, Number: l.page, SourceTime: listedTo, Records: recs, Covered: covered}); err != nil {
			return nil, 0, err
		}
		return ids, n, nil
	})
	var he *httpx.Error
	if errors.Is(err, clients.ErrCapped) && !errors.As(err, &he) && strings.HasPrefix(err.Error(), what) {
		return fmt.Errorf("%w (%w)", err, errUnstable)
	}
	return err
}

// all reports whether every id is in set.
func all(ids []string, set map[string]bool) bool {
	for _, id := range ids {
		if !set[id] {
			return false
		}
	}
	return true
}
