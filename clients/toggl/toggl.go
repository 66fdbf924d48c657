// Package toggl is the Toggl Track API v9 provider. It lists time entries of
// the token's user (GET /me/time_entries: `since` for incremental windows,
// deleted entries included as tombstones; start_date/end_date for
// spent-date windows), and the workspace's projects, clients, tasks and
// users, under the source's rate limit. It normalizes each record while
// keeping its JSON exactly as received.
//
// Choices, for operators and readers of the mirror:
//
//   - spent_date is the day of `start` in the token owner's own time zone,
//     as Toggl's reports date an entry (APIS.md "Time zone": the /me
//     object's `timezone`, e.g. Europe/Berlin; `start` is UTC). The zone
//     comes from GET /me, asked after the first time-entries response and
//     then at most once per ZoneRefresh (/me calls are 30 an hour on every
//     plan); a source without /me (404) or without a known zone dates in
//     UTC, logged. started_at and ended_at are the instants (ended_at null
//     while a timer runs), time_zone the zone used, and tags the tag names
//     as a JSON array (null when Toggl sends none). By spent date (backfill,
//     reconcile) the window is the user's days.
//   - hours is duration/3600 as exact decimal text, rounded half up to 6
//     decimals by integer arithmetic (5400 s → "1.5", 100 s → "0.027778").
//     A running timer (negative duration) gets the hours from start to the
//     source's clock when the page was served, and IsRunning. The content
//     hash is over the raw JSON, which does not change while a timer runs,
//     so a running entry's hours are refreshed when the timer stops.
//   - client_id is "" (Toggl entries do not carry one); project_id is "" for
//     an entry without a project.
//   - `since` further back than MaxSinceAge is not served by Toggl: an
//     incremental window that old fails with ErrSinceTooOld, which tells the
//     operator to backfill. The first sync (zero UpdatedSince) lists the last
//     MaxSinceAge (less a margin) via since.
//   - Workspace users (GET /workspaces/{wid}/users) carry no `at` (the
//     documented element is email, fullname, id, inactive, is_active,
//     is_admin, role; APIS.md "Workspace users"): each gets the listing's
//     clock (its Date header) as version, and the write compares it by
//     content hash, so an unchanged user is not rewritten.
//   - users (GET /workspaces/{wid}/users) need an admin token; a 403 there
//     fails the listing with an error that is both clients.ErrUnsupported and
//     httpx.ErrUnauthorized, naming what to do (drop users from resources).
//     It never turns into an empty listing, which reconcile would read as
//     "every user was deleted".
//   - 402 (hourly quota spent) waits for the window Toggl states. Its quota
//     window "begins when the initial request is made and remains valid for
//     60 minutes" (support.toggl.com/en/articles/11484112-api-webhook-limits,
//     "Understanding how API limits work"), per user and organization, and
//     /me calls have their own 30 an hour. Toggl says usage is "displayed
//     within response headers" (support.toggl.com/en/articles/11623558-faqs-
//     about-api-limits); the headers are X-Toggl-Quota-Remaining and
//     X-Toggl-Quota-Resets-In (seconds), as third-party Toggl clients read
//     them (the stored docs text found for this client does not print the
//     names). A 402 with X-Toggl-Quota-Resets-In waits that long; without
//     it, until 60 minutes (QuotaWindow) after the first request of the
//     current window as this client tracked it, never until a clock hour.
//     QuotaWaitUntil reports the wait while it lasts.
//   - Toggl also answers 402 for paid-only features (tasks on Free: other
//     tools skip tasks on free workspaces "to prevent 402 errors from
//     Toggl"). A 402 whose X-Toggl-Quota-Remaining says requests remain,
//     or that a call still gets after waiting out a quota window (the
//     header absent), is taken as such: the call fails at once with
//     ErrPlanGated, which is clients.ErrUnsupported too (the poller skips
//     the resource and syncs the others), and the path is refused at once
//     from then on, without pausing the source. A 402 with the header at
//     0 is always a spent quota.
//   - /me/time_entries has no pagination and a cap. Toggl's v8 reference
//     said so outright: "The limit of returned time entries is 1000. So
//     only the first 1000 found time entries are returned" (toggl/
//     toggl_api_docs, chapters/time_entries.md, "Get time entries started
//     in a specific time range"; the repository is archived, and a Toggl
//     engineer pointed to the same limit in toggl_api_docs#416). The v9
//     reference (developers.track.toggl.com/docs/api/time_entries,
//     "GET TimeEntries": "Lists latest time entries", with since, before,
//     start_date, end_date) states no number and no paging; third parties
//     describe it as "the last thousand time entries" (Pipedream's Toggl
//     action, citing that page). So any response of EntryCap or more is
//     taken as possibly cut: a spent-date range (backfill, reconcile) is
//     split in halves until every part answers under the cap, and a single
//     day still at the cap fails with clients.ErrCapped. A `since` listing
//     cannot be split by date; at the cap it pages backwards with `before`
//     (start earlier than, RFC 3339) from the oldest start served. Whether
//     `before` combines with `since` is not documented: a page that gets
//     no older fails with clients.ErrCapped, so the cursor does not move
//     and reconcile tombstones nothing.
//   - Archived records are listed too: Toggl lists only active clients
//     unless `status` is both ("If not provided, only active clients are
//     returned"), and only active projects and tasks unless `active` is
//     both (developers.track.toggl.com/docs/api/clients, projects,
//     tasks). Left out, an archived client, project or task would vanish
//     from the listing and a reconcile would tombstone it while entries
//     still point at it; with both, archiving is is_active false.
//   - Projects and tasks page by number (page, per_page) over a live list.
//     Tasks come in the documented envelope {data, page, per_page,
//     sort_field, sort_order, total_count} (APIS.md; a bare array is
//     accepted too): the walk follows total_count under the total rules of
//     clients/pagewalk. Projects are bare arrays without a total: a walk
//     of several pages is confirmed by a second one (clients/pagewalk).
//
// Scope (the `scope:` key): `me`, the default, is /me/time_entries above,
// the token owner's entries only (toggl/toggl_api_docs chapters/
// time_entries.md: "The requests are scoped with the user whose API token
// is used"; APIS.md "/me/time_entries is the token owner's entries only").
// `workspace` is every user's entries of the workspace, from the Reports
// API v3 detailed search (workspace.go), as APIS.md ("Every user's entries
// of a workspace come only from the Reports API v3 detailed search") and
// Toggl's reference (developers.track.toggl.com/docs/reports/
// detailed_reports, "POST Search time entries") describe it:
//
//   - POST {reports}/workspace/{wid}/search/time_entries, where {reports}
//     is the base_url with its /api/v9 replaced by /reports/api/v3
//     (https://api.track.toggl.com/reports/api/v3 by default), with a JSON
//     body: start_date and end_date as dates (the reference: "End date,
//     example time.DateOnly. Should be greater than Start date"),
//     page_size, and for the next page first_id,
//     first_row_number and first_timestamp, the values of the X-Next-ID,
//     X-Next-Row-Number and X-Next-Timestamp headers of the previous
//     response ("Supports pagination via X-Next-ID and X-Next-Row-Number
//     headers returned in the response"; X-Next-Timestamp as third-party
//     clients read it, sent back only when present). The walk ends when a
//     response carries neither X-Next-ID nor X-Next-Row-Number; a walk
//     whose headers repeat fails, and one past MaxReportPages fails with
//     clients.ErrCapped. A range longer than MaxReportDays is asked in
//     consecutive ranges.
//   - The response is a bare array of rows. The fields read, as the
//     reference's body and third-party recorded bodies show them: user_id,
//     project_id, task_id, billable, description, tag_ids (ids, not
//     names), and time_entries: [{id, seconds, start, stop, at, at_tz}]
//     (one per row unless `grouped`, which is not asked). Each entry
//     becomes one record whose raw JSON is the row's fields with the
//     entry's merged in, without row_number (a position that moves when an
//     earlier row comes or goes) and time_entries. Tag names come from GET
//     /workspaces/{wid}/tags, asked when a row names a tag id not known
//     yet (at most once a listing; an id still unknown then is kept as
//     its decimal text, logged, rather than failing every pass); a renamed tag is seen when the entry
//     next changes (the hash is over the raw, which holds ids). A running
//     entry (stop null) is hours to the source's clock, as with /me.
//   - Zones: the report applies dates in each user's own zone (APIS.md,
//     citing toggl_api_docs #149, #182) and the rows carry no zone name,
//     and the workspace users listing documents none either. So an entry
//     is dated at the offset its `start` is written with (the zone the
//     report applied: time_zone is the /me zone's name when it has that
//     offset then, else the offset itself, e.g. "+09:00"); a start written
//     in UTC is dated in the token owner's /me zone, as in scope me.
//   - No filter on update time exists: an incremental pass re-lists the
//     spent dates from trailing_days (default DefaultTrailingDays) before
//     the source's today to tomorrow, widened back to the cursor's day when
//     the cursor is older; the first sync lists the last MaxSinceAge. The
//     write's content hash discards what did not change. Backfill and
//     reconcile list their date windows the same way (asking a day wider
//     on each side; every entry is handed over, those whose spent_date is
//     inside noted as listed).
//   - Deletions by absence: the client remembers, per entry, the spent
//     date and version the last complete listing gave it. When a listing
//     of a date range completes (every page served, no error, no cap), the
//     entries remembered in that range and absent from the listing are
//     asked for by id (the search's time_entry_ids, over every day from
//     ConfirmDays before the window or today to ConfirmDays after them,
//     forward too: an entry moved past tomorrow is not deleted): one that
//     comes back was moved to another day, and is handed over live with
//     its new state; the others are handed over as tombstones at their
//     last seen version (deleted at the listing's Date), so any later
//     state wins (an entry moved further than that, listed again, comes
//     back). A
//     listing or confirmation that failed or was capped hands over no
//     tombstone and keeps the memory as it was. The memory is the process's: after a restart
//     the first listing only learns it, and the scheduled reconcile (which
//     tombstones by absence over lookback_days in the poller) finds what
//     was deleted meanwhile, and deletions older than the window.
//   - ListScope (clients.Scoper) says a workspace listing covers every
//     user. In scope me the owner's user id is not known before /me is
//     asked, so it says every user too, as before.
//   - Not measured: the Reports API's own quota and whether page_size above
//     50 is honoured (the walk follows the headers either way).
package toggl

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // the users' zones, also where the system has no zoneinfo

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/pagewalk"
	"github.com/tidemarkhq/tidemark/clients/provider"
	"github.com/tidemarkhq/tidemark/clients/provider/decode"
	"github.com/tidemarkhq/tidemark/clients/provider/listing"
)

// Defaults.
const (
	DefaultBaseURL = "https://api.track.toggl.com/api/v9"
	// MaxSinceAge is how far back Toggl serves `since` (about 3 months).
	MaxSinceAge = 90 * 24 * time.Hour
	// FirstSyncMargin keeps the first sync's `since` safely inside what
	// Toggl serves: "3 months" may be calendar months (89 days from 1 May
	// back to 1 February), and our estimate of the source's clock may be
	// a little off.
	FirstSyncMargin = 2 * 24 * time.Hour
	// PerPage is the page size asked of the paginated workspace lists
	// (projects, tasks).
	PerPage = 200
	// EntryCap is the most entries one /me/time_entries response holds
	// (see the package doc): a response this long may have been cut.
	EntryCap = 1000
	// DefaultQuotaWindow is Toggl's hourly quota window.
	DefaultQuotaWindow = time.Hour
	// DefaultRetryAfter is the wait after a 429 without Retry-After: the
	// leaky bucket drains about one request per second.
	DefaultRetryAfter = 2 * time.Second
	// ZoneRefresh is how long the user's time zone from /me is kept
	// before /me is asked again.
	ZoneRefresh = 24 * time.Hour
	// DefaultContact names the project in the User-Agent when no contact is
	// configured (Toggl does not require one).
	DefaultContact = "https://github.com/tidemarkhq/tidemark"
)

// DefaultRateLimit is about 1 request per second, the rate Toggl documents
// as safe for its leaky bucket.
var DefaultRateLimit = httpx.RateLimit{Requests: 1, Per: time.Second}

// ErrSinceTooOld is matched (errors.Is) by the error List returns for an
// incremental time-entry window older than Toggl serves.
var ErrSinceTooOld = errors.New("since is older than Toggl serves")

// SinceTooOldError says which window was too old and what to do.
type SinceTooOldError struct {
	Source    string
	Since     time.Time
	SourceNow time.Time // the source's clock (estimated) when refused
}

func (e *SinceTooOldError) Error() string {
	from := clients.DateOf(e.Since.UTC())
	to := clients.DateOf(e.SourceNow.UTC())
	return fmt.Sprintf("%s time_entries: %s: the window starts %s, more than %d days before the source's clock (%s), and Toggl does not serve `since` that far back. "+
		"Run `tidemark backfill --source %s --resource time_entries --from %s --to %s` to cover the gap, "+
		"then `tidemark cursor reset --source %s --resource time_entries` (the next sync lists the last %d days)",
		e.Source, ErrSinceTooOld, e.Since.UTC().Format(time.RFC3339), int(MaxSinceAge/(24*time.Hour)),
		e.SourceNow.UTC().Format(time.RFC3339), e.Source, from, to, e.Source, int((MaxSinceAge-FirstSyncMargin)/(24*time.Hour)))
}

// Is matches ErrSinceTooOld.
func (e *SinceTooOldError) Is(target error) bool { return target == ErrSinceTooOld }

// Params configures a Client. Base.Token is the API token, sent as Basic
// <token>:api_token; Base.Contact defaults to DefaultContact. Base.HTTP,
// when set, is used as is: build it from HTTPConfig to keep the auth header
// and quota hooks.
type Params struct {
	provider.Base
	WorkspaceID int64
	// Scope is whose time entries are mirrored: ScopeMe (default, the
	// token owner's, /me/time_entries) or ScopeWorkspace (every user's,
	// the Reports API v3 detailed search).
	Scope string
	// TrailingDays is how many days of spent dates before today an
	// incremental pass in workspace scope re-lists (default
	// DefaultTrailingDays).
	TrailingDays int
	// QuotaWindow is the hourly quota window (default DefaultQuotaWindow):
	// it starts at the first request and, when a 402 carries no
	// X-Toggl-Quota-Resets-In, the wait runs to its end.
	QuotaWindow time.Duration
	// PageSize is the page size asked of the paginated workspace lists
	// and of the detailed search (default PerPage and ReportPageSize; a
	// test's small pages).
	PageSize int
	// Quota records 402 waits. When HTTP is set, build it from
	// HTTPConfig(p) with the same Quota so that QuotaWaitUntil sees them;
	// New creates one when nil.
	Quota *Quota
}

// Quota tracks a source's hourly quota window and its 402 wait. The zero
// value is ready.
type Quota struct {
	mu    sync.Mutex
	until time.Time
	start time.Time // our clock: the first request of the current window
}

// request notes a request sent at (our clock): the first one after the
// tracked window ended starts the next window.
func (q *Quota) request(at time.Time, window time.Duration) {
	q.mu.Lock()
	if q.start.IsZero() || !at.Before(q.start.Add(window)) {
		q.start = at
	}
	q.mu.Unlock()
}

// windowStart is the first request of the current window (our clock), or
// the zero time before any.
func (q *Quota) windowStart() time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.start
}

// Until returns when the current quota wait ends (our clock), or the zero
// time when the source is not waiting for its quota.
func (q *Quota) Until() time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.until.IsZero() && !time.Now().Before(q.until) {
		return time.Time{}
	}
	return q.until
}

func (q *Quota) set(until time.Time) {
	q.mu.Lock()
	if until.After(q.until) {
		q.until = until
	}
	q.mu.Unlock()
}

// resumed clears a passed wait and reports whether there was one.
func (q *Quota) resumed() (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.until.IsZero() || time.Now().Before(q.until) {
		return time.Time{}, false
	}
	u := q.until
	q.until = time.Time{}
	return u, true
}

// Client is a Toggl Track account (one token, one workspace) as a
// clients.Source.
type Client struct {
	name      string
	base      *url.URL
	wid       int64
	resources []clients.Resource
	http      *httpx.Client
	dec       decoder
	log       zerolog.Logger
	quota     *Quota

	mu     sync.Mutex
	offset time.Duration // source clock − our clock, from the last Date header
	known  bool          // a Date header was seen

	scope string // ScopeMe or ScopeWorkspace
	// perPage and reportSize are the page sizes asked (Params.PageSize).
	perPage, reportSize int
	trailing            int // workspace scope: days re-listed by an incremental pass

	wsMu sync.Mutex
	seen map[string]seenEntry // workspace scope: the last complete listing's entries
	tags map[int64]string     // workspace scope: tag names by id
	// first is the first day of the earliest year holding an entry of the
	// workspace (zero: not learnt), learnt at firstAt (our clock).
	first   clients.Date
	firstAt time.Time

	zoneMu sync.Mutex     // held while /me is asked, so it is asked once
	zone   *time.Location // the token owner's zone (/me timezone); nil: not asked yet
	meID   string         // the token owner's user id (/me id); "" when unknown
	zoneAt time.Time      // our clock when zone was learnt
	memo   provider.Memo  // where /me's answer outlives the process; nil: none
}

var _ clients.Source = (*Client)(nil)

func (p Params) withDefaults() Params {
	p.Base = p.Fill(defaults, Resources)
	p.QuotaWindow = cmp.Or(p.QuotaWindow, DefaultQuotaWindow)
	p.Scope = cmp.Or(p.Scope, ScopeMe)
	p.TrailingDays = cmp.Or(p.TrailingDays, DefaultTrailingDays)
	p.Contact = cmp.Or(p.Contact, DefaultContact)
	return p
}

// Validate reports the first missing or invalid parameter, by its name.
func (p Params) Validate() error {
	p = p.withDefaults()
	return p.Check("toggl", func() error {
		switch {
		case p.WorkspaceID <= 0:
			return errors.New("workspace_id is required (a positive integer: the number in https://track.toggl.com/<workspace_id>/…)")
		case p.QuotaWindow < 0:
			return errors.New("quota window must be positive")
		case p.Scope != ScopeMe && p.Scope != ScopeWorkspace:
			return fmt.Errorf("scope %q: want %s or %s", p.Scope, ScopeMe, ScopeWorkspace)
		case p.TrailingDays < 0 || p.TrailingDays > MaxReportDays:
			return fmt.Errorf("trailing_days %d: want 1 to %d", p.TrailingDays, MaxReportDays)
		}
		return nil
	})
}

// HTTPConfig is the httpx configuration New uses: the Basic auth header
// (secret), User-Agent, rate limit, 429 default wait, 402 quota wait and
// hooks. Tests tweak it (shorter back-off) and pass httpx.New(cfg) as
// Params.HTTP, with p.Quota set to keep QuotaWaitUntil working.
func HTTPConfig(p Params) httpx.Config {
	p = p.withDefaults()
	q := p.Quota
	window := p.QuotaWindow
	log := p.Log()
	cfg := p.Base.HTTPConfig()
	cfg.DefaultRetryAfter = DefaultRetryAfter
	cfg.Headers = http.Header{"Authorization": {"Basic " +
		base64.StdEncoding.EncodeToString([]byte(p.Token+":api_token"))}}
	cfg.QuotaWait = func(resp *http.Response) time.Duration {
		var start time.Time
		if q != nil {
			start = q.windowStart()
		}
		now := time.Now()
		d := quotaWait(resp.Header, start, window, now)
		if q != nil {
			q.set(now.Add(d))
		}
		ev := log.Warn().Dur("wait", d).Time("until", now.Add(d))
		if v := resp.Header.Get(HeaderQuotaResetsIn); v != "" {
			ev = ev.Str("resets_in", v).Str("remaining", resp.Header.Get(HeaderQuotaRemaining))
		}
		ev.Msg("Toggl API quota spent (402): waiting for the next quota window")
		return d
	}
	gate := &planGate{paths: map[string]bool{}}
	cfg.NotQuota = func(resp *http.Response, waits int) error {
		err := gate.check(resp, waits)
		if err != nil {
			log.Warn().Str("path", resp.Request.URL.Path).Msg("Toggl answered 402 for a feature the workspace's plan lacks, not for a spent quota: failing it, not waiting")
		}
		return err
	}
	cfg.OnResponse = func(status int, took time.Duration) {
		if q != nil {
			q.request(time.Now().Add(-took), window)
		}
		if q != nil && status != http.StatusPaymentRequired {
			if until, ok := q.resumed(); ok {
				log.Info().Time("waited_until", until).Msg("Toggl API quota window passed: source resumed")
			}
		}
		if p.OnResponse != nil {
			p.OnResponse(status, took)
		}
	}
	return cfg
}

// Toggl's quota headers: the requests left in the current window and the
// seconds until it resets (see the package doc).
const (
	HeaderQuotaRemaining = "X-Toggl-Quota-Remaining"
	HeaderQuotaResetsIn  = "X-Toggl-Quota-Resets-In"
)

// ErrPlanGated is matched (errors.Is) by the error of a request Toggl
// refused with 402 for a feature the workspace's plan lacks (tasks on
// Free, say), not for a spent quota. The error is clients.ErrUnsupported
// too, so that the poller skips the resource and syncs the others.
var ErrPlanGated = errors.New("not included in the workspace's plan")

// planGate tells a 402 for a paid-only feature from a spent quota: Toggl
// answers 402 to both. It is one when X-Toggl-Quota-Remaining says
// requests remain, or when the call still gets 402 after waiting out a
// quota window, unless the header says the quota is spent or the body
// speaks of a limit. Such a path is then refused at once on its next 402s:
// another quota wait would hold up the whole source for nothing. Time
// entries and /me are never gated (every plan has them): there, a 402
// after a wait is a quota spent again by something else on the same token
// (a CLI sync, another tool), which opened Toggl's window before ours.
type planGate struct {
	mu    sync.Mutex
	paths map[string]bool
}

func (g *planGate) check(resp *http.Response, waits int) error {
	path := resp.Request.URL.Path
	if strings.Contains(path, "/me/") || strings.HasSuffix(path, "/me") || strings.Contains(path, "time_entries") {
		return nil
	}
	rem, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get(HeaderQuotaRemaining)))
	known := err == nil
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	g.mu.Lock()
	defer g.mu.Unlock()
	var why string
	switch {
	case known && rem > 0:
		why = fmt.Sprintf("while %s says %d requests remain", HeaderQuotaRemaining, rem)
	case known || quotaText.Match(body):
		return nil // the quota is spent
	case g.paths[path]:
		why = "as it did before after a quota window reset"
	case waits > 0:
		why = "even after the quota window reset"
	default:
		return nil
	}
	g.paths[path] = true
	what := path[strings.LastIndex(path, "/")+1:]
	return fmt.Errorf("this workspace's plan does not include %s (Toggl answers 402 for %s %s); remove %s from the source's resources, or upgrade the plan: %w: %w",
		what, path, why, what, ErrPlanGated, clients.ErrUnsupported)
}

// quotaText is how a 402 body speaks of a spent quota ("You have hit your
// hourly limit for API calls").
var quotaText = regexp.MustCompile(`(?i)\b(quota|limit)`)

// quotaWait is the wait after a 402 at now: the seconds the provider states
// in X-Toggl-Quota-Resets-In when it sends them, else until window after
// start, the first request of the window as the client tracked it (a
// whole window when it tracked none, or the tracked one has passed). At
// least a second.
func quotaWait(h http.Header, start time.Time, window time.Duration, now time.Time) time.Duration {
	d := window
	if v := strings.TrimSpace(h.Get(HeaderQuotaResetsIn)); v != "" {
		if secs, err := strconv.ParseFloat(v, 64); err == nil && secs >= 0 && secs <= 24*3600 {
			return max(time.Duration(secs*float64(time.Second)), time.Second)
		}
	}
	if !start.IsZero() {
		// Toggl's window began when its first request arrived, a little
		// after we sent it: wait a margin past our estimate, or the retry
		// lands in the old window and costs a whole new one.
		margin := min(time.Second, window/20)
		if end := start.Add(window + margin); end.After(now) {
			d = end.Sub(now)
		}
	}
	return max(d, time.Second)
}

// New validates p and returns a Client.
func New(p Params) (*Client, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p = p.withDefaults()
	if p.Quota == nil {
		p.Quota = &Quota{}
	}
	base, hc := p.Open(HTTPConfig(p))
	return &Client{
		name:       p.Name,
		base:       base,
		wid:        p.WorkspaceID,
		resources:  slices.Clone(p.Resources),
		http:       hc,
		dec:        newDecoder(p.Name, hc),
		log:        p.Log(),
		quota:      p.Quota,
		scope:      p.Scope,
		trailing:   p.TrailingDays,
		memo:       p.Memo,
		perPage:    cmp.Or(p.PageSize, PerPage),
		reportSize: cmp.Or(p.PageSize, ReportPageSize),
	}, nil
}

// Name returns the source name.
func (c *Client) Name() string { return c.name }

// Resources returns the configured resources.
func (c *Client) Resources() []clients.Resource { return slices.Clone(c.resources) }

// QuotaWaitUntil returns when the source's current 402 quota wait ends (our
// clock), or the zero time when it is not waiting: for `cursors` to show
// "waiting for quota until …".
func (c *Client) QuotaWaitUntil() time.Time { return c.quota.Until() }

// SourceNow estimates the source's clock: ours, corrected by the offset
// seen in the last response's Date header (ours alone before any response).
func (c *Client) SourceNow() time.Time {
	now, _ := c.sourceNow()
	return now
}

func (c *Client) sourceNow() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset).UTC(), c.known
}

func (c *Client) observe(resp *httpx.Response) time.Time {
	if resp.Date.IsZero() {
		return resp.ReceivedAt
	}
	c.mu.Lock()
	c.offset, c.known = resp.Date.Sub(resp.ReceivedAt), true
	c.mu.Unlock()
	return resp.Date
}

// List streams r's records for w, one normalized page at a time. Only time
// entries accept a spent-date window.
func (c *Client) List(ctx context.Context, r clients.Resource, w clients.Window, fn func(context.Context, clients.Page) error) error {
	if err := listing.Check(c.name, c.resources, r, w); err != nil {
		return err
	}
	switch r {
	case clients.TimeEntries:
		return c.listEntries(ctx, w, fn)
	case clients.Projects, clients.Tasks:
		return c.listPaged(ctx, r, w, fn)
	case clients.Clients, clients.Users:
		return c.listOnce(ctx, r, fn)
	}
	return fmt.Errorf("%s: resource %s: %w", c.name, r, clients.ErrUnsupported)
}

func (c *Client) url(path string, q url.Values) string {
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + path
	u.RawQuery = q.Encode()
	return u.String()
}

func (c *Client) workspacePath(r clients.Resource) string {
	return "/workspaces/" + strconv.FormatInt(c.wid, 10) + "/" + string(r)
}

func (c *Client) listEntries(ctx context.Context, w clients.Window, fn func(context.Context, clients.Page) error) error {
	if c.scope == ScopeWorkspace {
		return c.listReport(ctx, w, fn)
	}
	if w.ByDate() {
		if w.From.IsZero() || w.To.IsZero() {
			return fmt.Errorf("%s: time_entries by spent date needs both from and to: %w", c.name, clients.ErrUnsupported)
		}
		l := &entryLister{c: c, fn: fn}
		return l.byDate(ctx, w.From, w.To)
	}
	// Refused here only when the source's clock is known; before the
	// first response, Toggl's own 400 decides (mapped below), so that a
	// skewed clock never refuses a window Toggl would serve.
	q := url.Values{}
	now, known := c.sourceNow()
	since := w.UpdatedSince
	switch {
	case since.IsZero():
		since = now.Add(-MaxSinceAge + FirstSyncMargin)
	case known && since.Before(now.Add(-MaxSinceAge)):
		return &SinceTooOldError{Source: c.name, Since: since, SourceNow: now}
	}
	q.Set("since", strconv.FormatInt(since.Unix(), 10))
	l := &entryLister{c: c, fn: fn}
	pg, n, err := l.fetch(ctx, q)
	if err != nil {
		var he *httpx.Error
		if errors.As(err, &he) && he.Status == http.StatusBadRequest && strings.Contains(strings.ToLower(he.Body), "since") {
			return fmt.Errorf("%w (Toggl said: %s)", &SinceTooOldError{Source: c.name, Since: time.Unix(since.Unix(), 0).UTC(), SourceNow: c.SourceNow()}, he.Body)
		}
		return err
	}
	// A since listing that completes holds every change up to its Date: it
	// covers that far (less a second, `at`'s precision), so the cursor of a
	// user who changes nothing for months keeps up, where the newest `at`
	// seen would fall behind what Toggl serves and stop the source. Only
	// for a window over CoverAfter old: an idle pass then writes nothing.
	if !pg.SourceTime.IsZero() && pg.SourceTime.Sub(since) > clients.CoverAfter {
		pg.Covered = pg.SourceTime.Add(-time.Second)
	}
	if err := fn(ctx, pg); err != nil {
		return err
	}
	// A response at the cap may have been cut. `since` cannot be split by
	// date, but `before` (start earlier than) narrows it: page backwards
	// from the oldest start served, re-reading that second (before is
	// exclusive, and the versioned write makes the repeats harmless). A
	// page that gets no older (Toggl ignored before, or one second holds
	// the whole cap) ends in ErrCapped.
	oldest, ok := oldestStart(pg)
	for ok && n >= EntryCap {
		q.Set("before", oldest.Add(time.Second).UTC().Format(time.RFC3339))
		if pg, n, err = l.fetch(ctx, q); err != nil {
			return err
		}
		var o time.Time
		if o, ok = oldestStart(pg); ok && !o.Before(oldest) {
			ok = false
		}
		oldest = o
		if err := fn(ctx, pg); err != nil {
			return err
		}
	}
	if n >= EntryCap {
		now := c.SourceNow().UTC().Truncate(time.Second)
		return fmt.Errorf("%s time_entries: %w: %d entries changed since %s, Toggl serves at most %d per request and paging back with `before` got no older, so some are missing. "+
			"Backfill the start dates they touch (e.g. `tidemark backfill --source %s --resource time_entries --from %s --to %s`, listed in windows under the cap), "+
			"then move the cursor past them: `tidemark cursor set --source %s --resource time_entries --to %s`",
			c.name, clients.ErrCapped, n, since.UTC().Format(time.RFC3339), EntryCap,
			c.name, clients.DateOf(since.UTC()), clients.DateOf(now), c.name, now.Format(time.RFC3339))
	}
	return nil
}

// oldestStart is the earliest `start` of a page's records, read from their
// raw JSON (a tombstone has no row); false when the page has none.
func oldestStart(pg clients.Page) (time.Time, bool) {
	var oldest time.Time
	for _, r := range pg.Records {
		var e struct {
			Start string `json:"start"`
		}
		if json.Unmarshal(r.Raw, &e) != nil {
			return time.Time{}, false
		}
		t, err := time.Parse(time.RFC3339, e.Start)
		if err != nil {
			return time.Time{}, false
		}
		if oldest.IsZero() || t.Before(oldest) {
			oldest = t
		}
	}
	return oldest, !oldest.IsZero()
}

// userZone returns the token owner's time zone, the `timezone` of GET /me,
// asked at most once per ZoneRefresh (the /me quota is 30 an hour on every
// plan) and after the first time-entries response, so that a refused
// window costs no /me. A source that does not serve /me (404), or names no
// zone or one this build does not know, dates in UTC, logged once; a
// failed /me keeps the zone learnt before, or fails the listing when there
// is none (entries dated in the wrong zone would not be rewritten: their
// content hash is the raw JSON's).
func (c *Client) userZone(ctx context.Context) (*time.Location, error) {
	c.zoneMu.Lock()
	defer c.zoneMu.Unlock()
	if c.zone != nil && time.Since(c.zoneAt) < ZoneRefresh {
		return c.zone, nil
	}
	if c.zone == nil && c.remembered(ctx) {
		return c.zone, nil
	}
	resp, err := c.http.Do(ctx, httpx.Request{URL: c.url("/me", nil), Resource: "me", Page: 1})
	if err != nil {
		var he *httpx.Error
		switch {
		case errors.As(err, &he) && he.Status == http.StatusNotFound:
			c.log.Warn().Msg("GET /me is not served (404): dating time entries in UTC, not in the user's time zone")
			c.zone, c.zoneAt = time.UTC, time.Now()
			return c.zone, nil
		case c.zone != nil && ctx.Err() == nil:
			c.log.Warn().Err(err).Str("time_zone", c.zone.String()).Msg("GET /me failed: keeping the time zone learnt before")
			c.zoneAt = time.Now()
			return c.zone, nil
		}
		return nil, fmt.Errorf("%s time_entries: the user's time zone (GET /me), needed to date entries as Toggl does: %w", c.name, err)
	}
	c.observe(resp)
	if id := meID(resp.Body); id != "" {
		c.meID = id
	}
	name, why := meZone(resp.Body)
	loc, lerr := time.LoadLocation(name)
	switch {
	case why != "":
		loc = time.UTC
	case lerr != nil || name == "":
		loc, why = time.UTC, fmt.Sprintf("unknown time zone %q", name)
	}
	if why != "" {
		c.log.Warn().Str("reason", why).Msg("GET /me gives no usable time zone: dating time entries in UTC, not in the user's time zone")
	} else if c.zone == nil || c.zone.String() != loc.String() {
		c.log.Info().Str("time_zone", loc.String()).Msg("dating time entries in the user's time zone (GET /me)")
	}
	c.zone, c.zoneAt = loc, time.Now()
	c.remember(ctx, name)
	return loc, nil
}

// meMemo is what is kept of /me across processes: never the whole body,
// which holds the API token.
type meMemo struct {
	ID       string `json:"id"`
	Timezone string `json:"timezone"`
}

// remembered takes the owner's id and zone that an earlier process learnt
// less than ZoneRefresh ago (a restart, a new owner, a CLI run): /me is
// asked once a day per source, not per process; c.zoneMu is held.
func (c *Client) remembered(ctx context.Context) bool {
	if c.memo == nil {
		return false
	}
	b, age, ok, err := c.memo.Get(ctx, "me")
	var m meMemo
	if err != nil || !ok || age >= ZoneRefresh || json.Unmarshal(b, &m) != nil {
		return false
	}
	loc, err := time.LoadLocation(m.Timezone)
	if err != nil || m.Timezone == "" {
		loc = time.UTC
	}
	c.zone, c.zoneAt, c.meID = loc, time.Now().Add(-age), m.ID
	return true
}

// remember keeps the owner's id and zone name for the next process.
func (c *Client) remember(ctx context.Context, zone string) {
	if c.memo == nil {
		return
	}
	b, _ := json.Marshal(meMemo{ID: c.meID, Timezone: zone})
	if err := c.memo.Put(ctx, "me", b); err != nil {
		c.log.Warn().Err(err).Msg("could not keep GET /me's answer for the next process")
	}
}

// meZone reads the `timezone` of a /me body (an object; an array holding
// one is accepted), or says why it cannot.
func meZone(body []byte) (string, string) {
	var me struct {
		Timezone *string `json:"timezone"`
	}
	b := body
	if decode.FirstByte(b) == '[' {
		var arr []json.RawMessage
		if err := json.Unmarshal(b, &arr); err != nil || len(arr) == 0 {
			return "", "/me is not a user object"
		}
		b = arr[0]
	}
	if err := json.Unmarshal(b, &me); err != nil {
		return "", "/me is not a user object: " + err.Error()
	}
	if me.Timezone == nil || *me.Timezone == "" {
		return "", "/me has no timezone"
	}
	return *me.Timezone, ""
}

// meID reads the `id` of a /me body ("" when it has none).
func meID(body []byte) string {
	var me struct {
		ID json.Number `json:"id"`
	}
	if json.Unmarshal(body, &me) != nil {
		return ""
	}
	return string(me.ID)
}

// owner returns the token owner's user id learnt from /me ("" when unknown).
func (c *Client) owner() string {
	c.zoneMu.Lock()
	defer c.zoneMu.Unlock()
	return c.meID
}

// entryLister lists /me/time_entries and numbers its responses as pages.
type entryLister struct {
	c    *Client
	fn   func(context.Context, clients.Page) error
	page int
}

// fetch requests one response and returns it as a page, with how many
// entries it held.
func (l *entryLister) fetch(ctx context.Context, q url.Values) (clients.Page, int, error) {
	c := l.c
	l.page++
	resp, err := c.http.Do(ctx, httpx.Request{URL: c.url("/me/time_entries", q), Resource: string(clients.TimeEntries), Page: l.page})
	if err != nil {
		return clients.Page{}, 0, err
	}
	clock := c.observe(resp)
	zone, err := c.userZone(ctx)
	if err != nil {
		return clients.Page{}, 0, err
	}
	dec := c.dec
	dec.owner = c.owner()
	recs, _, err := dec.decodeListing(clients.TimeEntries, l.page, resp.Body, resp.ReceivedAt, clock, zone)
	if err != nil {
		return clients.Page{}, 0, err
	}
	c.log.Debug().Str("resource", string(clients.TimeEntries)).Int("page", l.page).Int("records", len(recs)).Msg("page fetched")
	return clients.Page{Resource: clients.TimeEntries, Number: l.page, SourceTime: resp.Date, Records: recs}, len(recs), nil
}

// byDate lists the entries whose start day (in the user's zone) is in
// from..to. A response
// at the cap may have been cut: its range is split in two and each half
// listed instead, down to a single day; a single day at the cap is handed
// over and then fails with ErrCapped. A range under the cap costs one
// request, as before.
func (l *entryLister) byDate(ctx context.Context, from, to clients.Date) error {
	// Toggl filters on start in the user's time zone and may treat
	// end_date as exclusive: ask one day wider on each side, so that every
	// entry whose spent_date (its start's day in the user's zone) is in the
	// window is listed. The ones dated just outside are handed over too
	// (current records, written by version): a stored row dated inside
	// whose entry is now dated outside is then rewritten, not tombstoned.
	q := url.Values{}
	q.Set("start_date", from.AddDays(-1).String())
	q.Set("end_date", to.AddDays(2).String())
	pg, n, err := l.fetch(ctx, q)
	if err != nil {
		return err
	}
	days := int(to.Time().Sub(from.Time()).Hours()/24) + 1
	if n >= EntryCap && days > 1 {
		// Its entries come again with the halves: not handed over.
		zerolog.Ctx(ctx).Debug().Stringer("from", from).Stringer("to", to).Int("entries", n).
			Msg("Toggl answered at its cap: listing the range in two halves")
		mid := from.AddDays((days - 1) / 2)
		if err := l.byDate(ctx, from, mid); err != nil {
			return err
		}
		return l.byDate(ctx, mid.AddDays(1), to)
	}
	if err := l.fn(ctx, pg); err != nil {
		return err
	}
	if n >= EntryCap {
		return fmt.Errorf("%s time_entries: %w: %d entries started around %s (UTC) and Toggl serves at most %d per request: "+
			"the day cannot be split further", l.c.name, clients.ErrCapped, n, from, EntryCap)
	}
	return nil
}

// sinceParam returns the `since` for a workspace list, or 0 when the window
// asks for everything or reaches further back than Toggl serves (these lists
// are small: listing them whole is the safe answer).
func (c *Client) sinceParam(w clients.Window) int64 {
	if w.UpdatedSince.IsZero() || w.UpdatedSince.Before(c.SourceNow().Add(-MaxSinceAge)) {
		return 0
	}
	return w.UpdatedSince.Unix()
}

// listPaged lists projects or tasks with page/per_page under the page-walk
// defence (clients/pagewalk). Tasks come in an envelope with total_count
// (and so may projects): the walk follows the total, and a walk whose
// pages add up to it is taken as it is; a total that changes mid-walk
// reads the page before again, and a listing that stops short of its
// total fails with clients.ErrCapped. Bare arrays (projects) have no
// total: they end at a short page, and a walk of several pages is
// confirmed by a second one and walked again if it shifted.
func (c *Client) listPaged(ctx context.Context, r clients.Resource, w clients.Window, fn func(context.Context, clients.Page) error) error {
	q := url.Values{}
	q.Set("per_page", strconv.Itoa(c.perPage))
	// Left out, Toggl lists only active ones: an archived one would read
	// as deleted to reconcile.
	q.Set("active", "both")
	if s := c.sinceParam(w); s != 0 {
		q.Set("since", strconv.FormatInt(s, 10))
	}
	var prevFirst string
	number := 0 // pages of the listing, across walks
	walker := pagewalk.New(string(r))
	return walker.Numbered(ctx, 1, func(ctx context.Context, page int) (pagewalk.Page, error) {
		number++
		q.Set("page", strconv.Itoa(page))
		var recs []clients.Record
		var env envelope
		resp, err := c.http.Do(ctx, httpx.Request{URL: c.url(c.workspacePath(r), q), Resource: string(r), Page: number,
			Decode: func(body []byte, received time.Time) (err error) {
				recs, env, err = c.dec.decodeListing(r, number, body, received, received, time.UTC)
				return err
			}})
		if err != nil {
			return pagewalk.Page{}, err
		}
		c.observe(resp)
		if page > 1 && len(recs) > 0 && recs[0].ID == prevFirst {
			return pagewalk.Page{}, fmt.Errorf("%w (%w)", c.dec.Errf(string(r), number, "page", "repeats the previous page (is `page` ignored?)", nil), clients.ErrCapped)
		}
		if len(recs) > 0 {
			prevFirst = recs[0].ID
		}
		c.log.Debug().Str("resource", string(r)).Int("page", number).Int("records", len(recs)).Int("total", env.total).Msg("page fetched")
		if err := fn(ctx, clients.Page{Resource: r, Number: number, SourceTime: resp.Date, Records: recs}); err != nil {
			return pagewalk.Page{}, err
		}
		return walkPage(recs, env, page, c.perPage), nil
	})
}

// walkPage describes page n of a workspace listing for the page walk: with
// the envelope's total, the listing goes on while the pages before and
// this one hold fewer than the total (and this one was not empty); without
// one, while pages are full.
func walkPage(recs []clients.Record, env envelope, n, asked int) pagewalk.Page {
	size := cmp.Or(env.perPage, asked)
	p := pagewalk.Page{IDs: listing.IDs(recs), Total: -1, TotalPages: -1, Size: size, More: len(recs) >= size}
	if env.total >= 0 {
		p.Total, p.TotalPages = env.total, (env.total+size-1)/size
		p.More = len(recs) > 0 && n*size < env.total
	}
	return p
}

// listOnce lists clients or users: one response, no pagination.
func (c *Client) listOnce(ctx context.Context, r clients.Resource, fn func(context.Context, clients.Page) error) error {
	var q url.Values
	if r == clients.Clients {
		// "If not provided, only active clients are returned": archived
		// ones would read as deleted to reconcile.
		q = url.Values{"status": {"both"}}
	}
	resp, err := c.http.Do(ctx, httpx.Request{URL: c.url(c.workspacePath(r), q), Resource: string(r), Page: 1})
	if err != nil {
		var he *httpx.Error
		if r == clients.Users && errors.As(err, &he) && he.Status == http.StatusForbidden {
			c.log.Warn().Str("resource", string(r)).Msg("the token may not list workspace users (403): users are not mirrored")
			return fmt.Errorf("%s: users: this token may not list the workspace's users (only workspace admins can); use an admin's token or remove users from the source's resources: %w: %w",
				c.name, clients.ErrUnsupported, err)
		}
		return err
	}
	clock := c.observe(resp)
	recs, err := c.dec.decodePage(r, 1, resp.Body, resp.ReceivedAt, clock)
	if err != nil {
		return err
	}
	c.log.Debug().Str("resource", string(r)).Int("page", 1).Int("records", len(recs)).Msg("page fetched")
	return fn(ctx, clients.Page{Resource: r, Number: 1, SourceTime: resp.Date, Records: recs})
}
