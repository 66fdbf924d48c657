package webhooks

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
)

// RegisterParams says what to subscribe to, where.
type RegisterParams struct {
	Source, Kind string
	// BaseURL is the source's API base (base_url); the webhooks API is
	// found from it.
	BaseURL     string
	WorkspaceID string
	Token       string
	// URL is where the provider is to deliver: this daemon's
	// POST /webhooks/{source} as the provider reaches it.
	URL       string
	Resources []clients.Resource
	UserAgent string
	// RateLimit is the source's (rate_limit): the calls keep to it.
	RateLimit httpx.RateLimit
	// Pacer is the source's shared pacer (app.App.Pacer): the calls take
	// their slots beside the daemon's and every other process's.
	Pacer httpx.Pacer
	Store *Store
	Seal  *Sealer
}

// Registered is one provider subscription after Register.
type Registered struct {
	ID      string
	Events  []string
	Created bool // false: it existed and was checked
	// Validated is known for Toggl (validated_at); Clockify needs none.
	Validated bool
	Note      string
}

// Register creates, or checks and stores, the provider's subscriptions
// for the source's mirrored resources, with their secrets sealed in the
// database.
func Register(ctx context.Context, p RegisterParams) ([]Registered, error) {
	c := newAPIClient(p)
	switch p.Kind {
	case "toggl":
		return c.toggl(ctx)
	case "clockify":
		return c.clockify(ctx)
	}
	return nil, fmt.Errorf("source %s: kind %s sends no webhooks (Harvest has none: polling only)", p.Source, p.Kind)
}

// newAPIClient talks to the provider through httpx, as every request to a
// provider does: no redirect is followed (a 3xx is an error, so neither the
// credential nor Toggl's subscription body with its secret goes to the host
// it names), the credential is redacted from errors, the source's rate
// limit spaces the calls and a 429 is waited out (five times at most). A
// 5xx is not retried (a create may have happened: run register again, it
// finds what exists), and a 402 (Toggl's quota) fails at once.
func newAPIClient(p RegisterParams) *apiClient {
	auth := http.Header{}
	switch p.Kind {
	case "toggl":
		auth.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(p.Token+":api_token")))
	case "clockify":
		auth.Set("X-Api-Key", p.Token)
	}
	return &apiClient{p: p, http: httpx.New(httpx.Config{
		Source: p.Source, RateLimit: p.RateLimit, Pacer: p.Pacer, UserAgent: p.UserAgent, Timeout: 30 * time.Second,
		MaxAttempts: 1, MaxRateLimitWaits: 5, Headers: auth,
		PlainHeaders: http.Header{"Content-Type": {"application/json"}},
		NotQuota: func(*http.Response, int) error {
			return errors.New("the provider's hourly quota is spent (402): try again after the hour")
		},
	})}
}

type apiClient struct {
	http *httpx.Client
	p    RegisterParams
}

// do sends one request and decodes a 2xx answer into out.
func (c *apiClient) do(ctx context.Context, method, url string, in, out any) error {
	var payload []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		payload = b
	}
	resp, err := c.http.Do(ctx, httpx.Request{Method: method, URL: url, Body: payload, Resource: "webhooks"})
	if err != nil {
		return fmt.Errorf("source %s: %w", c.p.Source, err)
	}
	if out != nil && len(resp.Body) > 0 {
		if err := json.Unmarshal(resp.Body, out); err != nil {
			return fmt.Errorf("source %s: %s %s: unreadable answer: %w", c.p.Source, method, url, err)
		}
	}
	return nil
}

// provisionalPrefix names a subscription stored before the provider named
// it.
const provisionalPrefix = "pending-"

// togglWebhooksBase finds the Webhooks API from the API v9 base.
func togglWebhooksBase(base string) string {
	base = strings.TrimRight(base, "/")
	base = strings.TrimSuffix(base, "/api/v9")
	return base + "/webhooks/api/v1"
}

type togglFilter struct {
	Entity string `json:"entity"`
	Action string `json:"action"`
}

type togglSub struct {
	ID          int64         `json:"subscription_id"`
	Enabled     bool          `json:"enabled"`
	Description string        `json:"description"`
	Filters     []togglFilter `json:"event_filters"`
	URL         string        `json:"url_callback"`
	Secret      string        `json:"secret"`
	ValidatedAt *time.Time    `json:"validated_at"`
	Pending     bool          `json:"has_pending_events"`
}

func (c *apiClient) toggl(ctx context.Context) ([]Registered, error) {
	base := togglWebhooksBase(c.p.BaseURL)
	subsURL := base + "/subscriptions/" + c.p.WorkspaceID
	var entities []string
	for _, r := range c.p.Resources {
		if e := TogglEntity(r); e != "" {
			entities = append(entities, e)
		}
	}
	var have []togglSub
	if err := c.do(ctx, http.MethodGet, subsURL, nil, &have); err != nil {
		return nil, err
	}
	for _, s := range have {
		if s.URL != c.p.URL {
			continue
		}
		id := fmt.Sprint(s.ID)
		var missing []string
		for _, e := range entities {
			if !slices.ContainsFunc(s.Filters, func(f togglFilter) bool {
				return (f.Entity == e || f.Entity == "*") && f.Action == "*"
			}) {
				missing = append(missing, e)
			}
		}
		if err := c.p.Store.SaveSubscription(ctx, Subscription{Source: c.p.Source, ID: id, URL: s.URL, Events: entities, ValidatedAt: s.ValidatedAt}, s.Secret, c.p.Seal); err != nil {
			return nil, err
		}
		reg := Registered{ID: id, Events: entities, Validated: s.ValidatedAt != nil}
		if len(missing) > 0 {
			reg.Note = "the subscription lacks filters for " + strings.Join(missing, ", ") + " (edit it at Toggl or delete it and register again)"
		}
		if !s.Enabled {
			reg.Note = strings.TrimSpace(reg.Note + " disabled at Toggl: enable it there")
		}
		if s.ValidatedAt == nil {
			// Ask for another PING, which the daemon answers.
			if err := c.do(ctx, http.MethodPost, base+"/ping/"+c.p.WorkspaceID+"/"+id, nil, nil); err != nil {
				return nil, err
			}
			reg.Note = strings.TrimSpace(reg.Note + " not validated yet: a PING was sent; the daemon at the URL must be running")
		}
		return []Registered{reg}, nil
	}
	// Stored before it exists, under a provisional id, so that the PING
	// that follows the creation already verifies.
	secret := NewSecret()
	provisional := provisionalPrefix + NewSecret()[:12]
	if err := c.p.Store.SaveSubscription(ctx, Subscription{Source: c.p.Source, ID: provisional, URL: c.p.URL, Events: entities}, secret, c.p.Seal); err != nil {
		return nil, err
	}
	var fs []togglFilter
	for _, e := range entities {
		fs = append(fs, togglFilter{e, "*"})
	}
	var made togglSub
	err := c.do(ctx, http.MethodPost, subsURL, map[string]any{
		"url_callback": c.p.URL, "event_filters": fs, "enabled": true, "secret": secret,
		"description": "tidemark " + c.p.Source,
	}, &made)
	if err != nil {
		_ = c.p.Store.DeleteSubscription(context.WithoutCancel(ctx), c.p.Source, provisional)
		return nil, err
	}
	id := fmt.Sprint(made.ID)
	if err := c.p.Store.RenameSubscription(ctx, c.p.Source, provisional, id); err != nil {
		return nil, err
	}
	return []Registered{{ID: id, Events: entities, Created: true,
		Note: "Toggl validates it with a PING that the daemon answers (`tidemark webhooks status` shows it)"}}, nil
}

type clockifyHook struct {
	ID        string `json:"id"`
	URL       string `json:"url"`
	Event     string `json:"webhookEvent"`
	Enabled   bool   `json:"enabled"`
	AuthToken string `json:"authToken"`
}

func (c *apiClient) clockifyURL() string {
	return strings.TrimRight(c.p.BaseURL, "/") + "/workspaces/" + c.p.WorkspaceID + "/webhooks"
}

// clockifyHooks lists the workspace's webhooks ({webhooks: [...]} or a
// bare array).
func (c *apiClient) clockifyHooks(ctx context.Context) ([]clockifyHook, error) {
	var raw json.RawMessage
	if err := c.do(ctx, http.MethodGet, c.clockifyURL(), nil, &raw); err != nil {
		return nil, err
	}
	var have []clockifyHook
	var wrapped struct {
		Webhooks []clockifyHook `json:"webhooks"`
	}
	if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '{' {
		if err := json.Unmarshal(raw, &wrapped); err != nil {
			return nil, fmt.Errorf("source %s: webhooks listing: unreadable answer: %w", c.p.Source, err)
		}
		return wrapped.Webhooks, nil
	}
	if err := json.Unmarshal(raw, &have); err != nil {
		return nil, fmt.Errorf("source %s: webhooks listing: unreadable answer: %w", c.p.Source, err)
	}
	return have, nil
}

func (c *apiClient) clockify(ctx context.Context) ([]Registered, error) {
	u := c.clockifyURL()
	have, err := c.clockifyHooks(ctx)
	if err != nil {
		return nil, err
	}
	var out []Registered
	for _, r := range c.p.Resources {
		for _, ev := range ClockifyEvents[r] {
			i := slices.IndexFunc(have, func(h clockifyHook) bool { return h.URL == c.p.URL && h.Event == ev })
			reg := Registered{Events: []string{ev}, Validated: true}
			var h clockifyHook
			if i >= 0 {
				h = have[i]
				if !h.Enabled {
					reg.Note = "disabled at Clockify: enable it there"
				}
			} else {
				err := c.do(ctx, http.MethodPost, u, map[string]any{
					"name": "tidemark " + c.p.Source + " " + ev, "url": c.p.URL, "webhookEvent": ev,
					"triggerSource": []string{c.p.WorkspaceID}, "triggerSourceType": "WORKSPACE_ID",
				}, &h)
				if err != nil {
					return out, err
				}
				reg.Created = true
			}
			if h.AuthToken == "" {
				return out, fmt.Errorf("source %s: Clockify webhook %s has no authToken in its answer", c.p.Source, h.ID)
			}
			reg.ID = h.ID
			if err := c.p.Store.SaveSubscription(ctx, Subscription{Source: c.p.Source, ID: h.ID, URL: h.URL, Events: []string{ev}}, h.AuthToken, c.p.Seal); err != nil {
				return out, err
			}
			out = append(out, reg)
		}
	}
	return out, nil
}

// ProviderState is what the provider says of a subscription.
type ProviderState struct {
	Found, Enabled bool
	// Validated: Toggl's validated_at is set (Clockify needs none).
	Validated bool
	// Pending: Toggl has events it could not deliver yet (its
	// has_pending_events; it publishes no failure count).
	Pending bool
}

// States asks the provider for the state of the source's subscriptions,
// by id.
func States(ctx context.Context, p RegisterParams) (map[string]ProviderState, error) {
	c := newAPIClient(p)
	out := map[string]ProviderState{}
	switch p.Kind {
	case "toggl":
		var have []togglSub
		if err := c.do(ctx, http.MethodGet, togglWebhooksBase(p.BaseURL)+"/subscriptions/"+p.WorkspaceID, nil, &have); err != nil {
			return nil, err
		}
		for _, s := range have {
			out[fmt.Sprint(s.ID)] = ProviderState{Found: true, Enabled: s.Enabled, Validated: s.ValidatedAt != nil, Pending: s.Pending}
		}
	case "clockify":
		have, err := c.clockifyHooks(ctx)
		if err != nil {
			return nil, err
		}
		for _, h := range have {
			out[h.ID] = ProviderState{Found: true, Enabled: h.Enabled, Validated: true}
		}
	default:
		return nil, fmt.Errorf("source %s: kind %s sends no webhooks", p.Source, p.Kind)
	}
	return out, nil
}
