package clockifytest_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/clockify/clockifytest"
)

// The fake's webhooks as Clockify documents them: one webhook per event
// type, created through the API with its own authToken, which every
// delivery carries in Clockify-Signature with the event type in
// Clockify-Webhook-Event-Type; the body is the entity.
func TestWebhooks(t *testing.T) {
	t.Parallel()
	type got struct{ token, event, body string }
	var mu sync.Mutex
	var gots []got
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		gots = append(gots, got{r.Header.Get("Clockify-Signature"), r.Header.Get("Clockify-Webhook-Event-Type"), string(b)})
		mu.Unlock()
	}))
	defer recv.Close()
	s := clockifytest.New(clockifytest.Options{})
	defer s.Close()
	for _, ev := range []string{"NEW_TIME_ENTRY", "TIME_ENTRY_DELETED"} {
		req, _ := http.NewRequest(http.MethodPost, s.URL()+"/workspaces/"+s.WorkspaceID()+"/webhooks",
			strings.NewReader(`{"name":"t","url":"`+recv.URL+`","webhookEvent":"`+ev+`","triggerSource":[],"triggerSourceType":"WORKSPACE_ID"}`))
		req.Header.Set("X-Api-Key", s.Token())
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("create %s: %v %v", ev, resp, err)
		}
		resp.Body.Close()
	}
	hooks := s.Webhooks()
	if len(hooks) != 2 || hooks[0].AuthToken == "" || hooks[0].AuthToken == hooks[1].AuthToken {
		t.Fatalf("webhooks: %+v", hooks)
	}
	id := clockifytest.NewID()
	s.PutTimeEntry(clockifytest.TimeEntry{ID: id, UserID: "u1", Start: time.Now().Add(-time.Hour)})
	s.Delete(clients.TimeEntries, id)
	s.Hooks().Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(gots) != 2 {
		t.Fatalf("%d deliveries", len(gots))
	}
	token := map[string]string{hooks[0].Event: hooks[0].AuthToken, hooks[1].Event: hooks[1].AuthToken}
	seen := map[string]bool{}
	for i, g := range gots { // sent concurrently: in any order
		if g.token == "" || g.token != token[g.event] || !strings.Contains(g.body, `"id":"`+id+`"`) {
			t.Fatalf("delivery %d: %+v", i, g)
		}
		seen[g.event] = true
	}
	if len(seen) != 2 {
		t.Fatalf("events: %v", seen)
	}
}
