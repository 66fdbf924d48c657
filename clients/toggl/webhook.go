package toggl

import (
	"encoding/json"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
)

// DecodeEvent decodes the record a Toggl webhook event carries (its
// `payload`, the entity as API v9 renders it) the way a listing of r would,
// for `webhooks.apply`: the versioned write then takes it like any page,
// and the pass the event triggers confirms it. ok is false when the record
// cannot be decoded faithfully here: time entries before a pass has learnt
// the user's zone and id (GET /me) or with scope workspace (dated by the
// Reports API), and workspace users (no version stamp). ok is false too for
// what the source's listings do not cover: in scope me, another user's
// time entry (a workspace subscription delivers every user's), which the
// me listings never return and a reconcile would tombstone again. Such an
// event still triggers a pass, which writes nothing of it.
func (c *Client) DecodeEvent(r clients.Resource, payload []byte, fetched time.Time) (recs []clients.Record, ok bool, err error) {
	zone, owner := time.UTC, ""
	switch r {
	case clients.Users:
		return nil, false, nil
	case clients.TimeEntries:
		if c.scope != ScopeMe {
			return nil, false, nil
		}
		c.zoneMu.Lock()
		zone, owner = c.zone, c.meID
		c.zoneMu.Unlock()
		if zone == nil || owner == "" {
			return nil, false, nil
		}
	}
	body := make([]byte, 0, len(payload)+2)
	body = append(append(append(body, '['), payload...), ']')
	recs, _, err = c.dec.decodeListing(r, 0, body, fetched, c.SourceNow(), zone)
	if err != nil {
		return nil, false, err
	}
	if owner != "" {
		// From the payload, not the row: a deletion may carry no row.
		var e struct {
			UserID json.Number `json:"user_id"`
		}
		if json.Unmarshal(payload, &e) != nil || string(e.UserID) != owner {
			return nil, false, nil
		}
	}
	return recs, true, nil
}
