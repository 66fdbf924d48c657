package webhooks

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
)

// Event is what a dialect reads from a verified delivery.
type Event struct {
	// Ping is Toggl's validation event; ValidationCode is to be echoed when
	// the subscription is not yet validated.
	Ping           bool
	ValidationCode string
	// Key identifies the change across resends (never a per-attempt id).
	Key string
	// Entity is the provider's name of what changed; Resource its mirrored
	// resource ("" when none).
	Entity   string
	Resource clients.Resource
	// Hash is SHA-256 of the body in canonical JSON.
	Hash []byte
	// Record is the changed entity as the event carries it, when its shape
	// is the API's (Toggl's payload), for webhooks.apply.
	Record json.RawMessage
	// CreatedAt is when the provider made the event (Toggl's created_at;
	// zero when not sent): Record's state is as of then, not of its late
	// arrival.
	CreatedAt time.Time
}

// Dialect is one provider's webhook dialect.
type Dialect interface {
	// Verify returns the index of the secret that signed the request, or
	// -1. Comparisons take constant time.
	Verify(h http.Header, body []byte, secrets []string) int
	// Parse reads a verified body.
	Parse(h http.Header, body []byte) (Event, error)
}

// DialectOf returns the dialect of a source kind, or nil when the kind
// sends no webhooks (Harvest has none).
func DialectOf(kind string) Dialect {
	switch kind {
	case "toggl":
		return Toggl{}
	case "clockify":
		return Clockify{}
	}
	return nil
}

// canonicalHash hashes the JSON value in canonical form (object keys
// sorted, no insignificant space, numbers as written), so that a resend
// formatted differently is still the same payload.
func canonicalHash(body []byte) ([]byte, any, error) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, nil, fmt.Errorf("body is not JSON: %w", err)
	}
	if d.More() {
		return nil, nil, errors.New("body holds more than one JSON value")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	sum := sha256.Sum256(b)
	return sum[:], v, nil
}

// ---- Toggl ------------------------------------------------------------------

// Toggl is Toggl Track's Webhooks API v1: X-Webhook-Signature-256 is
// "sha256=" + hex HMAC-SHA256(secret, raw body); event_id is stable across
// resends; a PING event (payload "ping") carries validation_code until the
// subscription is validated.
type Toggl struct{}

// TogglSignatureHeader is the header Toggl signs deliveries with.
const TogglSignatureHeader = "X-Webhook-Signature-256"

// TogglSign returns the header value Toggl sends for body.
func TogglSign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func (Toggl) Verify(h http.Header, body []byte, secrets []string) int {
	got, ok := strings.CutPrefix(h.Get(TogglSignatureHeader), "sha256=")
	if !ok {
		return -1
	}
	sig, err := hex.DecodeString(got)
	if err != nil || len(sig) != sha256.Size {
		return -1
	}
	found := -1
	for i, s := range secrets {
		m := hmac.New(sha256.New, []byte(s))
		m.Write(body)
		if hmac.Equal(m.Sum(nil), sig) && found < 0 {
			found = i
		}
	}
	return found
}

// togglEntities maps Toggl's entity names (metadata.model, event_filters)
// to mirrored resources.
var togglEntities = map[string]clients.Resource{
	"time_entry": clients.TimeEntries, "project": clients.Projects, "client": clients.Clients,
	"task": clients.Tasks, "workspace_user": clients.Users, "user": clients.Users,
}

// TogglEntity returns Toggl's entity name for a resource ("" when none).
func TogglEntity(r clients.Resource) string {
	for e, res := range togglEntities {
		if res == r && e != "user" {
			return e
		}
	}
	return ""
}

func (Toggl) Parse(_ http.Header, body []byte) (Event, error) {
	hash, _, err := canonicalHash(body)
	if err != nil {
		return Event{}, err
	}
	var ev struct {
		EventID        json.Number     `json:"event_id"`
		CreatedAt      string          `json:"created_at"`
		Payload        json.RawMessage `json:"payload"`
		ValidationCode string          `json:"validation_code"`
		Metadata       struct {
			Model string `json:"model"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		return Event{}, fmt.Errorf("toggl event: %w", err)
	}
	if string(bytes.TrimSpace(ev.Payload)) == `"ping"` {
		return Event{Ping: true, ValidationCode: ev.ValidationCode, Hash: hash}, nil
	}
	if ev.EventID == "" || ev.EventID == "0" {
		return Event{}, errors.New("toggl event: no event_id")
	}
	created, _ := time.Parse(time.RFC3339Nano, ev.CreatedAt) // zero when absent or unreadable
	return Event{Key: "toggl:" + ev.EventID.String(), Entity: ev.Metadata.Model,
		Resource: togglEntities[ev.Metadata.Model], Hash: hash, Record: ev.Payload, CreatedAt: created}, nil
}

// ---- Clockify ---------------------------------------------------------------

// Clockify's webhooks send the entity itself as the body, with the
// webhook's token in Clockify-Signature and the event in
// Clockify-Webhook-Event-Type. No event id is documented, so the key is
// derived from the change: the event type, the entity's id and its update
// stamp when the body has one (auditMetadata.updatedAt, changeDate), else a
// hash of its content (a time entry body carries no stamp: its content is
// what identifies the change).
type Clockify struct{}

// Clockify's headers.
const (
	ClockifySignatureHeader = "Clockify-Signature"
	ClockifyEventHeader     = "Clockify-Webhook-Event-Type"
)

func (Clockify) Verify(h http.Header, _ []byte, secrets []string) int {
	got := h.Get(ClockifySignatureHeader)
	if got == "" {
		got = h.Get("X-Clockify-Signature")
	}
	if got == "" {
		return -1
	}
	found := -1
	for i, s := range secrets {
		if subtle.ConstantTimeCompare([]byte(got), []byte(s)) == 1 && found < 0 {
			found = i
		}
	}
	return found
}

// ClockifyEvents are the events registered per mirrored resource.
var ClockifyEvents = map[clients.Resource][]string{
	clients.TimeEntries: {"NEW_TIME_ENTRY", "TIME_ENTRY_UPDATED", "TIME_ENTRY_DELETED", "TIMER_STOPPED"},
	clients.Projects:    {"NEW_PROJECT", "PROJECT_UPDATED", "PROJECT_DELETED"},
	clients.Clients:     {"NEW_CLIENT", "CLIENT_UPDATED", "CLIENT_DELETED"},
	clients.Tasks:       {"NEW_TASK", "TASK_UPDATED", "TASK_DELETED"},
	clients.Users:       {"USER_JOINED_WORKSPACE", "USER_UPDATED", "USER_DELETED_FROM_WORKSPACE"},
}

// ClockifyResource returns the resource a Clockify event is about.
func ClockifyResource(event string) clients.Resource {
	switch {
	case strings.Contains(event, "TIME_ENTRY"), strings.Contains(event, "TIMER"):
		return clients.TimeEntries
	case strings.Contains(event, "PROJECT"):
		return clients.Projects
	case strings.Contains(event, "CLIENT"):
		return clients.Clients
	case strings.Contains(event, "TASK"):
		return clients.Tasks
	case strings.Contains(event, "USER"):
		return clients.Users
	}
	return ""
}

func (Clockify) Parse(h http.Header, body []byte) (Event, error) {
	hash, v, err := canonicalHash(body)
	if err != nil {
		return Event{}, err
	}
	event := h.Get(ClockifyEventHeader)
	if event == "" {
		return Event{}, errors.New("clockify event: no " + ClockifyEventHeader + " header")
	}
	obj, _ := v.(map[string]any)
	if arr, ok := v.([]any); ok && len(arr) == 1 { // some bodies come wrapped
		obj, _ = arr[0].(map[string]any)
	}
	id, _ := obj["id"].(string)
	if id == "" {
		return Event{}, errors.New("clockify event: no entity id in the body")
	}
	stamp := ""
	if am, ok := obj["auditMetadata"].(map[string]any); ok {
		stamp, _ = am["updatedAt"].(string)
	}
	if stamp == "" {
		stamp, _ = obj["changeDate"].(string)
	}
	if stamp == "" {
		stamp = "h" + hex.EncodeToString(hash[:12])
	}
	return Event{Key: "clockify:" + event + ":" + id + ":" + stamp, Entity: event,
		Resource: ClockifyResource(event), Hash: hash}, nil
}
