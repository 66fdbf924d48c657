package toggl

import (
	"time"

	"github.com/tidemarkhq/tidemark/clients"
)

// DecodeEvent decodes the record a Toggl webhook event carries (its
// `payload`, the entity as API v9 renders it) the way a listing of r would,
// for `webhooks.apply`: the versioned write then takes it like any page,
// and the pass the event triggers confirms it. ok is false when the record
// cannot be decoded faithfully here: time entries before a pass has learnt
// the user's zone (GET /me) or with scope workspace (dated by the Reports
// API), and workspace users (no version stamp).
func (c *Client) DecodeEvent(r clients.Resource, payload []byte, fetched time.Time) (recs []clients.Record, ok bool, err error) {
	zone := time.UTC
	switch r {
	case clients.Users:
		return nil, false, nil
	case clients.TimeEntries:
		if c.scope != ScopeMe {
			return nil, false, nil
		}
		c.zoneMu.Lock()
		zone = c.zone
		c.zoneMu.Unlock()
		if zone == nil {
			return nil, false, nil
		}
	}
	body := make([]byte, 0, len(payload)+2)
	body = append(append(append(body, '['), payload...), ']')
	recs, _, err = c.dec.decodeListing(r, 0, body, fetched, c.SourceNow(), zone)
	if err != nil {
		return nil, false, err
	}
	return recs, true, nil
}
