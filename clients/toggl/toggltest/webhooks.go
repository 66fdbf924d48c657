package toggltest

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
)

// The Webhooks API v1 (https://api.track.toggl.com/webhooks/api/v1), as
// documented: subscriptions per workspace with event_filters {entity,
// action}; a subscription receives events once enabled and validated, and
// it is validated by answering a PING event with its validation_code
// (POST /ping/{wid}/{sid} sends one again); every delivery is signed with
// X-Webhook-Signature-256: sha256=hex(HMAC-SHA256(secret, raw body)); a
// failed delivery is retried and a delivered one is sometimes sent again
// (the kit's Hooks), always with the same event_id and body.
//
// What it assumes where the documentation is silent: the retry schedule
// (HookOptions); event_ids count up per server; the PING's event_id is 0.

// WebhooksBase is the Webhooks API's path on the fake.
const WebhooksBase = "/webhooks/api/v1"

// Subscription is a webhook subscription as the fake keeps it.
type Subscription struct {
	ID          int64         `json:"subscription_id"`
	WorkspaceID int64         `json:"workspace_id"`
	UserID      int64         `json:"user_id"`
	Enabled     bool          `json:"enabled"`
	Description string        `json:"description"`
	Filters     []EventFilter `json:"event_filters"`
	URL         string        `json:"url_callback"`
	Secret      string        `json:"secret"`
	ValidatedAt *time.Time    `json:"validated_at"`
	CreatedAt   time.Time     `json:"created_at"`
	Pending     bool          `json:"has_pending_events"`

	code string
}

// EventFilter selects events: entity and action ("*": any).
type EventFilter struct {
	Entity string `json:"entity"`
	Action string `json:"action"`
}

type hooks struct {
	fakeapi.HookSender
	mu     sync.Mutex
	subs   []*Subscription
	nextID int64
	event  int64
}

// Hooks returns the webhook sender: its delivery log and options.
func (s *Server) Hooks() *fakeapi.Hooks { return s.wh.Hooks() }

// Subscriptions returns the subscriptions.
func (s *Server) Subscriptions() []Subscription {
	s.wh.mu.Lock()
	defer s.wh.mu.Unlock()
	out := make([]Subscription, len(s.wh.subs))
	for i, v := range s.wh.subs {
		out[i] = *v
	}
	return out
}

// Close stops the webhook sender and the server.
func (s *Server) Close() { s.wh.CloseHooks(); s.Kit.Close() }

var togglModels = map[clients.Resource]string{
	clients.TimeEntries: "time_entry", clients.Projects: "project", clients.Clients: "client",
	clients.Tasks: "task", clients.Users: "workspace_user",
}

// routeWebhooks serves the Webhooks API; false when r is not for it.
func (s *Server) routeWebhooks(w http.ResponseWriter, r *http.Request) bool {
	path, ok := strings.CutPrefix(r.URL.Path, WebhooksBase+"/")
	if !ok {
		return false
	}
	parts := strings.Split(path, "/")
	if len(parts) < 2 || (parts[0] != "subscriptions" && parts[0] != "ping") {
		fakeapi.WriteJSON(w, http.StatusNotFound, `"Not Found"`)
		return true
	}
	if wid, err := strconv.ParseInt(parts[1], 10, 64); err != nil || wid != s.opts.WorkspaceID {
		fakeapi.WriteJSON(w, http.StatusForbidden, `"User not found/accessible for workspace"`)
		return true
	}
	switch {
	case parts[0] == "subscriptions" && len(parts) == 2 && r.Method == http.MethodGet:
		h := s.Hooks()
		s.wh.mu.Lock()
		list := make([]Subscription, 0, len(s.wh.subs))
		for _, v := range s.wh.subs {
			c := *v
			c.Pending = h.Failures(v.URL) > 0
			list = append(list, c)
		}
		s.wh.mu.Unlock()
		b, _ := json.Marshal(list)
		fakeapi.WriteJSON(w, http.StatusOK, string(b))
	case parts[0] == "subscriptions" && len(parts) == 2 && r.Method == http.MethodPost:
		var in Subscription
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.URL == "" || len(in.Filters) == 0 {
			fakeapi.WriteJSON(w, http.StatusBadRequest, `"url_callback and event_filters are required"`)
			return true
		}
		s.wh.mu.Lock()
		for _, v := range s.wh.subs {
			if v.Description == in.Description {
				s.wh.mu.Unlock()
				fakeapi.WriteJSON(w, http.StatusBadRequest, `"description must be unique for the workspace"`)
				return true
			}
		}
		s.wh.nextID++
		sub := &Subscription{ID: s.wh.nextID, WorkspaceID: s.opts.WorkspaceID, UserID: 1, Enabled: in.Enabled,
			Description: in.Description, Filters: in.Filters, URL: in.URL, Secret: in.Secret, CreatedAt: s.Now().UTC()}
		if sub.Secret == "" {
			sub.Secret = randomHex(10)
		}
		s.wh.subs = append(s.wh.subs, sub)
		c := *sub
		s.wh.mu.Unlock()
		b, _ := json.Marshal(c)
		fakeapi.WriteJSON(w, http.StatusOK, string(b))
		s.ping(sub.ID)
	case parts[0] == "subscriptions" && len(parts) == 3 && r.Method == http.MethodDelete:
		id, _ := strconv.ParseInt(parts[2], 10, 64)
		s.wh.mu.Lock()
		for i, v := range s.wh.subs {
			if v.ID == id {
				s.wh.subs = append(s.wh.subs[:i], s.wh.subs[i+1:]...)
				break
			}
		}
		s.wh.mu.Unlock()
		fakeapi.WriteJSON(w, http.StatusOK, `null`)
	case parts[0] == "ping" && len(parts) == 3 && r.Method == http.MethodPost:
		id, _ := strconv.ParseInt(parts[2], 10, 64)
		if !s.ping(id) {
			fakeapi.WriteJSON(w, http.StatusNotFound, `"subscription not found"`)
			return true
		}
		fakeapi.WriteJSON(w, http.StatusOK, `null`)
	default:
		fakeapi.WriteJSON(w, http.StatusNotFound, `"Not Found"`)
	}
	return true
}

// ping sends the PING event, with a validation_code while the
// subscription is not validated; an answer echoing it validates it.
func (s *Server) ping(id int64) bool {
	s.wh.mu.Lock()
	var sub *Subscription
	for _, v := range s.wh.subs {
		if v.ID == id {
			sub = v
		}
	}
	if sub == nil {
		s.wh.mu.Unlock()
		return false
	}
	now := s.Now().UTC()
	ev := map[string]any{
		"event_id": 0, "created_at": now.Format(time.RFC3339Nano), "creator_id": sub.UserID,
		"metadata": map[string]any{"request_type": "POST", "event_user_id": sub.UserID},
		"payload":  "ping", "subscription_id": sub.ID, "url_callback": sub.URL, "timestamp": now.Format(time.RFC3339Nano),
	}
	if sub.ValidatedAt == nil {
		sub.code = randomHex(8)
		ev["validation_code"] = sub.code
	}
	code, secret, url := sub.code, sub.Secret, sub.URL
	s.wh.mu.Unlock()
	body, _ := json.Marshal(ev)
	s.Hooks().Send(url, "ping", body, togglHeader(secret, body), func(status int, rb []byte) {
		var ans struct {
			Code string `json:"validation_code"`
		}
		if status/100 != 2 || json.Unmarshal(rb, &ans) != nil || code == "" || ans.Code != code {
			return
		}
		s.wh.mu.Lock()
		if sub.ValidatedAt == nil {
			t := s.Now().UTC()
			sub.ValidatedAt = &t
		}
		s.wh.mu.Unlock()
	})
	return true
}

func togglHeader(secret string, body []byte) http.Header {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return http.Header{
		"Content-Type":            {"application/json"},
		"User-Agent":              {"Toggl Webhooks (fake)"},
		"X-Webhook-Signature-256": {"sha256=" + hex.EncodeToString(m.Sum(nil))},
	}
}

// emit sends the event of a write to the subscriptions it matches (enabled
// and validated). Called with the store locked; v is the record as written.
func (s *Server) emit(r clients.Resource, action string, v any) {
	model := togglModels[r]
	s.wh.mu.Lock()
	var targets []*Subscription
	for _, sub := range s.wh.subs {
		if !sub.Enabled || sub.ValidatedAt == nil {
			continue
		}
		for _, f := range sub.Filters {
			if (f.Entity == model || f.Entity == "*") && (f.Action == action || f.Action == "*") {
				targets = append(targets, sub)
				break
			}
		}
	}
	if len(targets) == 0 {
		s.wh.mu.Unlock()
		return
	}
	var payload map[string]any
	if e, ok := v.(TimeEntry); ok {
		payload = s.entryJSON(e)
	} else {
		payload = s.workspaceJSON(v)
	}
	id, _, _ := s.tables[r].stamps(v)
	method := map[string]string{"created": "POST", "updated": "PUT", "deleted": "DELETE"}[action]
	now := s.Now().UTC()
	type send struct {
		url, secret, event string
		body               []byte
	}
	var sends []send
	for _, sub := range targets {
		s.wh.event++
		ev := map[string]any{
			"event_id": s.wh.event, "created_at": now.Format(time.RFC3339Nano), "creator_id": sub.UserID,
			"metadata": map[string]any{
				"action": action, "event_user_id": sub.UserID, "model": model, "request_type": method,
				"path":         fmt.Sprintf("/api/v9/workspaces/%d/%s/%d", s.opts.WorkspaceID, r, id),
				"workspace_id": s.opts.WorkspaceID,
			},
			"payload": payload, "subscription_id": sub.ID, "url_callback": sub.URL, "timestamp": now.Format(time.RFC3339Nano),
		}
		body, _ := json.Marshal(ev)
		sends = append(sends, send{sub.URL, sub.Secret, strconv.FormatInt(s.wh.event, 10), body})
	}
	s.wh.mu.Unlock()
	for _, x := range sends {
		s.Hooks().Send(x.url, x.event, x.body, togglHeader(x.secret, x.body), nil)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// SourceConfig is a tidemark configuration's `sources:` entry for this
// fake (kind toggl, its URL, workspace and token), then more lines of
// keys, each as "key: value".
func (s *Server) SourceConfig(name string, keys ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  - name: %s\n    kind: toggl\n    base_url: %s\n    workspace_id: \"%d\"\n    token: %s\n",
		name, s.URL(), s.opts.WorkspaceID, s.Token())
	for _, k := range keys {
		b.WriteString("    " + k + "\n")
	}
	return b.String()
}
