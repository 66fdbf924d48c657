package clockifytest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
)

// Clockify's webhooks, as documented: GET/POST /workspaces/{ws}/webhooks
// (one webhook per event type, listed as {webhooks: [...]}) and DELETE
// /workspaces/{ws}/webhooks/{id}; each webhook has its own authToken, sent
// with every delivery in the Clockify-Signature header, and the event type
// in Clockify-Webhook-Event-Type; the body is the entity itself (a time
// entry as the per-user list renders it). Failed deliveries are retried and
// delivered ones sometimes sent again (the kit's Hooks), with the same body.
//
// What it assumes where the documentation is silent: the retry schedule
// (HookOptions); the authToken's shape (random hex rather than a JWT);
// bodies of projects and clients carry id, name and workspaceId only.

// Webhook is a webhook as the fake keeps it.
type Webhook struct {
	ID                string   `json:"id"`
	Name              string   `json:"name"`
	URL               string   `json:"url"`
	Event             string   `json:"webhookEvent"`
	TriggerSource     []string `json:"triggerSource"`
	TriggerSourceType string   `json:"triggerSourceType"`
	Enabled           bool     `json:"enabled"`
	AuthToken         string   `json:"authToken"`
	UserID            string   `json:"userId"`
	WorkspaceID       string   `json:"workspaceId"`
}

type hooks struct {
	fakeapi.HookSender
	mu   sync.Mutex
	list []Webhook
}

// Hooks returns the webhook sender: its delivery log and options.
func (s *Server) Hooks() *fakeapi.Hooks { return s.wh.Hooks() }

// Webhooks returns the webhooks.
func (s *Server) Webhooks() []Webhook {
	s.wh.mu.Lock()
	defer s.wh.mu.Unlock()
	return append([]Webhook(nil), s.wh.list...)
}

// Close stops the webhook sender and the server.
func (s *Server) Close() { s.wh.CloseHooks(); s.Kit.Close() }

// routeWebhooks serves the webhooks API; false when path is not for it.
func (s *Server) routeWebhooks(w http.ResponseWriter, r *http.Request, path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) < 3 || parts[0] != "workspaces" || parts[2] != "webhooks" {
		return false
	}
	if parts[1] != s.opts.WorkspaceID {
		fakeapi.WriteJSON(w, http.StatusForbidden, `{"message":"Access Denied","code":1000}`)
		return true
	}
	switch {
	case len(parts) == 3 && r.Method == http.MethodGet:
		list := s.Webhooks()
		if list == nil {
			list = []Webhook{}
		}
		b, _ := json.Marshal(map[string]any{"webhooks": list, "workspaceWebhookCount": len(list)})
		fakeapi.WriteJSON(w, http.StatusOK, string(b))
	case len(parts) == 3 && r.Method == http.MethodPost:
		var in Webhook
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.URL == "" || in.Event == "" {
			badRequest(w, "url and webhookEvent are required")
			return true
		}
		in.ID, in.AuthToken, in.Enabled = NewID(), randomHex(32), true
		in.UserID, in.WorkspaceID = DefaultAPIUserID, s.opts.WorkspaceID
		s.wh.mu.Lock()
		if len(s.wh.list) >= 10 {
			s.wh.mu.Unlock()
			badRequest(w, "webhook limit reached (10 per user)")
			return true
		}
		s.wh.list = append(s.wh.list, in)
		s.wh.mu.Unlock()
		b, _ := json.Marshal(in)
		fakeapi.WriteJSON(w, http.StatusCreated, string(b))
	case len(parts) == 4 && r.Method == http.MethodDelete:
		s.wh.mu.Lock()
		for i, h := range s.wh.list {
			if h.ID == parts[3] {
				s.wh.list = append(s.wh.list[:i], s.wh.list[i+1:]...)
				break
			}
		}
		s.wh.mu.Unlock()
		fakeapi.WriteJSON(w, http.StatusOK, `{}`)
	default:
		fakeapi.WriteJSON(w, http.StatusMethodNotAllowed, `{"message":"Method not allowed","code":405}`)
	}
	return true
}

var eventNames = map[clients.Resource]string{
	clients.TimeEntries: "TIME_ENTRY", clients.Projects: "PROJECT", clients.Clients: "CLIENT",
	clients.Tasks: "TASK", clients.Users: "USER",
}

// emit sends the event of a write (created, updated or deleted) to the
// enabled webhooks of its type. Called with the store locked.
func (s *Server) emit(r clients.Resource, action string, v any) {
	name := eventNames[r]
	event := map[string]string{"created": "NEW_" + name, "updated": name + "_UPDATED", "deleted": name + "_DELETED"}[action]
	if r == clients.Users && action == "created" {
		event = "USER_JOINED_WORKSPACE"
	}
	s.wh.mu.Lock()
	var targets []Webhook
	for _, h := range s.wh.list {
		if h.Enabled && h.Event == event {
			targets = append(targets, h)
		}
	}
	s.wh.mu.Unlock()
	if len(targets) == 0 {
		return
	}
	var body []byte
	switch v := v.(type) {
	case TimeEntry:
		body = s.renderEntry(v)
	case Project:
		body = mustJSON(map[string]any{"id": v.ID, "name": v.Name, "clientId": v.ClientID, "workspaceId": s.opts.WorkspaceID})
	case Client:
		body = mustJSON(map[string]any{"id": v.ID, "name": v.Name, "workspaceId": s.opts.WorkspaceID})
	case Task:
		body = mustJSON(map[string]any{"id": v.ID, "name": v.Name, "projectId": v.ProjectID})
	case User:
		body = mustJSON(map[string]any{"id": v.ID, "name": v.Name, "email": v.Email})
	default:
		return
	}
	h := s.Hooks()
	for _, t := range targets {
		h.Send(t.URL, event, body, http.Header{
			"Content-Type":                {"application/json"},
			"Clockify-Signature":          {t.AuthToken},
			"Clockify-Webhook-Event-Type": {event},
		}, nil)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
