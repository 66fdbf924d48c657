package webhooks

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
)

// Issue 23, item 4: register and status talk to the provider through
// httpx: a redirect from whatever answers at base_url is an error, and
// neither the credential (Clockify's X-Api-Key, Toggl's Basic auth) nor
// Toggl's subscription body with its signing secret reaches the host it
// names.
func TestRegisterAndStatusFollowNoRedirect(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var leaked []string
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		leaked = append(leaked, r.Method+" "+r.URL.Path+" "+r.Header.Get("X-Api-Key")+r.Header.Get("Authorization")+" "+string(b))
		mu.Unlock()
		io.WriteString(w, `{"subscription_id": 9, "secret": "theirs", "enabled": true}`)
	}))
	t.Cleanup(elsewhere.Close)
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/webhooks/api/v1/subscriptions/") {
			io.WriteString(w, `[]`) // Toggl: no subscription yet, so register creates one
			return
		}
		status := http.StatusFound
		if r.Method == http.MethodPost {
			status = http.StatusTemporaryRedirect // re-POSTs the body
		}
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, status)
	}))
	t.Cleanup(provider.Close)
	pool := pgtest.DB(t)
	st, _ := newTestStore(t, pool)
	ctx := context.Background()
	for _, kind := range []string{"clockify", "toggl"} {
		base := provider.URL
		if kind == "toggl" {
			base += "/api/v9"
		}
		p := RegisterParams{Source: kind, Kind: kind, BaseURL: base, WorkspaceID: "42", Token: "tok-" + kind + "-secret",
			URL: "https://tidemark.example/webhooks/" + kind, Resources: []clients.Resource{clients.TimeEntries},
			UserAgent: "test", Store: st, Seal: testSealer(t)}
		if _, err := Register(ctx, p); err == nil {
			t.Errorf("%s: register followed a redirect and succeeded", kind)
		} else if strings.Contains(err.Error(), p.Token) {
			t.Errorf("%s: the error shows the token: %v", kind, err)
		}
		if _, err := States(ctx, p); err == nil && kind == "clockify" {
			t.Errorf("%s: status followed a redirect and succeeded", kind)
		}
		if subs, err := st.Subscriptions(ctx, kind); err != nil || len(subs) != 0 {
			t.Errorf("%s: subscriptions stored after a redirect: %+v, %v", kind, subs, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) > 0 {
		t.Fatalf("requests reached the host a redirect named: %q", leaked)
	}
}
