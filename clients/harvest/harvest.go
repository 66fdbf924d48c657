// Package harvest is the Harvest API v2 provider: it lists time entries,
// projects, clients, users, tasks and the rest of the account (invoices,
// payments, expenses, estimates, assignments, rates, roles, the company;
// endpoints.go) page by page (following links.next),
// under the source's rate limit, and normalizes each record while keeping
// its JSON exactly as received.
package harvest

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
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/pagewalk"
	"github.com/tidemarkhq/tidemark/clients/provider"
	"github.com/tidemarkhq/tidemark/clients/provider/listing"
	"github.com/tidemarkhq/tidemark/schema"
)

// Defaults.
const (
	DefaultBaseURL = "https://api.harvestapp.com/v2"
	MaxPerPage     = 2000
)

// DefaultRateLimit is Harvest's documented budget for the v2 API.
var DefaultRateLimit = httpx.RateLimit{Requests: 100, Per: 15 * time.Second}

// Params configures a Client. Base.Token is the personal access token;
// Base.Contact and Version make the User-Agent Harvest requires:
// "tidemark/<version> (<contact>)".
type Params struct {
	provider.Base
	AccountID string
	// PerPage defaults to MaxPerPage.
	PerPage int
}

// Client is a Harvest account as a clients.Source.
type Client struct {
	name      string
	accountID string
	base      *url.URL
	perPage   int
	resources []clients.Resource
	http      *httpx.Client
	dec       decoder
	log       zerolog.Logger

	mu sync.Mutex
	// listedUnder holds, per nested resource, the parent versions whose
	// children the last complete listing read (fetchNested).
	listedUnder map[clients.Resource]map[string]time.Time
	// timers is what the last look showed of running timers (fetchEntries).
	timers timers
	// now is our clock: it tells today, where time entries are cut into
	// spans (entrySpans).
	now func() time.Time
}

// timers is what a Client knows of the account's running timers.
type timers int

const (
	timersUnknown timers = iota // a fresh client
	timersRunning
	timersNone
)

var _ clients.Source = (*Client)(nil)

func (p Params) withDefaults() Params {
	p.Base = p.Fill(defaults, Resources)
	p.PerPage = cmp.Or(p.PerPage, MaxPerPage)
	return p
}

// Validate reports the first missing or invalid parameter, by its name.
func (p Params) Validate() error {
	p = p.withDefaults()
	return p.Check("harvest", func() error {
		switch {
		case p.AccountID == "":
			return errors.New("account_id is required")
		case p.Contact == "" && p.HTTP == nil:
			return errors.New("a contact (email or URL) is required for the User-Agent Harvest asks for")
		case p.PerPage < 1 || p.PerPage > MaxPerPage:
			return fmt.Errorf("per_page %d out of 1..%d", p.PerPage, MaxPerPage)
		}
		return nil
	})
}

// HTTPConfig is the httpx configuration New uses: auth headers (secret),
// account id, User-Agent, rate limit and hooks. Tests tweak it (shorter
// back-off) and pass httpx.New(cfg) as Params.HTTP.
func HTTPConfig(p Params) httpx.Config {
	p = p.withDefaults()
	cfg := p.Base.HTTPConfig()
	cfg.Headers = http.Header{"Authorization": {"Bearer " + p.Token}}
	cfg.PlainHeaders = http.Header{"Harvest-Account-Id": {p.AccountID}}
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
		name:        p.Name,
		accountID:   p.AccountID,
		base:        base,
		perPage:     p.PerPage,
		resources:   slices.Clone(p.Resources),
		http:        hc,
		dec:         newDecoder(p.Name, hc),
		listedUnder: map[clients.Resource]map[string]time.Time{},
		log:         p.Log(),
		now:         time.Now,
	}, nil
}

// Name returns the source name.
func (c *Client) Name() string { return c.name }

// Resources returns the configured resources.
func (c *Client) Resources() []clients.Resource { return slices.Clone(c.resources) }

// List streams r's records for w, one normalized page at a time, following
// links.next until it is null. Only time entries accept a spent-date window.
// A walk by page number that shifted under changes is walked again
// (pagewalk); one the provider cut short, or that would not hold still,
// fails with clients.ErrCapped after handing over what it served.
//
// It reads one page ahead: the next page is requested and decoded while fn
// handles the current one, so that the database write and the HTTP round
// trip overlap. At most two pages are in memory. When fn fails, the request
// for the next page may already have been sent (under the rate limiter); it
// is cancelled and its page dropped.
func (c *Client) List(ctx context.Context, r clients.Resource, w clients.Window, fn func(context.Context, clients.Page) error) error {
	if err := listing.Check(c.name, c.resources, r, w); err != nil {
		return err
	}
	var parents map[string]time.Time
	err := listing.ReadAhead(ctx, fn, func(ctx context.Context, send func(listing.Fetched) bool) {
		parents = c.fetch(ctx, r, w, send)
	})
	if err == nil && parents != nil {
		// Every page was applied: the children of these parent versions are
		// in the mirror.
		c.mu.Lock()
		c.listedUnder[r] = parents
		c.mu.Unlock()
	}
	return err
}

// fetch requests and decodes the pages of a listing in order and hands each
// to send, until the last page, an error or the end of ctx: one walk of a
// top-level list, the company's one object, or a nested list under each
// parent record.
func (c *Client) fetch(ctx context.Context, r clients.Resource, w clients.Window, send func(listing.Fetched) bool) map[string]time.Time {
	t, _ := schema.Lookup(r)
	switch {
	case t != nil && t.Singleton:
		c.fetchOne(ctx, r, send)
	case t != nil && t.Parent != "":
		return c.fetchNested(ctx, r, t.Parent, w, send)
	case r == clients.TimeEntries:
		c.fetchEntries(ctx, w, send)
	default:
		c.walk(ctx, r, "", c.firstURL(r, w), 0, true, send)
	}
	return nil
}

// fetchNested lists r under each record of parent that the window selects:
// the parents changed since the cursor in an incremental pass (Harvest has
// no top-level list of payments, messages or rates, and a change to one
// moves its parent's updated_at: an inference, APIS.md), every parent in a
// backfill or reconcile. The window's overlap brings back the parents
// changed just before the cursor: an incremental pass skips a parent whose
// version is the one the previous complete listing (by this process) read
// its children at, so that an idle pass costs the one request of the
// parents' listing. A version is trusted so only once it is older than the
// listing's clock by the window's overlap (at least a second): Harvest
// stamps to the second, and a child added in the same second as the
// parent's stamp, or visible late, leaves the parent's updated_at as it
// was. A parent deleted between its listing and its children's answers
// 404 there: nothing is under it. Pages are numbered across the whole
// listing. It returns the parents' versions to trust once the listing is
// complete.
func (c *Client) fetchNested(ctx context.Context, r, parent clients.Resource, w clients.Window, send func(listing.Fetched) bool) map[string]time.Time {
	c.mu.Lock()
	before := c.listedUnder[r]
	c.mu.Unlock()
	incremental := !w.UpdatedSince.IsZero()
	var ids []string
	versions := map[string]time.Time{}
	var clock, covered time.Time
	_, ok := c.walk(ctx, parent, "", c.firstURL(parent, w), 0, true, func(f listing.Fetched) bool {
		if f.Err != nil {
			return send(listing.Fetched{Err: fmt.Errorf("%s: listing the %s it is under: %w", r, parent, f.Err)})
		}
		if clock.IsZero() {
			clock = f.Page.SourceTime
		}
		for _, rec := range f.Page.Records {
			if rec.Version.After(covered) {
				covered = rec.Version
			}
			if _, dup := versions[rec.ID]; dup {
				continue
			}
			versions[rec.ID] = rec.Version
			if v, ok := before[rec.ID]; !incremental || !ok || !v.Equal(rec.Version) {
				ids = append(ids, rec.ID)
			}
		}
		return true
	})
	if !ok {
		return nil
	}
	if len(ids) == 0 {
		if send(listing.Fetched{Page: clients.Page{Resource: r, Number: 1, SourceTime: clock, Covered: covered}, Last: true}) {
			return settled(versions, clock, w.Overlap)
		}
		return nil
	}
	// The cursor follows the parents listed (clients.Page.Covered).
	withCover := func(f listing.Fetched) bool {
		f.Page.Covered = covered
		return send(f)
	}
	n, goneN := 0, 0
	for i, id := range ids {
		last, gone := i == len(ids)-1, false
		pages, ok := c.walk(ctx, r, id, c.nestedURL(r, parent, id, w), n, last, func(f listing.Fetched) bool {
			// A 404 under a parent just listed: it was deleted since, and
			// its children with it.
			if errors.Is(f.Err, httpx.ErrNotFound) {
				gone = true
				return false
			}
			return withCover(f)
		})
		if gone {
			if goneN++; last && goneN == len(ids) && goneN > 1 {
				// Not deletions: the lists are not where they are asked
				// for (a proxy, a base_url). Read as empty, a reconcile
				// would tombstone every child.
				send(listing.Fetched{Err: fmt.Errorf("%s: every list under the %d %s asked answered 404: check base_url and any proxy in front of Harvest", r, goneN, parent)})
				return nil
			}
			c.log.Info().Str("resource", string(r)).Str("parent", string(parent)).Str("id", id).
				Msg("parent deleted before its list was read: nothing under it")
			delete(versions, id)
			n += pages - 1 // the 404 was no page
			if last && !withCover(listing.Fetched{Page: clients.Page{Resource: r, Number: n + 1, SourceTime: clock}, Last: true}) {
				return nil
			}
			continue
		}
		if !ok {
			return nil
		}
		n += pages
	}
	return settled(versions, clock, w.Overlap)
}

// fetchEntries lists time entries. A running timer's hours grow while its
// updated_at stands still (APIS.md), so an incremental pass also lists the
// running ones (is_running=true) after the updated_since pages, unless the
// last look found none running: an idle account still costs one request,
// and a timer started since shows in updated_since (starting it stamps
// the entry). None is known only from a complete look at every running
// timer: the is_running listing, or the whole listing.
func (c *Client) fetchEntries(ctx context.Context, w clients.Window, send func(listing.Fetched) bool) {
	r := clients.TimeEntries
	incremental := !w.UpdatedSince.IsZero() && !w.ByDate()
	whole := w.UpdatedSince.IsZero() && !w.ByDate()
	c.mu.Lock()
	recheck := incremental && c.timers != timersNone
	c.mu.Unlock()
	saw := false
	// The running entries already handed over: each id once a listing.
	served := map[string]bool{}
	watch := func(f listing.Fetched) bool {
		f.Page.Records = slices.DeleteFunc(f.Page.Records, func(rec clients.Record) bool {
			if len(rec.Row) <= schema.TE.Running || rec.Row[schema.TE.Running] != true {
				return false
			}
			saw = true
			dup := served[rec.ID]
			served[rec.ID] = true
			return dup
		})
		return send(f)
	}
	n, ok := c.walkDated(ctx, w, !recheck, watch)
	if recheck && ok {
		saw = false
		q := c.query(EndpointOf(r), clients.Window{})
		q.Set("is_running", "true")
		_, ok = c.walk(ctx, r, "", c.endpointURL(EndpointOf(r).Path, q), n, true, watch)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case saw:
		c.timers = timersRunning
	case ok && (recheck || whole):
		c.timers = timersNone
	}
}

// settled keeps the parent versions older than clock by overlap (at least
// a second): a child change later than the listing stamps its parent
// later than such a version. None without a clock.
func settled(versions map[string]time.Time, clock time.Time, overlap time.Duration) map[string]time.Time {
	limit := clock.Add(-max(overlap, time.Second))
	for id, v := range versions {
		if clock.IsZero() || !v.Before(limit) {
			delete(versions, id)
		}
	}
	return versions
}

// fetchOne reads a resource served as one object (the company): its id is
// the account's and its version the page's Date (else when it was
// received: behind a proxy that drops Date), as it has no stamp.
func (c *Client) fetchOne(ctx context.Context, r clients.Resource, send func(listing.Fetched) bool) {
	var recs []clients.Record
	resp, err := c.http.Do(ctx, httpx.Request{URL: c.endpointURL(EndpointOf(r).Path, nil), Resource: string(r), Page: 1,
		Decode: func(body []byte, received time.Time) (err error) {
			recs, err = c.dec.decodeOne(r, body, received)
			return err
		}})
	if err != nil {
		send(listing.Fetched{Err: c.forbidden(r, err)})
		return
	}
	for i := range recs {
		recs[i].ID, recs[i].Version = c.accountID, resp.Clock().UTC().Truncate(time.Second)
	}
	send(listing.Fetched{Page: clients.Page{Resource: r, Number: 1, SourceTime: resp.Date, Records: recs}, Last: true})
}

// walk follows one listing's links.next from first until it is null,
// numbering its pages from base+1 and filling parent into nested records.
// A walk by page number that shifted (pagewalk) is walked again from the
// first page; its pages keep their numbers counting up. Its last page is
// the listing's last only when last is set. It returns how many pages it
// handed over and whether it ended well.
func (c *Client) walk(ctx context.Context, r clients.Resource, parent, first string, base int, last bool, send func(listing.Fetched) bool) (int, bool) {
	walker := pagewalk.New(string(r))
	next := first
	seen := map[string]bool{}
	for page := base + 1; ; page++ {
		seen[next] = true
		// Decoded inside the retry loop: a body the scanner finds cut short
		// is requested again, and no separate completeness pass is paid.
		var recs []clients.Record
		var env envelope
		resp, err := c.http.Do(ctx, httpx.Request{URL: next, Resource: string(r), Page: page,
			Decode: func(body []byte, received time.Time) (err error) {
				recs, env, err = c.dec.decodeUnder(r, parent, page, body, received)
				return err
			}})
		if err != nil {
			send(listing.Fetched{Err: c.forbidden(r, err)})
			return page - base, false
		}
		link := env.next
		c.log.Debug().Str("resource", string(r)).Int("page", page).Int("records", len(recs)).Msg("page fetched")
		f := listing.Fetched{Page: clients.Page{Resource: r, Number: page, SourceTime: resp.Date, Records: recs}}
		var step pagewalk.Step
		if link != "" {
			if next, err = c.resolveNext(link); err != nil {
				f.Err = c.dec.Errf(string(r), page, "links.next", err.Error(), nil)
			} else if seen[next] {
				f.Err = fmt.Errorf("%w (%w)", c.dec.Errf(string(r), page, "links.next", "points back at a page already listed", nil), clients.ErrCapped)
			}
		}
		if f.Err == nil {
			step, f.Err = walker.Page(ctx, walkPage(recs, env, c.perPage, resp.Date))
			f.Last = step == pagewalk.Done
			switch step {
			case pagewalk.Again:
				next, seen = first, map[string]bool{}
			case pagewalk.Back:
				next, seen = pageURL(first, walker.BackTo()), map[string]bool{}
			}
		}
		if f.Err != nil {
			// The page is good but the listing cannot go on: hand the page
			// over first, as before, then the error.
			bad := f.Err
			f.Err = nil
			if !send(f) {
				return page - base, false
			}
			send(listing.Fetched{Err: bad})
			return page - base, false
		}
		done := f.Last
		f.Last = done && last
		if !send(f) {
			return page - base, false
		}
		if done {
			return page - base, true
		}
	}
}

// forbidden turns a 403 into clients.ErrUnsupported, which the poller
// skips with a warning: Harvest answers 403 when the token's user lacks a
// right (invoices, estimates and rates need an administrator or manager),
// and 401 for a bad token. The cause is kept, but no longer as
// unauthorized: its text would say to check the token.
func (c *Client) forbidden(r clients.Resource, err error) error {
	var he *httpx.Error
	if !errors.As(err, &he) || he.Status != http.StatusForbidden {
		return err
	}
	cause := *he
	cause.Kind = httpx.KindStatus
	return fmt.Errorf("%s: %s: the token's user lacks the permission to list it (Harvest asks for an administrator or manager); use such a user's token or remove %s from the source's resources: %w: %w",
		c.name, r, r, clients.ErrUnsupported, &cause)
}

// pageURL is the listing's URL for page n (Harvest's page-style links).
func pageURL(first string, n int) string {
	u, err := url.Parse(first)
	if err != nil {
		return first
	}
	q := u.Query()
	q.Set("page", strconv.Itoa(n))
	u.RawQuery = q.Encode()
	return u.String()
}

// walkPage describes a page for the page walk. links.next with cursor= is
// keyset pagination (some Harvest endpoints moved to it): it cannot skip.
// The page size is the one served, which may be less than asked (Harvest
// served 100 a page in 2019): the envelope's per_page, else links.next's,
// else asked.
func walkPage(recs []clients.Record, env envelope, asked int, clock time.Time) pagewalk.Page {
	next, _ := url.Parse(env.next)
	size := env.perPage
	if size <= 0 && next != nil {
		size, _ = strconv.Atoi(next.Query().Get("per_page"))
	}
	if size <= 0 {
		size = asked
	}
	p := pagewalk.Page{
		IDs: make([]string, len(recs)), Total: env.totalEntries, TotalPages: env.totalPages,
		Size: size, More: env.next != "", Clock: clock,
	}
	p.CreatedKnown = true
	p.Versions = make([]time.Time, len(recs))
	p.Creations = make([]time.Time, len(recs))
	for i := range recs {
		p.IDs[i] = recs[i].ID
		p.Versions[i] = recs[i].Version
		p.Creations[i] = recs[i].CreatedAt
		if v := recs[i].Version; v.After(p.Newest) {
			p.Newest = v
		}
		if c := recs[i].CreatedAt; c.IsZero() {
			p.CreatedKnown = false
		} else if c.After(p.Created) {
			p.Created = c
		}
	}
	if next != nil && next.Query().Has("cursor") {
		p.Keyset = true
	}
	return p
}

func (c *Client) firstURL(r clients.Resource, w clients.Window) string {
	ep := EndpointOf(r)
	return c.endpointURL(ep.Path, c.query(ep, w))
}

// nestedURL is the first page of r's list under parent record id.
func (c *Client) nestedURL(r, parent clients.Resource, id string, w clients.Window) string {
	ep := EndpointOf(r)
	return c.endpointURL(EndpointOf(parent).Path+"/"+id+"/"+ep.Path, c.query(ep, w))
}

func (c *Client) query(ep Endpoint, w clients.Window) url.Values {
	q := url.Values{}
	q.Set("per_page", strconv.Itoa(c.perPage))
	if w.ByDate() {
		if !w.From.IsZero() {
			q.Set("from", w.From.String())
		}
		if !w.To.IsZero() {
			q.Set("to", w.To.String())
		}
	} else if !w.UpdatedSince.IsZero() && ep.Since {
		q.Set("updated_since", w.UpdatedSince.UTC().Format("2006-01-02T15:04:05Z"))
	}
	return q
}

func (c *Client) endpointURL(path string, q url.Values) string {
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + "/" + path
	u.RawQuery = q.Encode()
	return u.String()
}

// harvestBase is where Harvest's own links point, whatever base_url says.
var harvestBase, _ = url.Parse(DefaultBaseURL)

// resolveNext accepts a next link on the configured scheme and host, or on
// Harvest's (a proxy in base_url passes Harvest's bodies on as they are):
// those are followed on the configured base. Any other host is refused:
// following it would send the token to another server.
func (c *Client) resolveNext(link string) (string, error) {
	u, err := c.base.Parse(link)
	if err != nil {
		return "", fmt.Errorf("not a URL: %q", link)
	}
	if u.Scheme == c.base.Scheme && u.Host == c.base.Host {
		return u.String(), nil
	}
	if u.Host != harvestBase.Host {
		return "", fmt.Errorf("points to another host (%s://%s), not %s", u.Scheme, u.Host, c.base.Host)
	}
	rest, ok := strings.CutPrefix(u.Path, harvestBase.Path+"/")
	if !ok {
		return "", fmt.Errorf("points outside Harvest's API (%s)", u.Path)
	}
	on := *c.base
	on.Path, on.RawPath, on.RawQuery = strings.TrimRight(on.Path, "/")+"/"+rest, "", u.RawQuery
	return on.String(), nil
}
