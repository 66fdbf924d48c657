package harvest

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/pagewalk"
	"github.com/tidemarkhq/tidemark/clients/provider/listing"
	"github.com/tidemarkhq/tidemark/schema"
)

// entryHead is where a listing of time entries is cut (pagewalk.Anchored
// Head): yesterday's, today's and later entries (Harvest dates an entry in
// its user's zone), where new entries land, are read first, as the top of
// the listing; the walk then goes on from page 1 below them. Newest first
// costs nothing for an idle pass (one page: no cut) and one request for a
// longer listing; what is created at the head afterwards is newer than
// the listing's start, and the next incremental pass reads it.
func entryHead(today clients.Date) clients.Date { return today.AddDays(-1) }

// walkDated lists time entries over w by spent date under pagewalk.Anchored:
// page by page while the listing holds still, and on a shift from page 1
// again with `to` set to the last date known complete (re-anchoring), so a
// walk never starts over and never reads a page before again. updated_since
// (an incremental pass) is kept on every request. Pages are numbered from
// 1 across the whole listing; the last is marked Last only when last is
// set. A day that would not hold still ends the listing capped, but only
// after every other page was handed over. It returns how many pages it
// handed over and whether it ended well.
func (c *Client) walkDated(ctx context.Context, w clients.Window, last bool, send func(listing.Fetched) bool) (int, bool) {
	r := clients.TimeEntries
	ep := EndpointOf(r)
	a := &pagewalk.Anchored{What: string(r), Head: entryHead(clients.DateOf(c.now().UTC()))}
	n := 0
	// The page served last waits until the walk asks for another (then it
	// does not end the listing) or ends. It is handed over before that
	// request is sent, so that the walk reads one page ahead of fn, never
	// two.
	var pending *listing.Fetched
	flush := func() bool {
		if pending == nil {
			return true
		}
		f := *pending
		pending = nil
		return send(f)
	}
	var asked pagewalk.Query
	var next string
	err := a.Walk(ctx, []pagewalk.Span{{From: w.From, To: w.To}}, func(ctx context.Context, q pagewalk.Query) (pagewalk.KeyedPage, error) {
		if !flush() {
			return pagewalk.KeyedPage{}, context.Canceled
		}
		n++
		u := next
		if next == "" || q.From != asked.From || q.To != asked.To || q.Page != asked.Page+1 {
			v := c.query(ep, clients.Window{UpdatedSince: w.UpdatedSince})
			if !q.From.IsZero() {
				v.Set("from", q.From.String())
			}
			if !q.To.IsZero() {
				v.Set("to", q.To.String())
			}
			if q.Page > 1 {
				v.Set("page", strconv.Itoa(q.Page))
			}
			u = c.endpointURL(ep.Path, v)
		}
		asked, next = q, ""
		var recs []clients.Record
		var env envelope
		page := n
		resp, err := c.http.Do(ctx, httpx.Request{URL: u, Resource: string(r), Page: page,
			Decode: func(body []byte, received time.Time) (err error) {
				recs, env, err = c.dec.decodeUnder(r, "", page, body, received)
				return err
			}})
		if err != nil {
			return pagewalk.KeyedPage{}, c.forbidden(r, err)
		}
		if env.next != "" {
			if next, err = c.resolveNext(env.next); err != nil {
				return pagewalk.KeyedPage{}, c.dec.Errf(string(r), page, "links.next", err.Error(), nil)
			}
		}
		c.log.Debug().Str("resource", string(r)).Int("page", page).Int("records", len(recs)).Msg("page fetched")
		pending = &listing.Fetched{Page: clients.Page{Resource: r, Number: page, SourceTime: resp.Date, Records: recs}}
		return keyedPage(recs, env, c.perPage, resp.Date), nil
	})
	if err != nil {
		if !flush() || errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return n, false
		}
		send(listing.Fetched{Err: err})
		return n, false
	}
	if pending != nil {
		pending.Last = last
	}
	return n, flush()
}

// keyedPage describes a page of time entries for pagewalk.Anchored.
func keyedPage(recs []clients.Record, env envelope, asked int, clock time.Time) pagewalk.KeyedPage {
	p := walkPage(recs, env, asked, clock)
	k := pagewalk.KeyedPage{IDs: p.IDs, Versions: p.Versions, Created: p.Creations, Total: p.Total, TotalPages: p.TotalPages,
		Size: p.Size, More: p.More, Keyset: p.Keyset, Clock: clock, Keys: make([]clients.Date, len(recs))}
	for i := range recs {
		k.Keys[i], _ = recs[i].Row[schema.TE.SpentDate].(clients.Date)
	}
	return k
}
