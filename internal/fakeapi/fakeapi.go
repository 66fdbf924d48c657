// Package fakeapi is the kit every fake provider server is built on
// (harvestfake, toggltest, clockifytest): the loopback HTTP server with the
// source's clock and Date header, the request log, injected faults (5xx,
// slow answers, dropped connections, 429 with Retry-After, 402 quotas,
// malformed pages by endpoint and page, random fault rates), the
// sliding-window and leaky-bucket rate limits, late visibility of writes
// (Late) and the machinery of seeded churn (Stream, EntryChurn).
//
// A dialect server embeds a *Kit made by New with its handler; the kit
// answers faults before the handler runs, in the dialect's words (Dialect),
// and the server keeps only its routes, records and envelopes. The methods
// a test drives (FailNext, Malform, Requests, …) are the same on every fake.
package fakeapi

import (
	"cmp"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tidemarkhq/tidemark/clients/httpx"
)

// Dialect is what the kit must know of a provider's API to answer for it.
type Dialect struct {
	// Base is the API's path prefix (e.g. "/v2"): URL ends with it and the
	// request log leaves it out.
	Base string
	// Fault renders the JSON body of an answer the kit gives in the
	// handler's place: 429, 402 or 5xx.
	Fault func(status int) string
	// HTMLPage is the page an HTMLPage malformation serves.
	HTMLPage string
	// PageParams are the query parameters, and PageFields the top-level
	// fields of a JSON request body, that address a page other than the
	// first (Repeat drops them).
	PageParams, PageFields []string
}

// Config is the kit's part of a fake's options. Zero values turn each
// limit and fault off.
type Config struct {
	// Clock is the source's clock before Skew (default time.Now); Skew
	// offsets it from ours. It drives the Date header and quota windows,
	// and dialects stamp records with it (Kit.Now).
	Clock func() time.Time
	Skew  time.Duration
	// Window is enforced as a sliding window over served requests (429s do
	// not count). With WindowRetryAfter its 429 says, in whole seconds,
	// when a slot frees (Harvest); without, it says nothing (Clockify).
	Window           httpx.RateLimit
	WindowRetryAfter bool
	// Bucket is a leaky bucket: at most Requests in a burst, draining one
	// every Per/Requests (Toggl).
	Bucket httpx.RateLimit
	// RetryAfter is sent with every 429 that carries no Retry-After of its
	// own.
	RetryAfter string
	// Quota is the number of requests served per QuotaWindow (aligned on
	// the source clock, default one hour) before answering 402.
	Quota       int
	QuotaWindow time.Duration
	// FaultRate is the probability that a request answers 500;
	// RateLimitRate the probability of a spurious 429 (Retry-After: 1).
	// Seed seeds them.
	FaultRate, RateLimitRate float64
	Seed                     uint64
}

// Request is one logged request.
type Request struct {
	Seq       int
	At        time.Time // our clock, on arrival
	SourceAt  time.Time // the source's clock, on arrival
	Method    string
	Path      string // after the API base, e.g. /time_entries
	Query     url.Values
	UserAgent string
	Status    int // 0 when the connection was dropped or the client gave up
}

// Kit is a running fake's shared part. Every method is safe for concurrent
// use.
type Kit struct {
	d   Dialect
	cfg Config
	srv *httptest.Server

	mu     sync.Mutex
	reqs   []*Request
	lim    limits
	inj    faults
	noDate bool // DropDate
	repeat Repeat
}

// DropDate makes the responses carry no Date header from now on (as behind
// a proxy that drops it), or carry it again.
func (k *Kit) DropDate(on bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.noDate = on
}

type ctxKey struct{}

// New starts serving h on a loopback port, behind the kit: each request is
// logged and may be answered by a fault before h sees it. Close it when
// done.
func New(d Dialect, c Config, h http.HandlerFunc) *Kit {
	if c.Clock == nil {
		c.Clock = time.Now
	}
	c.QuotaWindow = cmp.Or(c.QuotaWindow, time.Hour)
	k := &Kit{d: d, cfg: c, inj: newFaults(c)}
	k.srv = httptest.NewServer(k.serve(h))
	return k
}

// URL is the API base, like https://api.harvestapp.com/v2.
func (k *Kit) URL() string { return k.srv.URL + k.d.Base }

// Close shuts the server down.
func (k *Kit) Close() { k.srv.CloseClientConnections(); k.srv.Close() }

// Now is the source's clock.
func (k *Kit) Now() time.Time { return k.cfg.Clock().Add(k.cfg.Skew) }

// OnList calls fn with the request's log entry before each listing is
// answered (nil: none), outside the fake's locks, so fn may change the
// store: a record deleted or moved while a client walks the pages of a
// listing.
func (k *Kit) OnList(fn func(Request)) {
	k.mu.Lock()
	k.inj.onList = fn
	k.mu.Unlock()
}

// Listing runs the OnList hook for r: a dialect calls it once a request is
// authorized, just before it serves the listing.
func (k *Kit) Listing(r *http.Request) {
	k.mu.Lock()
	hook := k.inj.onList
	var rq Request
	if p, ok := r.Context().Value(ctxKey{}).(*Request); ok {
		rq = *p
	}
	k.mu.Unlock()
	if hook != nil {
		hook(rq)
	}
}

// Requests returns the request log.
func (k *Kit) Requests() []Request {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]Request, len(k.reqs))
	for i, r := range k.reqs {
		out[i] = *r
	}
	return out
}

// RequestCount returns how many requests arrived.
func (k *Kit) RequestCount() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.reqs)
}

// ResetRequests clears the request log.
func (k *Kit) ResetRequests() {
	k.mu.Lock()
	k.reqs = nil
	k.mu.Unlock()
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (k *Kit) serve(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(hw http.ResponseWriter, r *http.Request) {
		w := &statusWriter{ResponseWriter: hw}
		now := k.Now()
		rq := &Request{
			At: time.Now(), SourceAt: now, Method: r.Method, Path: strings.TrimPrefix(r.URL.Path, k.d.Base),
			Query: r.URL.Query(), UserAgent: r.UserAgent(),
		}
		k.mu.Lock()
		k.reqs = append(k.reqs, rq)
		rq.Seq = len(k.reqs)
		f := k.decideLocked(now)
		noDate, repeat := k.noDate, k.repeat
		k.mu.Unlock()
		defer func() {
			k.mu.Lock()
			rq.Status = w.status
			k.mu.Unlock()
		}()
		w.Header().Set("Date", now.UTC().Format(http.TimeFormat))
		if noDate {
			w.Header()["Date"] = nil // a nil value keeps net/http from adding its own
		}

		if f.wait > 0 {
			select {
			case <-time.After(f.wait):
			case <-r.Context().Done():
				return
			}
		}
		switch {
		case f.drop:
			if conn, _, err := hw.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
		case f.status != 0:
			if f.retryAfter != "" {
				w.Header().Set("Retry-After", f.retryAfter)
			}
			WriteJSON(w, f.status, k.d.Fault(f.status))
		case repeat != 0:
			hw, r, done := k.repeating(repeat, w, r)
			h(hw, r.WithContext(context.WithValue(r.Context(), ctxKey{}, rq)))
			done()
		default:
			h(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, rq)))
		}
	})
}

// WriteJSON writes a JSON answer.
func WriteJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// Arrival returns the source's clock when r arrived (the time its Date
// header gives), for a handler the kit called.
func Arrival(r *http.Request) time.Time {
	if p, ok := r.Context().Value(ctxKey{}).(*Request); ok {
		return p.SourceAt
	}
	return time.Time{}
}

// NewestFirst orders time entries as Toggl and Clockify list them: by
// start, newest first, then by id, highest first.
func NewestFirst[T any, ID cmp.Ordered](es []T, key func(*T) (start time.Time, id ID)) {
	slices.SortFunc(es, func(a, b T) int {
		sa, ia := key(&a)
		sb, ib := key(&b)
		if c := sb.Compare(sa); c != 0 {
			return c
		}
		return cmp.Compare(ib, ia)
	})
}
