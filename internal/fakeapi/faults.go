package fakeapi

import (
	"cmp"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// Malformation selects how a page is broken by Malform. The kit applies
// the kinds that concern the whole body (HTMLPage, BadJSON, CutShort, in
// WritePage); the others concern the page's first record, which only the
// dialect can render, and a dialect ignores the kinds it does not know.
type Malformation int

const (
	// BadJSON answers a whole body that is not JSON (a stray comma after
	// the opening bracket): a malformed page, for the provider to report.
	// A body cut short is CutShort, a transport fault that httpx retries.
	BadJSON Malformation = iota + 1
	// HTMLPage answers 200 with the dialect's HTML page.
	HTMLPage
	// MissingVersion drops the first record's version stamp (Harvest
	// updated_at, Toggl at, a Clockify feed element's change stamps).
	MissingVersion
	// WrongType gives a field of the first record the wrong JSON type
	// (Harvest updated_at and Toggl at as numbers, Clockify billable as a
	// string).
	WrongType
	// CutShort sends half the body (with a Content-Length to match).
	CutShort
	// Envelope wraps a bare-array page in an object (Clockify).
	Envelope
	// BadDuration breaks the first entry's timeInterval.duration (Clockify).
	BadDuration
	// MissingID drops the id of the page's first record (in Clockify's
	// feed, every id of its first element).
	MissingID
)

var malformationNames = [...]string{
	BadJSON: "bad JSON", HTMLPage: "HTML page", MissingVersion: "record without version",
	WrongType: "field of the wrong type", CutShort: "body cut short", Envelope: "unexpected envelope",
	BadDuration: "bad duration", MissingID: "record without id",
}

// String names the kind in words (test names, messages).
func (m Malformation) String() string {
	if m > 0 && int(m) < len(malformationNames) {
		return malformationNames[m]
	}
	return "malformation " + strconv.Itoa(int(m))
}

// faults holds what was injected and the random fault source.
type faults struct {
	rng                  *rand.Rand
	faultRate, limitRate float64
	failN, failStatus    int
	dropN                int
	slowN                int
	slowD                time.Duration
	limitN               int
	limitAfter           string
	malformed            map[pageKey]Malformation
	onList               func(Request)
}

type pageKey struct {
	endpoint string
	page     int
}

func newFaults(c Config) faults {
	return faults{
		rng:       rand.New(rand.NewPCG(c.Seed, 0x5eed)),
		faultRate: c.FaultRate, limitRate: c.RateLimitRate,
		malformed: map[pageKey]Malformation{},
	}
}

// limits is the state of the rate limits and the quota.
type limits struct {
	served    []time.Time // sliding window of served requests
	level     float64     // leaky bucket
	levelAt   time.Time
	quotaWin  int64
	quotaUsed int
}

// FailNext makes the next n requests answer status (e.g. 500, 502, 503).
func (k *Kit) FailNext(n, status int) {
	k.mu.Lock()
	k.inj.failN, k.inj.failStatus = n, status
	k.mu.Unlock()
}

// DropNext makes the next n requests close the connection without answer.
func (k *Kit) DropNext(n int) {
	k.mu.Lock()
	k.inj.dropN = n
	k.mu.Unlock()
}

// SlowNext delays the next n responses by d (or until the client gives up).
func (k *Kit) SlowNext(n int, d time.Duration) {
	k.mu.Lock()
	k.inj.slowN, k.inj.slowD = n, d
	k.mu.Unlock()
}

// RateLimitNext makes the next n requests answer 429 with the given
// Retry-After header value ("": the Config's RetryAfter, often none).
func (k *Kit) RateLimitNext(n int, retryAfter string) {
	k.mu.Lock()
	k.inj.limitN, k.inj.limitAfter = n, retryAfter
	k.mu.Unlock()
}

// SetFaultRates changes the random 5xx and 429 probabilities.
func (k *Kit) SetFaultRates(fault, rateLimit float64) {
	k.mu.Lock()
	k.inj.faultRate, k.inj.limitRate = fault, rateLimit
	k.mu.Unlock()
}

// Malform breaks page `page` of every listing of endpoint until cleared
// with m = 0. Endpoints and page numbers are the dialect's (see its
// package doc): a listing without pages is page 1.
func (k *Kit) Malform(endpoint string, page int, m Malformation) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if m == 0 {
		delete(k.inj.malformed, pageKey{endpoint, page})
		return
	}
	k.inj.malformed[pageKey{endpoint, page}] = m
}

// Malformed returns how page `page` of endpoint is to be broken (0: not).
func (k *Kit) Malformed(endpoint string, page int) Malformation {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.inj.malformed[pageKey{endpoint, page}]
}

// fault is what the kit answers in the handler's place.
type fault struct {
	wait       time.Duration // before anything else
	drop       bool
	status     int // 0: the handler answers
	retryAfter string
}

// decideLocked picks the fault (if any) for a request that arrived at now
// on the source's clock, and enforces the limits: the sliding window, 429s
// asked for, random 429s, the leaky bucket, the quota; then slowness,
// drops, 5xx asked for and random 5xx.
func (k *Kit) decideLocked(now time.Time) fault {
	ours := time.Now()
	l, f := &k.lim, &k.inj
	if rl := k.cfg.Window; rl.Requests > 0 && rl.Per > 0 {
		cut := 0
		for cut < len(l.served) && ours.Sub(l.served[cut]) >= rl.Per {
			cut++
		}
		l.served = l.served[cut:]
		if len(l.served) >= rl.Requests {
			after := ""
			if k.cfg.WindowRetryAfter {
				secs := math.Ceil(l.served[0].Add(rl.Per).Sub(ours).Seconds())
				after = strconv.Itoa(max(int(secs), 1))
			}
			return k.limited(after)
		}
	}
	if f.limitN > 0 {
		f.limitN--
		return k.limited(f.limitAfter)
	}
	if f.limitRate > 0 && f.rng.Float64() < f.limitRate {
		return k.limited("1")
	}
	if rl := k.cfg.Window; rl.Requests > 0 && rl.Per > 0 {
		l.served = append(l.served, ours)
	}
	if b := k.cfg.Bucket; b.Requests > 0 && b.Per > 0 {
		leak := float64(b.Requests) * ours.Sub(l.levelAt).Seconds() / b.Per.Seconds()
		l.level, l.levelAt = max(l.level-leak, 0), ours
		if l.level+1 > float64(b.Requests) {
			return k.limited("")
		}
		l.level++
	}
	if k.cfg.Quota > 0 {
		win := now.UnixNano() / int64(k.cfg.QuotaWindow)
		if win != l.quotaWin {
			l.quotaWin, l.quotaUsed = win, 0
		}
		if l.quotaUsed >= k.cfg.Quota {
			return fault{status: http.StatusPaymentRequired}
		}
		l.quotaUsed++
	}
	var out fault
	if f.slowN > 0 {
		f.slowN--
		out.wait = f.slowD
	}
	switch {
	case f.dropN > 0:
		f.dropN--
		out.drop = true
	case f.failN > 0:
		f.failN--
		out.status = f.failStatus
	case f.faultRate > 0 && f.rng.Float64() < f.faultRate:
		out.status = http.StatusInternalServerError
	}
	return out
}

func (k *Kit) limited(retryAfter string) fault {
	return fault{status: http.StatusTooManyRequests, retryAfter: cmp.Or(retryAfter, k.cfg.RetryAfter)}
}

// WritePage answers 200 with body, a listing's JSON, broken as m says:
// HTMLPage answers the dialect's HTML page instead, BadJSON puts a stray
// comma after the opening bracket, CutShort sends the first half. Other
// kinds are the dialect's, applied while it rendered body.
func (k *Kit) WritePage(w http.ResponseWriter, body []byte, m Malformation) {
	switch m {
	case HTMLPage:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(k.d.HTMLPage))
		return
	case BadJSON:
		body = slices.Insert(body, 1, ',')
	case CutShort:
		body = body[:len(body)/2]
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}
