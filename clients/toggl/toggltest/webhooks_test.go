package toggltest_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients/toggl/toggltest"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
)

type delivery struct {
	sig  string
	body []byte
}

// The fake's webhooks as Toggl documents them: a subscription created
// through the API gets a PING with a validation_code and is validated by an
// answer echoing it; events are then signed with the secret, resent with
// the same event_id when asked to, and retried after a failed attempt.
func TestWebhooks(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []delivery
	fail := 1 // the first event delivery fails
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var ev struct {
			Payload        json.RawMessage `json:"payload"`
			ValidationCode string          `json:"validation_code"`
		}
		json.Unmarshal(b, &ev)
		mu.Lock()
		defer mu.Unlock()
		got = append(got, delivery{r.Header.Get("X-Webhook-Signature-256"), b})
		if string(ev.Payload) == `"ping"` {
			json.NewEncoder(w).Encode(map[string]string{"validation_code": ev.ValidationCode})
			return
		}
		if fail > 0 {
			fail--
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer recv.Close()
	s := toggltest.New(toggltest.Options{})
	defer s.Close()
	s.Hooks().SetOptions(fakeapi.HookOptions{Retry: 20 * time.Millisecond, DuplicateRate: 1})
	body := `{"url_callback":"` + recv.URL + `","event_filters":[{"entity":"time_entry","action":"*"}],"enabled":true,"description":"t","secret":"shh"}`
	req, _ := http.NewRequest(http.MethodPost, strings.TrimSuffix(s.URL(), "/api/v9")+toggltest.WebhooksBase+"/subscriptions/4242", strings.NewReader(body))
	req.SetBasicAuth(s.Token(), "api_token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("create: %v %v", resp, err)
	}
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for s.Subscriptions()[0].ValidatedAt == nil {
		if time.Now().After(deadline) {
			t.Fatal("never validated")
		}
		time.Sleep(10 * time.Millisecond)
	}
	notes := "x"
	s.PutTimeEntry(toggltest.TimeEntry{ID: 1, UserID: 2, Description: &notes, Start: time.Now().Add(-time.Hour), Duration: 60})
	s.Hooks().Wait()
	mu.Lock()
	defer mu.Unlock()
	var evs []delivery
	for _, d := range got {
		m := hmac.New(sha256.New, []byte("shh"))
		m.Write(d.body)
		if d.sig != "sha256="+hex.EncodeToString(m.Sum(nil)) {
			t.Fatalf("bad signature on %s", d.body)
		}
		if !strings.Contains(string(d.body), `"payload":"ping"`) {
			evs = append(evs, d)
		}
	}
	if len(evs) != 3 { // a failed attempt, its retry, a resend
		t.Fatalf("%d event deliveries", len(evs))
	}
	if !bytes.Equal(evs[0].body, evs[1].body) || !bytes.Equal(evs[1].body, evs[2].body) || !strings.Contains(string(evs[0].body), `"event_id":1`) {
		t.Fatalf("a retry or resend differs:\n%s\n%s\n%s", evs[0].body, evs[1].body, evs[2].body)
	}
}
