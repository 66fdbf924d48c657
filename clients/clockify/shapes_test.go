package clockify

import (
	"encoding/json"
	"errors"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/schema"
	"strings"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
)

// Fixtures of the shapes real Clockify bodies have (see the package doc):
// written for these tests, with made-up ids and values.

// zonedEntry: a 2026 listing element with a numeric duration (seconds),
// start/end with a +02:00 offset and the extra zone fields, no clientId.
const zonedEntry = `{"id":"6b00000000000000000000a1","description":"","tagIds":[],"userId":"6b00000000000000000000b1",` +
	`"billable":true,"taskId":null,"projectId":"6b00000000000000000000c1","workspaceId":"6b00000000000000000000d1",` +
	`"timeInterval":{"start":"2026-08-04T00:29:15+02:00","offStart":7200,"offEnd":7200,"end":"2026-08-04T00:29:19+02:00",` +
	`"duration":4,"timeZone":"Europe/Belgrade","zonedStart":"2026-08-04T00:29:15","zonedEnd":"2026-08-04T00:29:19"},` +
	`"customFieldValues":[],"type":"REGULAR","kioskId":null,"hourlyRate":{"amount":15000,"currency":"USD"},` +
	`"costRate":{"amount":0,"currency":"USD"},"isLocked":false}`

// plainEntry: a non-hydrated listing element with an ISO duration, UTC
// stamps, tagIds null, and no clientId.
const plainEntry = `{"id":"6b00000000000000000000a2","description":"review","tagIds":null,"userId":"6b00000000000000000000b2",` +
	`"billable":false,"taskId":null,"projectId":"6b00000000000000000000c2","workspaceId":"6b00000000000000000000d1",` +
	`"timeInterval":{"start":"2026-07-09T22:30:00Z","end":"2026-07-10T01:30:00Z","duration":"PT3H"},` +
	`"customFieldValues":[],"type":"REGULAR","kioskId":null,"hourlyRate":{"amount":0,"currency":"USD"},` +
	`"costRate":{"amount":0,"currency":"USD"},"isLocked":false}`

// hydratedEntry: hydrated=true carries the user (with settings.timeZone),
// the project (with clientId) and tag objects with names.
const hydratedEntry = `{"id":"6b00000000000000000000a3","description":"call","tags":[{"id":"6b00000000000000000000e1","name":"urgent","workspaceId":"6b00000000000000000000d1","archived":false}],` +
	`"user":{"id":"6b00000000000000000000b3","name":"Ann","settings":{"weekStart":"MONDAY","timeZone":"Australia/Sydney"},"status":"ACTIVE"},` +
	`"userId":"6b00000000000000000000b3","billable":true,"task":null,` +
	`"project":{"id":"6b00000000000000000000c3","name":"P","clientId":"6b00000000000000000000f3","clientName":"C"},` +
	`"timeInterval":{"start":"2023-08-27T20:00:00Z","end":"2023-08-27T22:54:00Z","duration":"PT2H54M"},` +
	`"workspaceId":"6b00000000000000000000d1","taskId":null,"tagIds":["6b00000000000000000000e1"],"projectId":"6b00000000000000000000c3","isLocked":false}`

func decodeOne(t *testing.T, d decoder, body string) clients.Record {
	t.Helper()
	recs, err := d.decodeList(clients.TimeEntries, 1, []byte("["+body+"]"), time.Unix(5, 0), time.Unix(7, 0))
	if err != nil {
		t.Fatal(err)
	}
	return recs[0]
}

func TestDecodeRealShapes(t *testing.T) {
	t.Parallel()
	d := newDecoder("acme", nil)
	// Numeric duration, offset stamps, extra fields; dated in the entry's
	// own zone (00:29 in Belgrade is the 4th, 22:29 UTC the 3rd).
	r := decodeOne(t, d, zonedEntry)
	start := time.Date(2026, 8, 3, 22, 29, 15, 0, time.UTC)
	if te.Decimal(r, "hours") != "0.001111" || te.Date(r, "spent_date") != (clients.Date{Year: 2026, Month: 8, Day: 4}) ||
		te.Text(r, "time_zone") != "Europe/Belgrade" {
		t.Errorf("zoned entry row %#v", r.Row)
	}
	if got := r.Row[schema.TE.Started]; got != start {
		t.Errorf("started_at %v, want %v", got, start)
	}
	if got := r.Row[schema.TE.Ended]; got != start.Add(4*time.Second) {
		t.Errorf("ended_at %v", got)
	}
	if got, _ := r.Row[schema.TE.Tags].(json.RawMessage); string(got) != `[]` {
		t.Errorf("tags %s, want []", got)
	}
	// Fractional seconds as a number too.
	r = decodeOne(t, d, strings.Replace(zonedEntry, `"duration":4,`, `"duration":5400.5,`, 1))
	if te.Decimal(r, "hours") != "1.500139" {
		t.Errorf("hours %s", te.Decimal(r, "hours"))
	}
	// ISO text, no zone anywhere: UTC, tagIds null → tags null, no client.
	r = decodeOne(t, d, plainEntry)
	if te.Decimal(r, "hours") != "3" || te.Date(r, "spent_date") != (clients.Date{Year: 2026, Month: 7, Day: 9}) ||
		te.Text(r, "time_zone") != "UTC" || r.Row[schema.TE.Tags] != nil || r.Row[schema.TE.Client] != nil {
		t.Errorf("plain entry row %#v", r.Row)
	}
	// Hydrated: the user's zone, the project's client, tag names.
	r = decodeOne(t, d, hydratedEntry)
	if te.Date(r, "spent_date") != (clients.Date{Year: 2023, Month: 8, Day: 28}) || te.Text(r, "time_zone") != "Australia/Sydney" ||
		te.Text(r, "client_id") != "6b00000000000000000000f3" {
		t.Errorf("hydrated entry row %#v", r.Row)
	}
	if got, _ := r.Row[schema.TE.Tags].(json.RawMessage); string(got) != `["urgent"]` {
		t.Errorf("tags %s, want names", got)
	}
	// Running: no end, ended_at null.
	r = decodeOne(t, d, strings.Replace(zonedEntry, `"end":"2026-08-04T00:29:19+02:00","duration":4`, `"end":null,"duration":null`, 1))
	if r.Row[schema.TE.Ended] != nil || !te.Bool(r, "is_running") {
		t.Errorf("running row %#v", r.Row)
	}
}

// The change feed as live probes saw it: created/updated elements are the
// entity itself plus documentCode and auditMetadata, with no top-level
// stamp; a deletion names the entity in document._id.
func TestDecodeLiveFeedShape(t *testing.T) {
	t.Parallel()
	d := newDecoder("acme", nil)
	live := strings.Replace(zonedEntry, `"isLocked":false}`, `"isLocked":false,"documentCode":"TIME_ENTRY",`+
		`"auditMetadata":{"createdAt":"2026-08-03T22:29:20Z","updatedAt":"2026-08-03T22:31:00.250Z"}}`, 1)
	recs, n, err := d.decodeFeed(feedCreated, 1, []byte("["+live+"]"), time.Unix(7, 0))
	if err != nil || n != 1 {
		t.Fatal(err, n)
	}
	r := recs[0]
	if r.ID != "6b00000000000000000000a1" || !r.Version.Equal(time.Date(2026, 8, 3, 22, 31, 0, 250e6, time.UTC)) || string(r.Raw) != live ||
		te.Decimal(r, "hours") != "0.001111" || r.DeletedAt != nil {
		t.Fatalf("created %+v", r)
	}
	recs, _, err = d.decodeFeed(feedUpdated, 1, []byte("["+live+"]"), time.Unix(7, 0))
	if err != nil || !recs[0].Version.Equal(time.Date(2026, 8, 3, 22, 31, 0, 250e6, time.UTC)) {
		t.Fatalf("updated %v %+v", err, recs)
	}
	noStamp := strings.Replace(live, `"updatedAt":"2026-08-03T22:31:00.250Z"`, `"x":1`, 1)
	_, _, err = d.decodeFeed(feedUpdated, 1, []byte("["+noStamp+"]"), time.Unix(7, 0))
	if err == nil || !strings.Contains(err.Error(), "auditMetadata.updatedAt: missing") || errors.Is(err, errShape) {
		t.Fatalf("missing stamp: %v", err)
	}
	del := `{"deletedAt":"2026-08-04T10:00:00.071Z","document":{"_id":"6b00000000000000000000a1","auditMetadata":{},` +
		`"workspaceId":"6b00000000000000000000d1"},"documentCode":"TIME_ENTRY","id":"6b00000000000000000000ff"}`
	recs, _, err = d.decodeFeed(feedDeleted, 1, []byte("["+del+"]"), time.Unix(7, 0))
	if err != nil || recs[0].ID != "6b00000000000000000000a1" || recs[0].DeletedAt == nil {
		t.Fatalf("deleted %v %+v", err, recs)
	}
	// Shapes it does not know are marked, so that the client falls back.
	for _, body := range []string{`["6b00000000000000000000a1"]`, `[{"id":"x","createdAt":"2026-08-03T22:29:20Z"}]`, `{"items":[]}`} {
		_, _, err := d.decodeFeed(feedCreated, 1, []byte(body), time.Unix(7, 0))
		if !errors.Is(err, errShape) || !errors.Is(err, httpx.ErrDecode) {
			t.Errorf("%s: %v, want an unknown-shape decode error", body, err)
		}
	}
}
