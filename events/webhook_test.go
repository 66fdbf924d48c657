package events_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/events"
	"github.com/tidemarkhq/tidemark/events/eventstest"
	"github.com/tidemarkhq/tidemark/internal/logtest"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
)

const (
	oldSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	newSecret = "whsec_c2Vjb25kLXNlY3JldC1vZi0yNC1ieXRlcw=="
)

// receiver is a webhook endpoint that verifies every delivery with the
// Standard Webhooks reference library (not our signing code) and counts
// deliveries per webhook-id.
type receiver struct {
	t      *testing.T
	verify []*standardwebhooks.Webhook
	mu     sync.Mutex
	got    map[string]int             // webhook-id → verified deliveries accepted
	tries  map[string]int             // webhook-id → verified deliveries
	bodies map[string]json.RawMessage // webhook-id → last body
	answer func(id string, n int) int // status for the n-th delivery of id
}

func newReceiver(t *testing.T, secrets ...string) *receiver {
	r := &receiver{t: t, got: map[string]int{}, tries: map[string]int{}, bodies: map[string]json.RawMessage{},
		answer: func(string, int) int { return http.StatusNoContent }}
	for _, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			t.Fatal(err)
		}
		r.verify = append(r.verify, wh)
	}
	return r
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	for _, wh := range r.verify {
		if err := wh.Verify(body, req.Header); err != nil {
			r.t.Errorf("delivery %s does not verify: %v", req.Header.Get("webhook-id"), err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
	}
	id := req.Header.Get("webhook-id")
	r.mu.Lock()
	r.tries[id]++
	n := r.tries[id]
	answer := r.answer
	r.mu.Unlock()
	status := answer(id, n)
	if status < 300 {
		r.mu.Lock()
		r.got[id]++
		r.bodies[id] = body
		r.mu.Unlock()
	}
	w.WriteHeader(status)
}

func (r *receiver) accepted() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for k, v := range r.got {
		if v > 0 {
			out[k] = v
		}
	}
	return out
}

func startWebhooks(t *testing.T, p events.WebhookParams) {
	t.Helper()
	p.RetryBase = 20 * time.Millisecond
	p.PollEvery = 100 * time.Millisecond
	p.Log = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	w, err := events.NewWebhooks(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
}

// TestWebhooksSignedAtLeastOnce: every event reaches the endpoint, signed by
// both secrets of a rotation (each verified alone by the reference
// library), with a failing first attempt retried under the same
// webhook-id, and the body naming the event and carrying the row.
func TestWebhooksSignedAtLeastOnce(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	byOld, byNew := newReceiver(t, oldSecret), newReceiver(t, newSecret)
	byNew.answer = func(id string, n int) int {
		if n == 1 {
			return http.StatusServiceUnavailable // first attempt of every event fails
		}
		return http.StatusOK
	}
	srvOld, srvNew := httptest.NewServer(byOld), httptest.NewServer(byNew)
	defer srvOld.Close()
	defer srvNew.Close()
	startWebhooks(t, events.WebhookParams{Pool: pool, Endpoints: []events.Endpoint{
		{Name: "hook-old", URL: srvOld.URL, Secrets: []string{oldSecret, newSecret}},
		{Name: "hook-new", URL: srvNew.URL, Secrets: []string{oldSecret, newSecret}},
	}})
	eventstest.Clients(t, pool, "acme", 1, 3)
	eventstest.Clients(t, pool, "acme", 1, 3) // re-delivery: nothing more to send
	waitFor(t, func() bool { return len(byOld.accepted()) == 3 && len(byNew.accepted()) == 3 })
	time.Sleep(300 * time.Millisecond)
	for id, n := range byOld.accepted() {
		if n != 1 || byNew.accepted()[id] != 1 {
			t.Fatalf("event %s delivered %d and %d times", id, n, byNew.accepted()[id])
		}
		var body struct {
			Type string `json:"type"`
			Data struct {
				ID       string          `json:"id"`
				RecordID string          `json:"record_id"`
				Row      json.RawMessage `json:"row"`
			} `json:"data"`
		}
		if err := json.Unmarshal(byOld.bodies[id], &body); err != nil {
			t.Fatal(err)
		}
		if body.Type != "clients.created" || body.Data.ID != id || !strings.Contains(string(body.Data.Row), `"name"`) {
			t.Fatalf("body %s", byOld.bodies[id])
		}
	}
	ds, err := events.Deliveries(context.Background(), pool, events.DeliveriesParams{Consumer: "hook-new"})
	if err != nil || len(ds) != 3 {
		t.Fatalf("deliveries: %+v, %v", ds, err)
	}
	for _, d := range ds {
		if d.State != "completed" || d.Attempts != 2 || !strings.Contains(d.LastError, "503") {
			t.Fatalf("delivery %+v: want completed at the second attempt after a 503", d)
		}
	}
}

// TestWebhooksDeadLetterAndRedrive: an endpoint that keeps failing past the
// resend window dead-letters the delivery; after the endpoint recovers, a
// redrive delivers it with the same webhook-id.
func TestWebhooksDeadLetterAndRedrive(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	rcv := newReceiver(t, oldSecret)
	var mu sync.Mutex
	down := true
	rcv.answer = func(string, int) int {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	startWebhooks(t, events.WebhookParams{Pool: pool, Endpoints: []events.Endpoint{
		{Name: "flaky", URL: srv.URL, Secrets: []string{oldSecret}, Window: 2 * time.Second},
	}})
	eventstest.Clients(t, pool, "acme", 1, 1)
	ctx := context.Background()
	var dead []events.Delivery
	waitFor(t, func() bool {
		var err error
		dead, err = events.Deliveries(ctx, pool, events.DeliveriesParams{Consumer: "flaky", DeadOnly: true})
		return err == nil && len(dead) == 1
	})
	if !strings.Contains(dead[0].LastError, "resend window of 2s exhausted") || dead[0].Attempts < 2 {
		t.Fatalf("dead letter %+v", dead[0])
	}
	mu.Lock()
	down = false
	mu.Unlock()
	if n, err := events.Redrive(ctx, pool, events.RedriveParams{Consumer: "flaky"}); err != nil || n != 1 {
		t.Fatalf("redrive: %d, %v", n, err)
	}
	waitFor(t, func() bool { return rcv.accepted()[dead[0].EventID] == 1 })
	if d, _ := events.Deliveries(ctx, pool, events.DeliveriesParams{Consumer: "flaky", DeadOnly: true}); len(d) != 0 {
		t.Fatalf("dead letters after redrive: %+v", d)
	}
}

// TestWebhook410DisablesConsumer: an endpoint answering 410 Gone disables
// its consumer with a status that says what happened and what to do; events
// after that are not sent.
func TestWebhook410DisablesConsumer(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	rcv := newReceiver(t, oldSecret)
	rcv.answer = func(string, int) int { return http.StatusGone }
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	startWebhooks(t, events.WebhookParams{Pool: pool, Endpoints: []events.Endpoint{
		{Name: "gone", URL: srv.URL, Secrets: []string{oldSecret}},
	}})
	eventstest.Apply(t, pool, "acme", clients.Clients, eventstest.Client("1", eventstest.T0, "A"))
	ctx := context.Background()
	var cs []events.ConsumerStatus
	waitFor(t, func() bool {
		var err error
		cs, err = events.Consumers(ctx, pool)
		return err == nil && len(cs) == 1 && cs[0].Status == "disabled"
	})
	if !strings.Contains(cs[0].Note, "answered 410 Gone") || !strings.Contains(cs[0].Note, "tidemark events reset --consumer gone --enable") {
		t.Fatalf("status note %q", cs[0].Note)
	}
	if len(rcv.accepted()) != 0 {
		t.Fatalf("accepted %v", rcv.accepted())
	}
}

// Issue 23, item 4: an endpoint answering a redirect (a 307 would re-POST
// the signed body to the host it names) is a failed attempt, as Svix treats
// it: nothing reaches that host, the delivery is retried and then
// dead-lettered with the redirect as its error; also with an HTTPClient
// of the caller's that would follow redirects.
func TestWebhooksFollowNoRedirect(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	elsewhere := newReceiver(t, oldSecret)
	srvElsewhere := httptest.NewServer(elsewhere)
	defer srvElsewhere.Close()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, srvElsewhere.URL+"/stolen", http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	startWebhooks(t, events.WebhookParams{Pool: pool, HTTPClient: &http.Client{}, Endpoints: []events.Endpoint{
		{Name: "moved", URL: redirect.URL, Secrets: []string{oldSecret}, Window: time.Second},
	}})
	eventstest.Clients(t, pool, "acme", 1, 1)
	var dead []events.Delivery
	waitFor(t, func() bool {
		var err error
		dead, err = events.Deliveries(context.Background(), pool, events.DeliveriesParams{Consumer: "moved", DeadOnly: true})
		return err == nil && len(dead) == 1
	})
	if !strings.Contains(dead[0].LastError, "307") {
		t.Errorf("dead letter %+v: want the 307 as its error", dead[0])
	}
	elsewhere.mu.Lock()
	defer elsewhere.mu.Unlock()
	if len(elsewhere.tries) > 0 {
		t.Fatalf("the host the redirect named got %v", elsewhere.tries)
	}
}

// Issue 30, S1: an endpoint's URL may carry a password (Go sends it as
// Basic auth) or a token in its query; neither reaches river_job.errors,
// `tidemark events deliveries` (events.Deliveries), the consumer's note or
// the logs, whether the endpoint fails, answers 410 or cannot be reached.
func TestWebhookURLSecretsStayOut(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	rcv := newReceiver(t, oldSecret)
	rcv.answer = func(string, int) int { return http.StatusInternalServerError }
	failing := httptest.NewServer(rcv)
	defer failing.Close()
	gone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusGone) }))
	defer gone.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close() // nothing listens there any more
	secret := func(u string) string {
		return strings.Replace(u, "http://", "http://tidemark:PASSWORD@", 1) + "/hook?token=QUERYTOKEN"
	}
	var logs logtest.Buffer
	p := events.WebhookParams{Pool: pool, Endpoints: []events.Endpoint{
		{Name: "failing", URL: secret(failing.URL), Secrets: []string{oldSecret}},
		{Name: "gone", URL: secret(gone.URL), Secrets: []string{oldSecret}},
		{Name: "down", URL: secret(down.URL), Secrets: []string{oldSecret}},
	}}
	p.RetryBase, p.PollEvery = 20*time.Millisecond, 100*time.Millisecond
	p.Log = zerolog.New(zerolog.MultiLevelWriter(zerolog.NewTestWriter(t), &logs)).Level(zerolog.DebugLevel)
	w, err := events.NewWebhooks(p)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Stop(sctx)
	})
	eventstest.Apply(t, pool, "acme", clients.Clients, eventstest.Client("1", eventstest.T0, "A"))
	var ds []events.Delivery
	var cs []events.ConsumerStatus
	waitFor(t, func() bool {
		ds, _ = events.Deliveries(ctx, pool, events.DeliveriesParams{})
		cs, _ = events.Consumers(ctx, pool)
		failed := map[string]bool{}
		for _, d := range ds {
			if d.LastError != "" {
				failed[d.Consumer] = true
			}
		}
		disabled := false
		for _, c := range cs {
			disabled = disabled || (c.Name == "gone" && c.Status == "disabled")
		}
		return failed["failing"] && failed["down"] && disabled
	})
	var stored string
	if err := pool.QueryRow(ctx, `SELECT coalesce(string_agg(errors::text, ' '), '') FROM river_job`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	var seen strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&seen, "%s: %s\n", d.Consumer, d.LastError)
	}
	for _, c := range cs {
		fmt.Fprintf(&seen, "%s: %s\n", c.Name, c.Note)
	}
	for where, text := range map[string]string{"river_job.errors": stored, "deliveries and notes": seen.String(), "logs": logs.String()} {
		if strings.Contains(text, "PASSWORD") || strings.Contains(text, "QUERYTOKEN") {
			t.Errorf("%s holds a secret of the URL:\n%s", where, text)
		}
	}
	if !strings.Contains(stored, "tidemark:xxxxx@127.0.0.1") {
		t.Errorf("river_job.errors does not name the endpoint (redacted): %s", stored)
	}
}
