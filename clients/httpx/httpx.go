// Package httpx owns the HTTP plumbing every provider client shares: one
// rate limiter per source that never exceeds the provider's window, retries
// with exponential back-off and full jitter for 5xx, dropped connections and
// 2xx bodies cut short, honouring 429 Retry-After and 402 quota windows, and
// typed errors that never carry a secret.
//
// A 2xx body that did not arrive whole is a transport fault, retried like a
// 5xx: a read error mid-body, or a JSON body whose top-level value never
// closes (a prefix sent with a length that matches it). A whole body that
// does not parse is returned as it came: that is bad input, for the
// provider to report, and retrying it cannot help.
//
// The retry budget (Config.MaxAttempts, Config.MaxRetryTime) is spent only
// by failed attempts and the back-off after them. Limiter spacing, 429 and
// 402 waits and source-wide pauses are the source's pace, not failures, and
// do not count, however long they last.
package httpx

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	urlredact "github.com/tidemarkhq/tidemark/internal/redact"
	"golang.org/x/time/rate"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultTimeout            = 30 * time.Second
	DefaultMaxAttempts        = 5
	DefaultMaxRetryTime       = 2 * time.Minute
	DefaultRetryAfter         = 15 * time.Second
	DefaultBackoffBase        = 500 * time.Millisecond
	DefaultBackoffMax         = 30 * time.Second
	DefaultMaxBody      int64 = 256 << 20
)

// RateLimit is a provider's request budget: at most Requests in any window
// of length Per.
type RateLimit struct {
	Requests int
	Per      time.Duration
}

// Interval is the spacing the limiter keeps between requests: Per/(Requests-1)
// rounded up (Per and 2 % for one request per Per), so that any window of length Per holds at most Requests
// requests (Requests+1 of them span Requests intervals > Per), while the
// sustained rate stays within (Requests-1)/Requests of the budget.
func (r RateLimit) Interval() time.Duration {
	if r.Requests <= 0 || r.Per <= 0 {
		return 0
	}
	if r.Requests == 1 {
		// One request per Per has no spare request to absorb jitter: two
		// requests sent exactly Per apart may arrive closer, and a strict
		// leaky bucket (Toggl's 1/s) answers 429. Keep 2 % more.
		return r.Per + r.Per/50
	}
	n := time.Duration(r.Requests - 1)
	return (r.Per + n - 1) / n
}

// UserAgent renders the User-Agent providers ask for: the app, its version
// and a contact.
func UserAgent(version, contact string) string {
	return fmt.Sprintf("tidemark/%s (%s)", cmp.Or(version, "dev"), contact)
}

// Pacer spaces a source's requests across processes: Reserve takes the
// source's next send slot at spacing interval and returns how long to wait
// for it. The budget is the source's, not the process's: a restart, the
// next owner or a CLI run must not start with an empty window.
type Pacer interface {
	Reserve(ctx context.Context, interval time.Duration) (time.Duration, error)
}

// Config configures a Client. Zero fields take the defaults above.
type Config struct {
	// Source names the source in errors and logs.
	Source string
	// RateLimit is the source's budget; zero means unlimited.
	RateLimit RateLimit
	// Pacer, when set, keeps RateLimit's spacing with every other process
	// of the source; this client's own limiter is the fallback when it
	// fails (the database unreachable).
	Pacer Pacer
	// UserAgent is sent on every request; when empty it is built from
	// Version and Contact.
	UserAgent        string
	Version, Contact string
	// Timeout bounds one attempt, including reading the body.
	Timeout time.Duration
	// MaxAttempts and MaxRetryTime bound the retries of failures (5xx,
	// timeouts, dropped connections, bodies cut short): MaxAttempts counts
	// failed attempts, MaxRetryTime the time spent in them and in back-off.
	// Waits the source imposes (limiter spacing, 429 Retry-After, 402
	// quota, pauses set by other callers) count toward neither: they are
	// its pace, and a long one must not fail the next transient 5xx.
	MaxAttempts  int
	MaxRetryTime time.Duration
	// BackoffBase and BackoffMax shape the exponential back-off with full
	// jitter: wait = rand[0, min(BackoffMax, BackoffBase·2^failures)).
	BackoffBase, BackoffMax time.Duration
	// DefaultRetryAfter is the wait after a 429 without Retry-After.
	DefaultRetryAfter time.Duration
	// MaxRateLimitWaits bounds consecutive 429/402 waits for one call; zero
	// means only the context bounds them.
	MaxRateLimitWaits int
	// QuotaWait says how long to wait after a 402 (quota spent). The default
	// waits until the next full hour of the source's clock.
	QuotaWait func(resp *http.Response) time.Duration
	// NotQuota, if set, is asked about each 402 before it is waited out,
	// with how many 402 waits this call has had (resp.Request names the
	// call): an error says this 402 is not a spent quota (a feature the
	// account's plan lacks, say), and the call fails at once with it, as
	// KindStatus, without waiting or pausing the source.
	NotQuota func(resp *http.Response, quotaWaits int) error
	// Headers are set on every request and are secret: their values are
	// redacted from every error, log line and body excerpt.
	Headers http.Header
	// PlainHeaders are set on every request and are not secret.
	PlainHeaders http.Header
	// MaxBody bounds a response body.
	MaxBody int64
	// Logger receives retries and waits at debug/warn level; the zero value
	// (like zerolog.Nop()) logs nothing.
	Logger zerolog.Logger
	// OnResponse, if set, is called for every response (metrics).
	OnResponse func(status int, took time.Duration)
	// OnWait, if set, is called before every wait with its reason: "limiter",
	// "retry_after", "quota" or "backoff".
	OnWait func(reason string, d time.Duration)
	// Transport overrides the client's own transport (tests).
	Transport http.RoundTripper
}

// Client performs requests for one source. It is safe for concurrent use;
// all callers share its limiter.
type Client struct {
	cfg     Config
	logOnce sync.Once
	log     zerolog.Logger // derived on first use: most lines go to the pass's logger
	hc      *http.Client
	lim     *rate.Limiter
	secrets []string

	mu         sync.Mutex
	pauseUntil time.Time
}

// New returns a Client for cfg.
func New(cfg Config) *Client {
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.MaxAttempts = cmp.Or(cfg.MaxAttempts, DefaultMaxAttempts)
	cfg.MaxRetryTime = cmp.Or(cfg.MaxRetryTime, DefaultMaxRetryTime)
	cfg.BackoffBase = cmp.Or(cfg.BackoffBase, DefaultBackoffBase)
	cfg.BackoffMax = cmp.Or(cfg.BackoffMax, DefaultBackoffMax)
	cfg.DefaultRetryAfter = cmp.Or(cfg.DefaultRetryAfter, DefaultRetryAfter)
	cfg.MaxBody = cmp.Or(cfg.MaxBody, DefaultMaxBody)
	if cfg.UserAgent == "" {
		cfg.UserAgent = UserAgent(cfg.Version, cfg.Contact)
	}
	c := &Client{cfg: cfg}
	tr := cfg.Transport
	if tr == nil {
		tr = sharedTransport()
	}
	c.hc = &http.Client{
		Transport: tr,
		// Never follow redirects: a redirect elsewhere would carry headers
		// to a host we did not configure.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	if iv := cfg.RateLimit.Interval(); iv > 0 {
		c.lim = rate.NewLimiter(rate.Every(iv), 1)
	}
	c.secrets = secretsOf(cfg.Headers)
	return c
}

// secretsOf lists the strings to redact: each header value, the credential
// after an auth scheme, and the parts of a Basic credential.
func secretsOf(h http.Header) []string {
	var out []string
	add := func(s string) {
		if len(s) >= 4 {
			out = append(out, s)
		}
	}
	for _, vs := range h {
		for _, v := range vs {
			add(v)
			scheme, cred, ok := strings.Cut(v, " ")
			if !ok {
				continue
			}
			add(cred)
			if strings.EqualFold(scheme, "basic") {
				if dec, err := base64.StdEncoding.DecodeString(cred); err == nil {
					add(string(dec))
					u, p, _ := strings.Cut(string(dec), ":")
					add(u)
					add(p)
				}
			}
		}
	}
	// Longest first so that a secret containing another is replaced whole.
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if len(out[j]) > len(out[i]) {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// Source returns the configured source name.
func (c *Client) Source() string { return c.cfg.Source }

// Redact removes the client's secrets from s.
func (c *Client) Redact(s string) string { return redact(s, c.secrets) }

// DecodeError is the package DecodeError with the client's secrets redacted
// from the body excerpt.
func (c *Client) DecodeError(resource string, page int, field, what string, body []byte) *Error {
	e := DecodeError(c.cfg.Source, resource, page, field, c.Redact(what), nil)
	e.Body = snippet(body, c.secrets)
	return e
}

// Request is one logical call; Resource and Page only name it in errors.
type Request struct {
	Method   string // default GET
	URL      string
	Body     []byte
	Header   http.Header // extra, non-secret
	Resource string
	Page     int
	// Decode, when set, decodes a 2xx body inside the retry loop: an error
	// wrapping ErrBodyCutShort (the JSON ended before its top-level value
	// closed) retries the request like any body cut short, within the
	// budget; any other error is returned as it is. The completeness check
	// is then left to it, so a provider whose decoder reads every byte
	// anyway does not pay for a second pass.
	Decode func(body []byte, receivedAt time.Time) error
}

// Response is a successful (2xx) response, body fully read.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	// Date is the source's clock (the Date header), zero when absent.
	Date time.Time
	// ReceivedAt is our clock when the body was read.
	ReceivedAt time.Time
}

// Clock is the time a version can be taken from: the source's Date, else
// when the response was received (a proxy may drop Date; a resource
// versioned by the page's clock must still get a version).
func (r *Response) Clock() time.Time {
	if r.Date.IsZero() {
		return r.ReceivedAt
	}
	return r.Date
}

type attemptResult struct {
	status int
	header http.Header
	body   []byte
	err    error // transport error, already redacted
}

// Do performs req under the limiter with retries. It returns a *Response for
// 2xx, and an *Error otherwise.
func (c *Client) Do(ctx context.Context, req Request) (*Response, error) {
	method := cmp.Or(req.Method, http.MethodGet)
	u, err := url.Parse(req.URL)
	if err != nil {
		return nil, c.fail(req, method, "", KindTransport, 0, 0, nil, fmt.Errorf("invalid URL: %w", &redactedError{msg: c.Redact(err.Error()), err: errors.Unwrap(err)}))
	}
	path := u.EscapedPath()
	var (
		// spent is the retry budget used: time in failed attempts and
		// back-off sleeps only. Limiter spacing, pauses, 429 and 402 waits
		// are the source's pace, not failures; counting them would let one
		// quota wait fail the next transient 5xx outright.
		spent      time.Duration
		failures   int
		waits      int
		quotaWaits int
		attempts   int
	)
	for {
		if err := c.acquire(ctx); err != nil {
			return nil, c.fail(req, method, path, KindTransport, 0, attempts, nil, err)
		}
		attempts++
		t0 := time.Now()
		res := c.attempt(ctx, method, req)
		took := time.Since(t0)
		if res.err == nil && c.cfg.OnResponse != nil {
			c.cfg.OnResponse(res.status, took)
		}
		if ctx.Err() != nil {
			return nil, c.fail(req, method, path, KindTransport, res.status, attempts, nil, ctx.Err())
		}
		switch {
		case res.err == nil && res.status >= 200 && res.status < 300:
			resp := &Response{
				Status: res.status, Header: res.header, Body: res.body,
				Date: parseDate(res.header), ReceivedAt: time.Now(),
			}
			if req.Decode == nil {
				return resp, nil
			}
			derr := req.Decode(resp.Body, resp.ReceivedAt)
			if derr == nil {
				return resp, nil
			}
			if !errors.Is(derr, ErrBodyCutShort) {
				return nil, derr
			}
			// The decoder found the JSON cut short: a transfer fault.
			res.err = &cutShortError{got: int64(len(res.body)), want: -1}

		case res.err == nil && (res.status == http.StatusTooManyRequests || res.status == http.StatusPaymentRequired):
			waits++
			reason, d := "retry_after", retryAfter(res.header, c.cfg.DefaultRetryAfter)
			if res.status == http.StatusPaymentRequired {
				hr := &http.Response{StatusCode: res.status, Header: res.header, Body: io.NopCloser(bytes.NewReader(res.body)),
					Request: &http.Request{Method: method, URL: u}}
				if c.cfg.NotQuota != nil {
					if err := c.cfg.NotQuota(hr, quotaWaits); err != nil {
						return nil, c.fail(req, method, path, KindStatus, res.status, attempts, res.body, err)
					}
				}
				quotaWaits++
				hr.Body = io.NopCloser(bytes.NewReader(res.body)) // NotQuota may have read it
				reason, d = "quota", c.quotaWait(hr)
			}
			if c.cfg.MaxRateLimitWaits > 0 && waits > c.cfg.MaxRateLimitWaits {
				return nil, c.fail(req, method, path, KindRateLimited, res.status, attempts, res.body, nil)
			}
			c.pause(d)
			c.logger(ctx).Warn().Str("resource", req.Resource).Int("page", req.Page).Int("status", res.status).
				Dur("wait", d).Msg("source asked us to wait")
			c.notify(reason, d)
			// The next acquire waits for the pause, with every other caller.
			if err := sleep(ctx, d); err != nil {
				return nil, c.fail(req, method, path, KindRateLimited, res.status, attempts, res.body, err)
			}
			continue

		case res.err == nil && !retryableStatus(res.status):
			kind := KindStatus
			switch res.status {
			case http.StatusUnauthorized, http.StatusForbidden:
				kind = KindUnauthorized
			case http.StatusNotFound:
				kind = KindNotFound
			}
			return nil, c.fail(req, method, path, kind, res.status, attempts, res.body, nil)

		case res.err != nil && !retryableErr(res.err):
			return nil, c.fail(req, method, path, KindTransport, 0, attempts, nil, res.err)
		}

		// A failure worth retrying: 5xx, timeout, dropped connection, body
		// cut short.
		failures++
		spent += took
		kind := KindStatus
		if res.err != nil {
			kind = KindTransport
		}
		if failures >= c.cfg.MaxAttempts {
			return nil, c.fail(req, method, path, kind, res.status, attempts, res.body, res.err)
		}
		d := c.backoff(failures)
		if spent+d > c.cfg.MaxRetryTime {
			return nil, c.fail(req, method, path, kind, res.status, attempts, res.body, res.err)
		}
		ev := c.logger(ctx).Debug()
		if res.err != nil {
			ev = ev.Str("error", res.err.Error())
		}
		ev.Str("resource", req.Resource).Int("page", req.Page).Int("status", res.status).
			Int("attempt", attempts).Dur("wait", d).Msg("retrying request")
		c.notify("backoff", d)
		if err := sleep(ctx, d); err != nil {
			return nil, c.fail(req, method, path, kind, res.status, attempts, res.body, err)
		}
		spent += d
	}
}

// CheckBaseURL refuses a provider base URL that is not absolute http(s).
func CheckBaseURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("base_url %q is not an http(s) URL", urlredact.URL(raw))
	}
	return nil
}

// logger prefers the pass's logger carried in ctx (it names the source,
// resource and run), and falls back to the client's own.
func (c *Client) logger(ctx context.Context) *zerolog.Logger {
	if l := zerolog.Ctx(ctx); l.GetLevel() != zerolog.Disabled {
		return l
	}
	// A derived logger costs a 500-byte buffer: built only when needed,
	// not for each of thousands of sources up front.
	c.logOnce.Do(func() { c.log = c.cfg.Logger.With().Str("source", c.cfg.Source).Logger() })
	return &c.log
}

func (c *Client) fail(req Request, method, path string, kind Kind, status, attempts int, body []byte, cause error) *Error {
	if cause != nil && !isCtxErr(cause) {
		if _, ok := cause.(*redactedError); !ok {
			cause = &redactedError{msg: c.Redact(cause.Error()), err: cause}
		}
	}
	return &Error{
		Kind: kind, Source: c.cfg.Source, Resource: req.Resource, Page: req.Page,
		Method: method, Path: path, Status: status, Attempts: attempts,
		Body: snippet(body, c.secrets), Err: cause,
	}
}

func isCtxErr(err error) bool {
	return err == context.Canceled || err == context.DeadlineExceeded
}

func (c *Client) notify(reason string, d time.Duration) {
	if c.cfg.OnWait != nil {
		c.cfg.OnWait(reason, d)
	}
}

// attempt performs one HTTP exchange bounded by the per-request timeout.
func (c *Client) attempt(ctx context.Context, method string, req Request) attemptResult {
	actx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	var body io.Reader
	if req.Body != nil {
		body = bytes.NewReader(req.Body)
	}
	hr, err := http.NewRequestWithContext(actx, method, req.URL, body)
	if err != nil {
		return attemptResult{err: &redactedError{msg: c.Redact(err.Error()), err: errors.Unwrap(err)}}
	}
	for k, vs := range c.cfg.Headers {
		hr.Header[k] = vs
	}
	for k, vs := range c.cfg.PlainHeaders {
		hr.Header[k] = vs
	}
	for k, vs := range req.Header {
		hr.Header[k] = vs
	}
	hr.Header.Set("User-Agent", c.cfg.UserAgent)
	if hr.Header.Get("Accept") == "" {
		hr.Header.Set("Accept", "application/json")
	}
	resp, err := c.hc.Do(hr)
	if err != nil {
		return attemptResult{err: c.transportErr(ctx, actx, err)}
	}
	defer resp.Body.Close()
	b, err := readBody(resp, c.cfg.MaxBody)
	if err != nil {
		terr := c.transportErr(ctx, actx, err)
		if errors.Is(err, errBodyTooLarge) || ctx.Err() != nil || actx.Err() != nil {
			return attemptResult{err: terr}
		}
		// The headers came, the body did not arrive whole (dropped, reset,
		// shorter than announced): retry it like any dropped connection.
		return attemptResult{status: resp.StatusCode, header: resp.Header, body: b,
			err: &cutShortError{got: int64(len(b)), want: resp.ContentLength, cause: terr}}
	}
	if req.Decode == nil && resp.StatusCode >= 200 && resp.StatusCode < 300 && checkComplete(method, resp.StatusCode, resp.Header, b) && !completeJSON(b) {
		// HTTP saw a whole body, but the JSON stops before it closes: a
		// prefix was sent as if it were everything. Missing bytes are a
		// transfer fault, not bad input.
		return attemptResult{status: resp.StatusCode, header: resp.Header, body: b,
			err: &cutShortError{got: int64(len(b)), want: -1}}
	}
	return attemptResult{status: resp.StatusCode, header: resp.Header, body: b}
}

var errBodyTooLarge = errors.New("response body too large")

// readBody reads the whole body; on a read error it returns what arrived.
func readBody(resp *http.Response, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	if n := resp.ContentLength; n > 0 && n <= limit {
		buf.Grow(int(n) + bytes.MinRead)
	}
	n, err := buf.ReadFrom(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return buf.Bytes(), err
	}
	if n > limit {
		return nil, fmt.Errorf("%w: over %d bytes", errBodyTooLarge, limit)
	}
	return buf.Bytes(), nil
}

// errAttemptTimeout marks an attempt that ran out of its own timeout (not
// the caller's context): retryable.
var errAttemptTimeout = errors.New("request timed out")

func (c *Client) transportErr(ctx, actx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if actx.Err() != nil {
		return &redactedError{msg: fmt.Sprintf("request timed out after %s", c.cfg.Timeout), err: errAttemptTimeout}
	}
	// url.Error's text holds the URL; keep only the cause's text.
	var ue *url.Error
	if errors.As(err, &ue) {
		return &redactedError{msg: c.Redact(ue.Err.Error()), err: ue.Err}
	}
	return &redactedError{msg: c.Redact(err.Error()), err: err}
}

func retryableStatus(status int) bool {
	return status >= 500 || status == http.StatusRequestTimeout
}

// retryableErr decides by behaviour: timeouts, dropped and refused
// connections are worth another attempt; a malformed request is not.
func retryableErr(err error) bool {
	if errors.Is(err, errAttemptTimeout) || errors.Is(err, ErrBodyCutShort) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe)
}

// backoff is exponential with full jitter.
func (c *Client) backoff(failures int) time.Duration {
	ceil := c.cfg.BackoffBase << min(failures-1, 30)
	if ceil <= 0 || ceil > c.cfg.BackoffMax {
		ceil = c.cfg.BackoffMax
	}
	return time.Duration(rand.Int64N(int64(ceil) + 1))
}

// acquire waits for any source-wide pause, then for the limiter.
func (c *Client) acquire(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		c.mu.Lock()
		wait := time.Until(c.pauseUntil)
		c.mu.Unlock()
		if wait > 0 {
			if err := sleep(ctx, wait); err != nil {
				return err
			}
			continue
		}
		if c.lim == nil {
			return nil
		}
		if c.cfg.Pacer != nil {
			d, err := c.cfg.Pacer.Reserve(ctx, c.cfg.RateLimit.Interval())
			if err == nil {
				if d > 0 {
					c.notify("limiter", d)
					if err := sleep(ctx, d); err != nil {
						return err
					}
				}
				if c.resumed() {
					return nil
				}
				continue
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			c.logger(ctx).Warn().Err(err).Msg("shared rate limiter unavailable: spacing this process's requests alone")
		}
		r := c.lim.Reserve()
		if d := r.Delay(); d > 0 {
			c.notify("limiter", d)
			if err := sleep(ctx, d); err != nil {
				r.Cancel()
				return err
			}
		}
		if c.resumed() {
			return nil
		}
	}
}

// resumed reports whether no pause was set while a caller waited for its
// slot: a pause (another caller got a 429) wins, and the slot is dropped,
// which only errs on the safe side.
func (c *Client) resumed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !time.Now().Before(c.pauseUntil)
}

// pause holds every caller of this client for d.
func (c *Client) pause(d time.Duration) {
	until := time.Now().Add(d)
	c.mu.Lock()
	if until.After(c.pauseUntil) {
		c.pauseUntil = until
	}
	c.mu.Unlock()
}

// LongWait is how long a wait must be for WithLongWaits' hooks to run: a
// quota, a Retry-After or a long back-off, not the limiter's spacing.
const LongWait = 2 * time.Second

type longWaitsKey struct{}

type longWaits struct {
	leave func()
	back  func(context.Context) error
}

// WithLongWaits returns ctx under which every wait of at least LongWait
// (Sleep, and the client's own) calls leave before it and back after it:
// a daemon gives a pass's slot up while the source keeps the pass waiting,
// an hour for a quota perhaps. back may block; its error ends the wait as
// ctx's would.
func WithLongWaits(ctx context.Context, leave func(), back func(context.Context) error) context.Context {
	return context.WithValue(ctx, longWaitsKey{}, longWaits{leave, back})
}

// Sleep waits d or until ctx ends, as the client waits for its source
// (WithLongWaits).
func Sleep(ctx context.Context, d time.Duration) error { return sleep(ctx, d) }

func sleep(ctx context.Context, d time.Duration) (err error) {
	if d <= 0 {
		return ctx.Err()
	}
	if h, ok := ctx.Value(longWaitsKey{}).(longWaits); ok && d >= LongWait {
		h.leave()
		defer func() {
			if berr := h.back(ctx); err == nil {
				err = berr
			}
		}()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func parseDate(h http.Header) time.Time {
	v := h.Get("Date")
	if v == "" {
		return time.Time{}
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

// retryAfter reads Retry-After as seconds or an HTTP date (measured against
// the response's Date header when present, so a skewed source clock does not
// distort the wait).
func retryAfter(h http.Header, def time.Duration) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return def
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return def
		}
		// Bounded before the multiplication, which would overflow.
		return time.Duration(min(n, int64(MaxRetryAfter/time.Second))) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return def
	}
	now := parseDate(h)
	if now.IsZero() {
		now = time.Now()
	}
	return min(max(t.Sub(now), 0), MaxRetryAfter)
}

// MaxRetryAfter bounds the wait a Retry-After header asks for: a hostile or
// broken value (a year, or one that overflows) must not park a source for
// longer than its back-off would.
const MaxRetryAfter = time.Hour

func (c *Client) quotaWait(resp *http.Response) time.Duration {
	if c.cfg.QuotaWait != nil {
		return c.cfg.QuotaWait(resp)
	}
	return UntilNextHour(resp.Header)
}

// UntilNextHour is the default 402 wait: until the next full hour of the
// source's clock (its Date header, else ours).
func UntilNextHour(h http.Header) time.Duration {
	now := parseDate(h)
	if now.IsZero() {
		now = time.Now()
	}
	return now.Truncate(time.Hour).Add(time.Hour).Sub(now)
}

// shared is the transport of every client that brings none: one for the
// process, not one per source. A thousand sources with a transport each
// kept a thousand pools of idle connections (BENCHMARKS.md, issue 15). It
// is not http.DefaultTransport, so nobody
// else's CloseIdleConnections (httptest.Server.Close calls it on the
// default) cuts ours, and it keeps more idle connections per host than the
// default's two, so that many sources on one API do not dial and handshake
// anew each pass.
var shared = sync.OnceValue(func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 32
	t.MaxIdleConns = 256
	return t
})

func sharedTransport() http.RoundTripper { return shared() }
