package toggl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/provider"
	"github.com/tidemarkhq/tidemark/clients/provider/decode"
	"github.com/tidemarkhq/tidemark/schema"
)

// Scopes: whose time entries a source mirrors.
const (
	// ScopeMe is the token owner's entries (GET /me/time_entries): the
	// cheap mode for single-user accounts, and the default.
	ScopeMe = "me"
	// ScopeWorkspace is every user's entries of the workspace, from the
	// Reports API v3 detailed search.
	ScopeWorkspace = "workspace"
)

// Workspace-mode defaults.
const (
	// DefaultTrailingDays is how many days of spent dates (before today)
	// an incremental pass in workspace scope re-lists.
	DefaultTrailingDays = 14
	// ReportPageSize is the page_size asked of the detailed search. The
	// walk follows the next-page headers, so a server that serves fewer
	// per page is walked just the same.
	ReportPageSize = 200
	// MaxReportDays is the longest date range asked in one search; a
	// longer window is listed in consecutive ranges.
	MaxReportDays = 366
	// MaxReportPages bounds one search's page walk: a walk that has not
	// ended by then fails with clients.ErrCapped.
	MaxReportPages = 5000
	// ConfirmDays is how far either side of the window and of today an
	// entry absent from its window is looked for by id first, and the span
	// of each search back to the workspace's earliest entries (see
	// confirm); ConfirmBatch how many ids one such search names.
	ConfirmDays  = 365
	ConfirmBatch = 200
	// Header names of the detailed search's paging.
	HeaderNextID        = "X-Next-ID"
	HeaderNextRowNumber = "X-Next-Row-Number"
	HeaderNextTimestamp = "X-Next-Timestamp"
)

// ReportsEpoch is the earliest date the detailed search serves: Toggl
// started in 2006 and refuses earlier dates ("not in this century",
// toggl_api_docs #220). The workspace's earliest entries are looked for
// back to it: no entry can be dated where no search reaches.
var ReportsEpoch = clients.Date{Year: 2006, Month: 1, Day: 1}

// reportsBase derives the Reports API v3 root from the API v9 base URL:
// https://api.track.toggl.com/api/v9 → https://api.track.toggl.com/reports/api/v3
// (a base not ending in /api/v9 gets /reports/api/v3 appended).
func reportsBase(base string) string {
	b := strings.TrimRight(base, "/")
	b = strings.TrimSuffix(b, "/api/v9")
	return b + "/reports/api/v3"
}

// seenEntry is what the last complete workspace listing said of an entry.
type seenEntry struct {
	date    clients.Date
	version time.Time
}

// reportRowJSON is a row of the detailed search: the entry's attributes and
// its time_entries (one when not grouped).
type reportRowJSON struct {
	TagIDs      []json.Number     `json:"tag_ids"`
	TimeEntries []json.RawMessage `json:"time_entries"`
}

// reportEntryJSON is one time entry of a report row, flattened with the
// row's attributes (see flattenRows).
type reportEntryJSON struct {
	commonEntry
	Seconds json.Number   `json:"seconds"`
	TagIDs  []json.Number `json:"tag_ids"`
}

// flattenRows turns a search response (a JSON array of rows) into one JSON
// object per time entry: the row's fields without time_entries and
// row_number (a position, which moves whenever an earlier row comes or
// goes, and would change every later entry's content hash), with the
// entry's own fields (id, seconds, start, stop, at, at_tz) added. Keys are
// sorted, so the same content gives the same bytes. It also returns the
// tag ids the rows name.
func (d decoder) flattenRows(page int, body []byte) ([]json.RawMessage, []int64, error) {
	r := clients.TimeEntries
	var rows []json.RawMessage
	if err := json.Unmarshal(body, &rows); err != nil {
		field, what := decode.Describe(err)
		if t := decode.FirstByte(body); t != '[' && t != 0 && json.Valid(body) {
			what = "want an array of report rows, got " + decode.KindOf(body)
		}
		return nil, nil, d.Page(r, page, field, what, body)
	}
	if rows == nil {
		return nil, nil, d.Page(r, page, "", "want an array of report rows, got null", body)
	}
	var out []json.RawMessage
	var tags []int64
	for i, raw := range rows {
		var fields map[string]json.RawMessage
		if decode.FirstByte(raw) != '{' || json.Unmarshal(raw, &fields) != nil {
			return nil, nil, d.Elem(r, page, i, decode.Field("", "want a report row object, got "+decode.KindOf(raw)), raw)
		}
		var row reportRowJSON
		if fe := decode.Unmarshal(raw, &row); fe != nil {
			return nil, nil, d.Elem(r, page, i, fe, raw)
		}
		if len(row.TimeEntries) == 0 {
			return nil, nil, d.Elem(r, page, i, decode.Field("time_entries", "missing or empty: want the row's time entries"), raw)
		}
		for _, t := range row.TagIDs {
			n, err := strconv.ParseInt(string(t), 10, 64)
			if err != nil {
				return nil, nil, d.Elem(r, page, i, decode.Field("tag_ids", fmt.Sprintf("want integer ids, got %q", string(t))), raw)
			}
			tags = append(tags, n)
		}
		delete(fields, "time_entries")
		delete(fields, "row_number")
		for k, te := range row.TimeEntries {
			var own map[string]json.RawMessage
			if decode.FirstByte(te) != '{' || json.Unmarshal(te, &own) != nil {
				return nil, nil, d.Elem(r, page, i, decode.Field(fmt.Sprintf("time_entries[%d]", k), "want an object, got "+decode.KindOf(te)), raw)
			}
			flat := make(map[string]json.RawMessage, len(fields)+len(own))
			for f, v := range fields {
				flat[f] = v
			}
			for f, v := range own {
				flat[f] = v
			}
			b, err := json.Marshal(flat)
			if err != nil {
				return nil, nil, d.Elem(r, page, i, decode.Field(fmt.Sprintf("time_entries[%d]", k), err.Error()), raw)
			}
			out = append(out, b)
		}
	}
	return out, tags, nil
}

// decodeReport decodes flattened report entries. Each is dated at the
// offset its `start` carries (the zone Toggl's report applied), or, when
// that offset is UTC, in owner (the /me zone; see the package doc); tag ids
// become names through tags.
func (d decoder) decodeReport(page int, raws []json.RawMessage, fetched, clock time.Time, owner *time.Location, tags map[int64]string) ([]clients.Record, error) {
	recs := make([]clients.Record, len(raws))
	err := decode.Objects(d.Errors, clients.TimeEntries, schema.TimeEntries, page, raws, recs, fetched, func(j *reportEntryJSON, row []any, rec *clients.Record) *decode.FieldError {
		e := entryJSON{commonEntry: j.commonEntry, Duration: j.Seconds}
		if j.Stop == nil || *j.Stop == "" {
			e.Duration = "-1" // a running timer: hours to the source's clock
		}
		if j.Seconds == "" && e.Duration == "" {
			return decode.Missing("seconds")
		}
		if j.TagIDs != nil {
			e.Tags = make([]string, 0, len(j.TagIDs))
			for _, t := range j.TagIDs {
				n, _ := strconv.ParseInt(string(t), 10, 64)
				name, ok := tags[n]
				if !ok {
					return decode.Field("tag_ids", fmt.Sprintf("tag %d is not among the workspace's tags", n))
				}
				e.Tags = append(e.Tags, name)
			}
		}
		return entry(&e, row, rec, clock, entryZone(j.Start, owner))
	})
	if err != nil {
		return nil, err
	}
	return recs, nil
}

// entryZone is the zone a report entry is dated in: the offset of its
// `start` as the report wrote it, named by owner when owner has that offset
// at that instant ("+02:00" otherwise); a UTC offset means the report gave
// no zone, and owner (the /me zone) is used.
func entryZone(start *string, owner *time.Location) *time.Location {
	if owner == nil {
		owner = time.UTC
	}
	if start == nil {
		return owner
	}
	t, err := time.Parse(time.RFC3339, *start)
	if err != nil {
		return owner
	}
	_, off := t.Zone()
	if off == 0 {
		return owner
	}
	if _, o := t.In(owner).Zone(); o == off {
		return owner
	}
	return time.FixedZone(t.Format("-07:00"), off)
}

var _ clients.Scoper = (*Client)(nil)

// ListScope implements clients.Scoper: a workspace-scope listing covers
// every user's time entries. A me-scope listing is the token owner's only,
// but the owner's id is not known before /me is asked, so it says nothing
// more (every user) as before.
func (c *Client) ListScope(r clients.Resource, w clients.Window) clients.Scope {
	return clients.Scope{}
}

// Scope returns the source's scope (ScopeMe or ScopeWorkspace).
func (c *Client) Scope() string { return c.scope }

// reportWindow is the spent-date range a workspace listing of w covers: w's
// own range by date; for an incremental window the trailing TrailingDays
// before the source's today to tomorrow (zones ahead of UTC), widened back
// to the day before UpdatedSince when that is older; the first sync (zero
// UpdatedSince) covers what the me scope's first sync does (MaxSinceAge).
func (c *Client) reportWindow(w clients.Window) (clients.Date, clients.Date, error) {
	if w.ByDate() {
		if w.From.IsZero() || w.To.IsZero() {
			return clients.Date{}, clients.Date{}, fmt.Errorf("%s: time_entries by spent date needs both from and to: %w", c.name, clients.ErrUnsupported)
		}
		return w.From, w.To, nil
	}
	today := clients.DateOf(c.SourceNow().UTC())
	from := today.AddDays(-c.trailing)
	switch {
	case w.UpdatedSince.IsZero():
		from = today.AddDays(-int(MaxSinceAge / (24 * time.Hour)))
	default:
		if d := clients.DateOf(w.UpdatedSince.UTC()).AddDays(-1); d.Before(from) {
			from = d
		}
	}
	return from, today.AddDays(1), nil
}

// listReport lists every user's time entries of the window from the
// detailed search, range by range, page by page. When the whole listing
// was complete, entries the previous complete listing of the same spent
// dates returned and this one did not are handed over as tombstones (see
// the package doc); a failed or capped listing tombstones nothing.
func (c *Client) listReport(ctx context.Context, w clients.Window, fn func(context.Context, clients.Page) error) error {
	from, to, err := c.reportWindow(w)
	if err != nil {
		return err
	}
	l := &reportLister{c: c, fn: fn, listed: map[string]seenEntry{}}
	for start := from; !start.After(to); {
		end := start.AddDays(MaxReportDays - 1)
		if end.After(to) {
			end = to
		}
		if err := l.search(ctx, start, end); err != nil {
			return err
		}
		start = end.AddDays(1)
	}
	return l.finish(ctx, from, to)
}

// reportLister walks the detailed search.
type reportLister struct {
	c      *Client
	fn     func(context.Context, clients.Page) error
	page   int
	listed map[string]seenEntry // entries handed over, by id
	last   time.Time            // the last response's Date
	tagsOK bool                 // the tags were listed during this listing
}

// searchBody is the detailed search's request body.
type searchBody struct {
	StartDate string `json:"start_date"`
	EndDate   string `json:"end_date"`
	PageSize  int    `json:"page_size"`
	// TimeEntryIDs filters the search to these entries (the confirmation
	// of absences, see finish).
	TimeEntryIDs   []int64 `json:"time_entry_ids,omitempty"`
	FirstID        *int64  `json:"first_id,omitempty"`
	FirstRowNumber *int64  `json:"first_row_number,omitempty"`
	FirstTimestamp *int64  `json:"first_timestamp,omitempty"`
}

// search lists the entries spent from..to. It asks a day wider on each
// side (the report applies each user's zone, and end_date "should be
// greater than" start_date) and keeps the entries whose spent_date is in
// from..to.
func (l *reportLister) search(ctx context.Context, from, to clients.Date) error {
	body := searchBody{StartDate: from.AddDays(-1).String(), EndDate: to.AddDays(1).String(), PageSize: l.c.reportSize}
	return l.walk(ctx, body, func(d clients.Date) bool { return !d.Before(from) && !d.After(to) })
}

// walk pages through one detailed search, handing over its entries and
// noting those whose spent_date keep accepts as listed.
func (l *reportLister) walk(ctx context.Context, body searchBody, keep func(clients.Date) bool) error {
	c := l.c
	u := reportsBase(c.base.String()) + "/workspace/" + strconv.FormatInt(c.wid, 10) + "/search/time_entries"
	seenCursor := map[string]bool{}
	for n := 1; ; n++ {
		if n > MaxReportPages {
			return fmt.Errorf("%s time_entries: %w: the detailed search of %s..%s had more than %d pages", c.name, clients.ErrCapped, body.StartDate, body.EndDate, MaxReportPages)
		}
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		l.page++
		resp, err := c.http.Do(ctx, httpx.Request{Method: http.MethodPost, URL: u, Body: b,
			Header:   http.Header{"Content-Type": {"application/json"}},
			Resource: string(clients.TimeEntries), Page: l.page})
		if err != nil {
			var he *httpx.Error
			if errors.As(err, &he) && he.Status == http.StatusForbidden {
				return fmt.Errorf("%s time_entries: the workspace's detailed report (scope: workspace) is not available to this token (%d): use a workspace admin's token, or scope: me: %w", c.name, he.Status, err)
			}
			return err
		}
		clock := c.observe(resp)
		l.last = resp.Date
		recs, err := l.decode(ctx, resp, clock)
		if err != nil {
			return err
		}
		// Every entry is handed over (those dated just outside the window
		// too: a stored row dated inside whose entry moved out is then
		// rewritten, not tombstoned); the ones inside are noted as listed.
		for _, rec := range recs {
			if d := schema.At[clients.Date](&rec, schema.TE.SpentDate); keep(d) {
				l.listed[rec.ID] = seenEntry{date: d, version: rec.Version}
			}
		}
		c.log.Debug().Str("resource", string(clients.TimeEntries)).Int("page", l.page).Int("records", len(recs)).Msg("report page fetched")
		if err := l.fn(ctx, clients.Page{Resource: clients.TimeEntries, Number: l.page, SourceTime: resp.Date, Records: recs}); err != nil {
			return err
		}
		next := func(h string) (*int64, error) {
			v := strings.TrimSpace(resp.Header.Get(h))
			if v == "" {
				return nil, nil
			}
			x, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, c.dec.Errf(string(clients.TimeEntries), l.page, h, fmt.Sprintf("want an integer, got %q", v), nil)
			}
			return &x, nil
		}
		id, err := next(HeaderNextID)
		if err != nil {
			return err
		}
		row, err := next(HeaderNextRowNumber)
		if err != nil {
			return err
		}
		if row != nil {
			if fe := decode.Count(HeaderNextRowNumber, *row); fe != nil {
				return c.dec.Errf(string(clients.TimeEntries), l.page, fe.Field, fe.What, nil)
			}
		}
		ts, err := next(HeaderNextTimestamp)
		if err != nil {
			return err
		}
		if id == nil && row == nil {
			return nil
		}
		key := fmt.Sprint(deref(id), "/", deref(row), "/", deref(ts))
		if seenCursor[key] {
			return fmt.Errorf("%w (%w)", c.dec.Errf(string(clients.TimeEntries), l.page, HeaderNextRowNumber, "the next-page headers repeat an earlier page's: the walk would not end", nil), clients.ErrCapped)
		}
		seenCursor[key] = true
		body.FirstID, body.FirstRowNumber, body.FirstTimestamp = id, row, ts
	}
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// decode flattens and decodes one search response, listing the tags first
// when a row names one not known yet.
func (l *reportLister) decode(ctx context.Context, resp *httpx.Response, clock time.Time) ([]clients.Record, error) {
	c := l.c
	raws, tagIDs, err := c.dec.flattenRows(l.page, resp.Body)
	if err != nil {
		return nil, err
	}
	tags := c.knownTags()
	for _, t := range tagIDs {
		if _, ok := tags[t]; ok {
			continue
		}
		if !l.tagsOK {
			if tags, err = c.listTags(ctx); err != nil {
				return nil, err
			}
			l.tagsOK = true
		}
		if _, ok := tags[t]; !ok {
			// Not among the workspace's tags even just listed (a tag
			// deleted meanwhile): named by its id rather than failing
			// every pass.
			c.log.Warn().Int64("tag_id", t).Msg("a report row names a tag the workspace's tags do not: kept as its id")
			tags = c.addTag(t, strconv.FormatInt(t, 10))
		}
	}
	owner, err := c.userZone(ctx)
	if err != nil {
		return nil, err
	}
	return c.dec.decodeReport(l.page, raws, resp.ReceivedAt, clock, owner, tags)
}

// finish hands over the tombstones of a complete listing of from..to:
// entries the previous complete listing dated in from..to that this one
// did not return at all. Each keeps the version last seen (so that any
// later state of the entry, say one moved out of the window and listed by
// a reconcile, wins over it) and is stamped deleted at the listing's
// clock. Then the memory of from..to is replaced by this listing.
func (l *reportLister) finish(ctx context.Context, from, to clients.Date) error {
	c := l.c
	c.wsMu.Lock()
	var absent []int64
	for id, s := range c.seen {
		if _, ok := l.listed[id]; !ok && !s.date.Before(from) && !s.date.After(to) {
			n, _ := strconv.ParseInt(id, 10, 64)
			absent = append(absent, n)
		}
	}
	c.wsMu.Unlock()
	if err := l.confirm(ctx, from, to, absent); err != nil {
		return err
	}
	c.wsMu.Lock()
	defer c.wsMu.Unlock()
	del := l.last
	if del.IsZero() {
		del = c.SourceNow()
	}
	del = del.UTC()
	var gone []clients.Record
	if c.seen != nil {
		for id, s := range c.seen {
			if s.date.Before(from) || s.date.After(to) {
				continue
			}
			if _, ok := l.listed[id]; ok {
				continue
			}
			raw, _ := json.Marshal(map[string]any{"id": json.Number(id), "server_deleted_at": nil,
				"tidemark_absent": map[string]string{"from": from.String(), "to": to.String(), "listed_at": del.Format(time.RFC3339)}})
			at := del
			gone = append(gone, clients.Record{ID: id, Version: s.version, FetchedAt: time.Now(), DeletedAt: &at, Raw: raw})
		}
	}
	if len(gone) > 0 {
		l.page++
		c.log.Info().Int("tombstones", len(gone)).Stringer("from", from).Stringer("to", to).
			Msg("time entries gone from the detailed report of their spent dates: tombstoned")
		if err := l.fn(ctx, clients.Page{Resource: clients.TimeEntries, Number: l.page, SourceTime: l.last, Records: gone}); err != nil {
			return err
		}
	}
	if c.seen == nil {
		c.seen = map[string]seenEntry{}
	}
	for id, s := range c.seen {
		if !s.date.Before(from) && !s.date.After(to) {
			delete(c.seen, id)
		}
	}
	for id, s := range l.listed {
		c.seen[id] = s
	}
	return nil
}

// confirm looks up by id the entries absent from a complete listing of
// from..to: one may have been moved to another day rather than deleted.
// It asks for them wherever they can have been moved and hands over as
// live, noted as listed, whatever comes back. "Not found" must mean looked
// for everywhere: a moved entry tombstoned would read deleted until its
// new day is listed again. First a year either side of the window and of
// today (confirmRanges), where moves land; an id still missing is then
// looked for a year a search back to the workspace's earliest year with
// entries (olderRanges): a few searches for a workspace of a few years.
func (l *reportLister) confirm(ctx context.Context, from, to clients.Date, absent []int64) error {
	slices.Sort(absent)
	today := clients.DateOf(l.c.SourceNow().UTC())
	near := confirmRanges(from, to, today)
	if err := l.confirmIn(ctx, near, &absent); err != nil || len(absent) == 0 {
		return err
	}
	floor, err := l.c.firstYear(ctx, near[len(near)-1][0])
	if err != nil {
		return err
	}
	return l.confirmIn(ctx, olderRanges(near[len(near)-1][0], floor), &absent)
}

// confirmIn searches ranges for the ids in absent, a batch at a time, and
// leaves in absent those not found.
func (l *reportLister) confirmIn(ctx context.Context, ranges [][2]clients.Date, absent *[]int64) error {
	var missing []int64
	for rest := *absent; len(rest) > 0; {
		batch := slices.Clone(rest[:min(len(rest), ConfirmBatch)])
		rest = rest[len(batch):]
		for _, rg := range ranges {
			if len(batch) == 0 {
				break
			}
			body := searchBody{StartDate: rg[0].String(), EndDate: rg[1].String(), PageSize: l.c.reportSize, TimeEntryIDs: batch}
			if err := l.walk(ctx, body, func(clients.Date) bool { return true }); err != nil {
				return err
			}
			// Found ids are not asked for again.
			batch = slices.DeleteFunc(batch, func(id int64) bool { _, ok := l.listed[strconv.FormatInt(id, 10)]; return ok })
		}
		missing = append(missing, batch...)
	}
	*absent = missing
	return nil
}

var _ clients.Confirmer = (*Client)(nil)

// Confirm implements clients.Confirmer in workspace scope: the stored
// entries a reconcile's listing of w did not return are looked up by id
// as finish looks up those this process listed before (after a restart or
// a hand-over, it remembers none). The me scope cannot look an entry up
// outside its listing's dates: ErrUnsupported.
func (c *Client) Confirm(ctx context.Context, r clients.Resource, w clients.Window, ids []string, fn func(context.Context, clients.Page) error) error {
	if c.scope != ScopeWorkspace || r != clients.TimeEntries {
		return fmt.Errorf("%s %s: looking up by id: %w", c.name, r, clients.ErrUnsupported)
	}
	from, to, err := c.reportWindow(w)
	if err != nil {
		return err
	}
	absent := make([]int64, len(ids))
	for i, id := range ids {
		if absent[i], err = strconv.ParseInt(id, 10, 64); err != nil {
			return fmt.Errorf("%s time_entries: cannot look up id %q: want Toggl's integer id", c.name, id)
		}
	}
	l := &reportLister{c: c, fn: fn, listed: map[string]seenEntry{}}
	return l.confirm(ctx, from, to, absent)
}

// confirmRanges are the date ranges (inclusive, each at most the search's
// longest) an absent entry of a listing of from..to is looked for by id in
// first: ConfirmDays either side of the window and of today, the range
// before the window's end first (where a back-dated entry is), then later
// days (an entry moved forward, also past tomorrow), then earlier ones. The
// last range's start is where olderRanges go on.
func confirmRanges(from, to, today clients.Date) [][2]clients.Date {
	lo, hi := from, to
	if today.Before(lo) {
		lo = today
	}
	if today.After(hi) {
		hi = today
	}
	lo, hi = lo.AddDays(-ConfirmDays), hi.AddDays(ConfirmDays)
	if lo.Before(ReportsEpoch) {
		lo = ReportsEpoch
	}
	first := [2]clients.Date{to.AddDays(1 - ConfirmDays), to.AddDays(1)}
	if first[0].Before(lo) {
		first[0] = lo
	}
	out := [][2]clients.Date{first}
	for s := first[1].AddDays(1); !s.After(hi); s = s.AddDays(ConfirmDays) {
		e := s.AddDays(ConfirmDays - 1)
		if e.After(hi) {
			e = hi
		}
		out = append(out, [2]clients.Date{s, e})
	}
	return append(out, olderRanges(first[0], lo)...)
}

// olderRanges are the ranges of ConfirmDays before day, back to floor.
func olderRanges(day, floor clients.Date) [][2]clients.Date {
	var out [][2]clients.Date
	for e := day.AddDays(-1); !e.Before(floor); e = e.AddDays(-ConfirmDays) {
		s := e.AddDays(1 - ConfirmDays)
		if s.Before(floor) {
			s = floor
		}
		out = append(out, [2]clients.Date{s, e})
	}
	return out
}

// firstYearTTL is how long the workspace's earliest year is trusted: an
// entry moved before it afterwards is found once it is learnt again.
const firstYearTTL = 24 * time.Hour

// firstYear returns the first day of the earliest year range before below
// that holds any entry of the workspace (below itself when none does),
// learnt by one search of one row a year back to ReportsEpoch (about 20,
// once a day at most, and only when an id is missing from every range a
// year either side). Years before it hold no entry to find.
func (c *Client) firstYear(ctx context.Context, below clients.Date) (clients.Date, error) {
	c.wsMu.Lock()
	first, at := c.first, c.firstAt
	c.wsMu.Unlock()
	if !first.IsZero() && time.Since(at) < firstYearTTL {
		return first, nil
	}
	first = below
	for _, rg := range olderRanges(below, ReportsEpoch) {
		found, err := c.anyEntry(ctx, rg)
		if err != nil {
			return clients.Date{}, err
		}
		if found {
			first = rg[0]
		}
	}
	c.wsMu.Lock()
	c.first, c.firstAt = first, time.Now()
	c.wsMu.Unlock()
	return first, nil
}

// anyEntry reports whether the detailed search of rg serves any row.
func (c *Client) anyEntry(ctx context.Context, rg [2]clients.Date) (bool, error) {
	u := reportsBase(c.base.String()) + "/workspace/" + strconv.FormatInt(c.wid, 10) + "/search/time_entries"
	b, err := json.Marshal(searchBody{StartDate: rg[0].String(), EndDate: rg[1].String(), PageSize: 1})
	if err != nil {
		return false, err
	}
	resp, err := c.http.Do(ctx, httpx.Request{Method: http.MethodPost, URL: u, Body: b,
		Header: http.Header{"Content-Type": {"application/json"}}, Resource: string(clients.TimeEntries), Page: 1})
	if err != nil {
		return false, fmt.Errorf("%s time_entries: looking for the workspace's earliest entries (%s..%s): %w", c.name, rg[0], rg[1], err)
	}
	c.observe(resp)
	raws, _, err := c.dec.flattenRows(1, resp.Body)
	if err != nil {
		return false, err
	}
	return len(raws) > 0, nil
}

// knownTags returns the tag names learnt so far.
func (c *Client) knownTags() map[int64]string {
	c.wsMu.Lock()
	defer c.wsMu.Unlock()
	return c.tags
}

// addTag names tag id and returns the names known (a copy).
func (c *Client) addTag(id int64, name string) map[int64]string {
	c.wsMu.Lock()
	defer c.wsMu.Unlock()
	tags := make(map[int64]string, len(c.tags)+1)
	for k, v := range c.tags {
		tags[k] = v
	}
	tags[id] = name
	c.tags = tags
	return tags
}

// tagJSON is an element of GET /workspaces/{wid}/tags.
type tagJSON struct {
	ID   json.Number `json:"id"`
	Name string      `json:"name"`
}

// listTags lists the workspace's tags (GET /workspaces/{wid}/tags, a bare
// array of {id, name, …}): report rows name tags by id only.
func (c *Client) listTags(ctx context.Context) (map[int64]string, error) {
	resp, err := c.http.Do(ctx, httpx.Request{URL: c.url("/workspaces/"+strconv.FormatInt(c.wid, 10)+"/tags", nil), Resource: "tags", Page: 1})
	if err != nil {
		return nil, fmt.Errorf("%s time_entries: the workspace's tag names (report rows carry tag ids only): %w", c.name, err)
	}
	c.observe(resp)
	var list []tagJSON
	if err := json.Unmarshal(resp.Body, &list); err != nil {
		field, what := decode.Describe(err)
		return nil, c.dec.Errf("tags", 1, field, what, resp.Body)
	}
	tags := make(map[int64]string, len(list))
	for i, t := range list {
		n, err := strconv.ParseInt(string(t.ID), 10, 64)
		if err != nil {
			return nil, c.dec.Errf("tags", 1, fmt.Sprintf("[%d].id", i), fmt.Sprintf("want an integer id, got %q", string(t.ID)), resp.Body)
		}
		tags[n] = t.Name
	}
	c.wsMu.Lock()
	c.tags = tags
	c.wsMu.Unlock()
	return tags, nil
}

// checkScope validates (and defaults) the scope and trailing_days keys of a
// toggl source, naming the key at fault.
func checkScope(s *provider.Settings) *provider.FieldError {
	switch s.Scope {
	case "":
		s.Scope = ScopeMe
	case ScopeMe, ScopeWorkspace:
	default:
		return provider.Fieldf(provider.KeyScope, "%q: want %s (the token owner's entries, /me/time_entries) or %s (every user's, the Reports API v3 detailed search)",
			s.Scope, ScopeMe, ScopeWorkspace)
	}
	switch {
	case s.TrailingDays == 0:
		s.TrailingDays = DefaultTrailingDays
	case s.TrailingDays < 1 || s.TrailingDays > MaxReportDays:
		return provider.Fieldf(provider.KeyTrailingDays, "%d: want 1 to %d days", s.TrailingDays, MaxReportDays)
	}
	if s.Scope == ScopeMe && s.TrailingDays != DefaultTrailingDays {
		return provider.Fieldf(provider.KeyTrailingDays, "applies to scope: %s only (scope %s lists what changed since the cursor)", ScopeWorkspace, ScopeMe)
	}
	return nil
}
