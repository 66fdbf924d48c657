package httpx_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients/httpx"
)

// page is a realistic listing body, big enough that a handler writing part
// of it goes out chunked.
func page(entries int) []byte {
	var b strings.Builder
	b.WriteString(`{"time_entries":[`)
	for i := range entries {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"spent_date":"2026-03-03","hours":1.5,"notes":"fix {braces} and \"quotes\" \\ [%d]","updated_at":"2026-03-03T10:00:00Z"}`, 1000+i, i)
	}
	b.WriteString(`],"per_page":100,"links":{"next":null}}`)
	return []byte(b.String())
}

// raw hijacks the connection and writes s as the whole response, then
// closes (with a reset when rst is set).
func raw(w http.ResponseWriter, s string, rst bool) {
	conn, bw, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	bw.WriteString(s)
	bw.Flush()
	if tc, ok := conn.(*net.TCPConn); ok && rst {
		tc.SetLinger(0) // close sends RST instead of FIN
	}
	conn.Close()
}

// Each way a 200's body can arrive short, then the whole body.
var cutForms = []struct {
	name string
	cut  func(w http.ResponseWriter, body []byte)
}{
	{"content-length longer than sent", func(w http.ResponseWriter, body []byte) {
		raw(w, fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:len(body)/2]), false)
	}},
	{"chunked, closed mid-body", func(w http.ResponseWriter, body []byte) {
		half := body[:len(body)/2]
		raw(w, fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(half), half), false)
	}},
	{"connection reset mid-body", func(w http.ResponseWriter, body []byte) {
		raw(w, fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:len(body)/2]), true)
	}},
	{"prefix written, length matches", func(w http.ResponseWriter, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body[:len(body)/2]) // the server sets Content-Length to what was written
	}},
	{"prefix written, small, no content type", func(w http.ResponseWriter, body []byte) {
		w.Write(body[:40])
	}},
	{"prefix written, chunked, clean end", func(w http.ResponseWriter, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush() // chunked, with its terminating chunk
	}},
	{"prefix, connection close without length", func(w http.ResponseWriter, body []byte) {
		raw(w, fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n%s", body[:len(body)/2]), false)
	}},
	{"cut inside a string after a backslash", func(w http.ResponseWriter, body []byte) {
		i := strings.Index(string(body), `\\`)
		w.Write(body[:i+1])
	}},
	{"prefix, empty, json content type", func(w http.ResponseWriter, _ []byte) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("Content-Length", "0")
	}},
}

// A 200 whose body did not arrive whole is a transport fault: retried,
// and the whole body returned.
func TestCutBodyIsRetried(t *testing.T) {
	t.Parallel()
	body := page(60)
	for _, tc := range cutForms {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
				if n == 1 {
					tc.cut(w, body)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.Write(body)
			})
			var waits []string
			cfg := fastConfig(nil)
			cfg.OnWait = func(r string, _ time.Duration) { waits = append(waits, r) }
			resp, err := get(t, httpx.New(cfg), s.URL)
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if s.n.Load() != 2 || string(resp.Body) != string(body) {
				t.Fatalf("requests = %d, body %d bytes, want 2 and %d", s.n.Load(), len(resp.Body), len(body))
			}
			if strings.Join(waits, ",") != "backoff" {
				t.Errorf("waits = %v, want one back-off", waits)
			}
		})
	}
}

// Bodies that keep arriving short use up the retry budget like a 5xx, and
// the error says what happened.
func TestCutBodyExhaustsToTransportError(t *testing.T) {
	t.Parallel()
	body := page(60)
	for _, tc := range cutForms {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) { tc.cut(w, body) })
			cfg := fastConfig(nil)
			cfg.MaxAttempts = 3
			_, err := httpx.New(cfg).Do(t.Context(), httpx.Request{URL: s.URL + "/v2/time_entries?page=3", Resource: "time_entries", Page: 3})
			var he *httpx.Error
			if !errors.As(err, &he) || he.Kind != httpx.KindTransport || he.Attempts != 3 || s.n.Load() != 3 {
				t.Fatalf("err = %#v after %d requests", err, s.n.Load())
			}
			if !errors.Is(err, httpx.ErrTransport) || !errors.Is(err, httpx.ErrBodyCutShort) || !he.Temporary() {
				t.Errorf("errors.Is mismatch for %v", err)
			}
			for _, want := range []string{"acme time_entries page 3", "GET /v2/time_entries", "after 3 attempts", "body cut short", "bytes received"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if strings.Contains(err.Error(), token) {
				t.Errorf("error leaks the token: %s", err)
			}
		})
	}
}

// A complete body that is not what the provider documents is bad input,
// not a transfer fault: returned at once, as received, for the provider to
// report.
func TestCompleteMalformedBodyIsReturned(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, ctype, body string }{
		{"bad value", "application/json", `{"a":}`},
		{"html", "text/html; charset=utf-8", "<!DOCTYPE html>\n<html><body>down for maintenance</body></html>\n"},
		{"html labelled json", "application/json", "<html><body>oops</body></html>"},
		{"trailing garbage", "application/json", `{"a":1} trailing`},
		{"mismatched brackets", "application/json", `{"a":[1,2}}`},
		{"empty, no content type", "", ""},
		{"scalar", "application/json", `12`},
		{"closed after whitespace", "application/json", " \n[1, {\"x\": \"]\"}]\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
				w.Header()["Content-Type"] = []string{tc.ctype}
				w.Write([]byte(tc.body))
			})
			resp, err := get(t, httpx.New(fastConfig(nil)), s.URL)
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if s.n.Load() != 1 || string(resp.Body) != tc.body {
				t.Fatalf("requests = %d, body %q", s.n.Load(), resp.Body)
			}
		})
	}
}

// Only 2xx bodies are checked: a 5xx's truncated JSON is just a 5xx, and a
// 4xx returns at once with its (partial) body.
func TestCutBodyOfErrorStatusIsNotSpecial(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		w.Write([]byte(`{"error":"inva`))
	})
	_, err := get(t, httpx.New(fastConfig(nil)), s.URL)
	var he *httpx.Error
	if !errors.As(err, &he) || he.Kind != httpx.KindStatus || he.Status != 422 || s.n.Load() != 1 {
		t.Fatalf("err = %v after %d requests", err, s.n.Load())
	}
}

// With a Decode hook the provider's decoder decides: a body it finds cut
// short is requested again within the budget (no second completeness pass),
// any other decode error is returned as it is, at once.
func TestDecodeHookDecidesWhatIsCutShort(t *testing.T) {
	t.Parallel()
	body := page(60)
	s := newServer(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if n == 1 {
			w.Write(body[:len(body)/2])
			return
		}
		w.Write(body)
	})
	c := httpx.New(fastConfig(nil))
	var calls int
	var decoded []byte
	resp, err := c.Do(t.Context(), httpx.Request{URL: s.URL, Resource: "time_entries", Page: 1,
		Decode: func(b []byte, _ time.Time) error {
			calls++
			if !json.Valid(b) {
				return fmt.Errorf("page 1: %w", httpx.ErrBodyCutShort)
			}
			decoded = b
			return nil
		}})
	if err != nil || calls != 2 || string(decoded) != string(body) || string(resp.Body) != string(body) {
		t.Fatalf("err %v, %d decodes", err, calls)
	}

	bad := errors.New("time_entries[0].id: missing")
	calls = 0
	_, err = c.Do(t.Context(), httpx.Request{URL: s.URL, Resource: "time_entries", Page: 1,
		Decode: func([]byte, time.Time) error { calls++; return bad }})
	if err != bad || calls != 1 {
		t.Fatalf("a decode error that is not a cut body: %v after %d decodes, want it returned at once", err, calls)
	}
}
