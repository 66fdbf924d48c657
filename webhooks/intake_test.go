package webhooks

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
)

func testSealer(t *testing.T) *Sealer {
	t.Helper()
	k := make([]byte, 32)
	rand.Read(k)
	s, err := NewSealer(base64.StdEncoding.EncodeToString(k))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const togglSecret = "s3cret-toggl"

func togglEvent(id, notes string) string {
	return `{"event_id":` + id + `,"created_at":"2026-03-02T09:00:00Z","creator_id":1,` +
		`"metadata":{"action":"updated","model":"time_entry","path":"/api/v9/workspaces/1/time_entries/5"},` +
		`"payload":{"id":5,"description":"` + notes + `","at":"2026-03-02T09:00:00+00:00"},"subscription_id":1,"timestamp":"2026-03-02T09:00:00Z"}`
}

// withToggl returns a store with source tg's Toggl subscription (secret
// togglSecret) and its sealer.
func withToggl(t *testing.T) (*pgxpool.Pool, *Store, *Sealer) {
	t.Helper()
	pool := pgtest.DB(t)
	st, _ := newTestStore(t, pool)
	seal := testSealer(t)
	if err := st.SaveSubscription(context.Background(), Subscription{Source: "tg", ID: "1", URL: "http://x", Events: []string{"time_entry"}}, togglSecret, seal); err != nil {
		t.Fatal(err)
	}
	return pool, st, seal
}

// serveToggl serves an intake of source tg (Toggl) over st.
func serveToggl(t *testing.T, st *Store, seal *Sealer) *httptest.Server {
	t.Helper()
	in := &Intake{Store: st, Seal: seal, MaxBody: 4096, Log: zerolog.Nop(),
		Sources: map[string]Source{"tg": {Dialect: Toggl{}, Resources: []clients.Resource{clients.TimeEntries}}}}
	mux := http.NewServeMux()
	mux.Handle(Route, in)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestIntake(t *testing.T) {
	t.Parallel()
	pool, st, seal := withToggl(t)
	ctx := context.Background()
	if err := st.SaveSubscription(ctx, Subscription{Source: "ck", ID: "w1", URL: "http://x", Events: []string{"NEW_TIME_ENTRY"}}, "ck-token", seal); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	in := &Intake{Store: st, Seal: seal, MaxBody: 4096, Log: zerolog.New(&logs),
		Sources: map[string]Source{
			"tg": {Dialect: Toggl{}, Resources: []clients.Resource{clients.TimeEntries}},
			"ck": {Dialect: Clockify{}, Resources: []clients.Resource{clients.TimeEntries}},
		}}
	mux := http.NewServeMux()
	mux.Handle(Route, in)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	post := func(source, body string, h http.Header) (int, string) {
		t.Helper()
		status, _, b := deliver(t, srv.URL, source, body, h)
		return status, b
	}
	signed := func(body string) http.Header {
		return http.Header{TogglSignatureHeader: {TogglSign(togglSecret, []byte(body))}}
	}
	expect := func(what string, status, want int, before, after snapshot, changed bool) {
		t.Helper()
		if status != want {
			t.Fatalf("%s: status %d, want %d", what, status, want)
		}
		if !changed && before != after {
			t.Fatalf("%s changed the store:\n%+v\n%+v", what, before, after)
		}
	}
	ev1 := togglEvent("101", "first")

	b := snap(t, pool, "tg", "toggl:101")
	s, _ := post("tg", ev1, http.Header{TogglSignatureHeader: {TogglSign("wrong", []byte(ev1))}})
	expect("a wrong signature", s, 401, b, snap(t, pool, "tg", "toggl:101"), false)
	s, _ = post("tg", ev1, nil)
	expect("no signature", s, 401, b, snap(t, pool, "tg", "toggl:101"), false)
	s, _ = post("tg", ev1+" ", signed(ev1))
	expect("a body changed after signing", s, 401, b, snap(t, pool, "tg", "toggl:101"), false)
	big := togglEvent("102", strings.Repeat("x", 5000))
	s, _ = post("tg", big, signed(big))
	expect("an oversized body", s, 413, b, snap(t, pool, "tg", "toggl:101"), false)
	s, _ = post("nope", ev1, signed(ev1))
	expect("an unknown source", s, 401, b, snap(t, pool, "tg", "toggl:101"), false)

	// PING: answered with its validation_code; the subscription is validated.
	ping := `{"event_id":0,"payload":"ping","subscription_id":1,"validation_code":"abc123"}`
	s, body := post("tg", ping, signed(ping))
	if s != 200 || !strings.Contains(body, `"validation_code":"abc123"`) {
		t.Fatalf("PING: %d %s", s, body)
	}
	subs, _ := st.Subscriptions(ctx, "tg")
	if subs[0].ValidatedAt == nil {
		t.Fatal("PING answered but the subscription is not marked validated")
	}

	s, _ = post("tg", ev1, signed(ev1))
	first := snap(t, pool, "tg", "toggl:101")
	if s != 200 || first.Events != 1 || first.Seq != 1 {
		t.Fatalf("accepted: %d %+v", s, first)
	}
	s, _ = post("tg", ev1, signed(ev1))
	expect("a duplicate", s, 200, first, snap(t, pool, "tg", "toggl:101"), false)
	spaced := strings.ReplaceAll(ev1, ",", ", ")
	s, _ = post("tg", spaced, signed(spaced))
	expect("a duplicate formatted differently", s, 200, first, snap(t, pool, "tg", "toggl:101"), false)
	changed := togglEvent("101", "edited")
	s, _ = post("tg", changed, signed(changed))
	after := snap(t, pool, "tg", "toggl:101")
	if s != 200 || after.Conflicts != 1 || after.Hash != first.Hash || after.Seq != first.Seq {
		t.Fatalf("a different payload under one key: %d %+v", s, after)
	}
	if !strings.Contains(logs.String(), "CONFLICT") {
		t.Fatal("no log line for the conflict")
	}
	// Out of order: an older event after a newer one is simply another
	// key; both coalesce into the one pending pass.
	ev0 := togglEvent("99", "older")
	s, _ = post("tg", ev0, signed(ev0))
	if got := snap(t, pool, "tg", "toggl:99"); s != 200 || got.Events != 2 || got.Triggers != 1 || got.Seq != 2 {
		t.Fatalf("out of order: %d %+v", s, got)
	}

	// Clockify: the webhook's token in Clockify-Signature.
	ck := `{"id":"65f0aa","description":"x","timeInterval":{"start":"2026-03-02T08:00:00Z"}}`
	ckh := func(tok string) http.Header {
		return http.Header{ClockifySignatureHeader: {tok}, ClockifyEventHeader: {"TIME_ENTRY_UPDATED"}}
	}
	s, _ = post("ck", ck, ckh("ck-wrong"))
	if s != 401 {
		t.Fatalf("clockify with a wrong token: %d", s)
	}
	s, _ = post("ck", ck, ckh("ck-token"))
	if s != 200 {
		t.Fatalf("clockify: %d", s)
	}
	s, _ = post("ck", ck, ckh("ck-token"))
	if s != 200 || snap(t, pool, "ck", "").Triggers != 2 {
		t.Fatalf("clockify repeat: %d %+v", s, snap(t, pool, "ck", ""))
	}
	for _, secret := range []string{togglSecret, "ck-token", "abc123"} {
		if strings.Contains(logs.String(), secret) {
			t.Fatalf("a secret in the log: %s", secret)
		}
	}
	if strings.Contains(logs.String(), "edited") || strings.Contains(logs.String(), "first") {
		t.Fatal("payload content in the log")
	}

	// Without the key, nothing can be verified: 503, the provider resends.
	in.Seal = nil
	s, _ = post("tg", ev0, signed(ev0))
	if s != 503 {
		t.Fatalf("without the key: %d", s)
	}
}

func TestSealer(t *testing.T) {
	t.Parallel()
	s := testSealer(t)
	sealed := s.Seal("hello")
	if bytes.Contains(sealed, []byte("hello")) {
		t.Fatal("sealed secret in clear")
	}
	if got, err := s.Open(sealed); err != nil || got != "hello" {
		t.Fatalf("open: %q %v", got, err)
	}
	if _, err := testSealer(t).Open(sealed); err == nil {
		t.Fatal("another key opened it")
	}
	if _, err := NewSealer("c2hvcnQ="); err == nil || strings.Contains(err.Error(), "c2hvcnQ=") {
		t.Fatalf("a short key: %v", err)
	}
}

// A flood of deliveries with wrong signatures costs at most one fresh read
// of the subscriptions per FreshEvery, not one (and its decryptions) each.
func TestBadSignaturesDoNotReadTheStoreEachTime(t *testing.T) {
	t.Parallel()
	pool, st, seal := withToggl(t)
	srv := serveToggl(t, st, seal)
	body := togglEvent("1", "x")
	before, start := pool.Stat().AcquireCount(), time.Now()
	const bogus = 200
	for range bogus {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/tg", strings.NewReader(body))
		req.Header.Set(TogglSignatureHeader, TogglSign("not-the-secret", []byte(body)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("bogus delivery: %d", resp.StatusCode)
		}
	}
	reads := pool.Stat().AcquireCount() - before
	if allowed := 2 + int64(time.Since(start)/FreshEvery); reads > allowed || reads >= bogus {
		t.Fatalf("%d bogus deliveries read the store %d times, want at most %d", bogus, reads, allowed)
	}
}

// A subscription saved a moment after the secrets were read gets its first
// delivery accepted at once: the throttle holds back only fresh reads that
// follow one that matched nothing.
func TestNewSubscriptionsFirstDeliveryIsAccepted(t *testing.T) {
	t.Parallel()
	_, st, seal := withToggl(t)
	srv := serveToggl(t, st, seal)
	post := func(body, secret string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/tg", strings.NewReader(body))
		req.Header.Set(TogglSignatureHeader, TogglSign(secret, []byte(body)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := post(togglEvent("1", "a"), togglSecret); s != http.StatusOK {
		t.Fatalf("delivery: %d", s)
	}
	if err := st.SaveSubscription(context.Background(), Subscription{Source: "tg", ID: "2", URL: "http://x", Events: []string{"time_entry"}}, "second-secret", seal); err != nil {
		t.Fatal(err)
	}
	if s := post(togglEvent("2", "b"), "second-secret"); s != http.StatusOK {
		t.Fatalf("the new subscription's first delivery: %d", s)
	}
}

// Issue 23, item 7: without a secret, a source's name cannot be probed: an
// unsigned (or wrongly signed, or oversized) POST gets the same answer,
// status, headers and body, for a source that does not exist as for one
// that does.
func TestIntakeUnknownSourceAnswersLikeAKnownOne(t *testing.T) {
	t.Parallel()
	_, st, seal := withToggl(t)
	srv := serveToggl(t, st, seal)
	answer := func(source, body string, h http.Header) string {
		t.Helper()
		status, header, b := deliver(t, srv.URL, source, body, h)
		header.Del("Date")
		return fmt.Sprint(status, " ", header, " ", b)
	}
	ev := togglEvent("101", "x")
	big := togglEvent("102", strings.Repeat("x", 5000))
	for _, tc := range []struct {
		what string
		body string
		h    http.Header
	}{
		{"unsigned", ev, nil},
		{"wrongly signed", ev, http.Header{TogglSignatureHeader: {TogglSign("guess", []byte(ev))}}},
		{"oversized", big, nil},
	} {
		known, unknown := answer("tg", tc.body, tc.h), answer("nope", tc.body, tc.h)
		if known != unknown {
			t.Errorf("%s: a known source answers %q, an unknown one %q", tc.what, known, unknown)
		}
	}
}

// deliver POSTs body with the headers h to the intake at base for source.
func deliver(t *testing.T, base, source, body string, h http.Header) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/"+source, strings.NewReader(body))
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

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
