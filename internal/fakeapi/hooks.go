package fakeapi

import (
	"bytes"
	"cmp"
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// HookOptions shape how a fake delivers its webhooks: at least once, late
// and sometimes twice, as providers do.
type HookOptions struct {
	// Delay before the first attempt, plus up to Jitter at random (events
	// may then arrive out of order).
	Delay, Jitter time.Duration
	// DuplicateRate is the share of delivered events sent once more after
	// Retry, as after a timeout on the provider's side.
	DuplicateRate float64
	// Retry is the wait after a failed attempt (doubling); default 1 s.
	Retry time.Duration
	// MaxAttempts per event; default 5.
	MaxAttempts int
	// Seed makes the randomness repeatable.
	Seed uint64
	// Concurrency bounds the attempts in flight (default 8), as a
	// provider's delivery workers do.
	Concurrency int
}

// HookAttempt is one delivery attempt in the log.
type HookAttempt struct {
	URL     string
	Event   string // the event's id or kind, as the dialect names it
	Sent    time.Time
	Status  int // 0: no answer
	Attempt int
	Resend  bool // a duplicate of a delivered event
}

// Hooks sends a fake's webhooks, each in its own goroutine, retrying
// failures and duplicating some deliveries, and logs every attempt.
type Hooks struct {
	opts   HookOptions
	client *http.Client
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	slots    chan struct{}
	mu       sync.Mutex
	rnd      *rand.Rand
	attempts []HookAttempt
	failures map[string]int
}

// NewHooks makes a sender; Close stops it.
func NewHooks(o HookOptions) *Hooks {
	o.Retry = cmp.Or(o.Retry, time.Second)
	o.MaxAttempts = cmp.Or(o.MaxAttempts, 5)
	h := &Hooks{opts: o, client: &http.Client{Timeout: 10 * time.Second}, failures: map[string]int{},
		slots: make(chan struct{}, cmp.Or(o.Concurrency, 8)),
		rnd:   rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h
}

// SetOptions changes how the next events are delivered.
func (h *Hooks) SetOptions(o HookOptions) {
	o.Retry = cmp.Or(o.Retry, time.Second)
	o.MaxAttempts = cmp.Or(o.MaxAttempts, 5)
	h.mu.Lock()
	h.opts = o
	h.mu.Unlock()
}

// Send delivers body to url with header; answer, when set, sees each
// answered attempt (Toggl reads the PING's answer).
func (h *Hooks) Send(url, event string, body []byte, header http.Header, answer func(status int, body []byte)) {
	h.mu.Lock()
	o := h.opts
	delay := o.Delay
	if o.Jitter > 0 {
		delay += time.Duration(h.rnd.Int64N(int64(o.Jitter)))
	}
	dup := o.DuplicateRate > 0 && h.rnd.Float64() < o.DuplicateRate
	h.mu.Unlock()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		if !h.sleep(delay) {
			return
		}
		wait := o.Retry
		for attempt := 1; attempt <= o.MaxAttempts; attempt++ {
			if h.post(url, event, body, header, attempt, false, answer) {
				if dup && h.sleep(o.Retry) {
					h.post(url, event, body, header, attempt+1, true, answer)
				}
				return
			}
			if !h.sleep(wait) {
				return
			}
			wait *= 2
		}
	}()
}

func (h *Hooks) sleep(d time.Duration) bool {
	if d <= 0 {
		return h.ctx.Err() == nil
	}
	select {
	case <-h.ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

func (h *Hooks) post(url, event string, body []byte, header http.Header, attempt int, resend bool, answer func(int, []byte)) bool {
	req, err := http.NewRequestWithContext(h.ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return false
	}
	for k, v := range header {
		req.Header[k] = v
	}
	select {
	case h.slots <- struct{}{}:
	case <-h.ctx.Done():
		return false
	}
	defer func() { <-h.slots }()
	a := HookAttempt{URL: url, Event: event, Sent: time.Now(), Attempt: attempt, Resend: resend}
	resp, err := h.client.Do(req)
	var rb []byte
	if err == nil {
		rb, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		a.Status = resp.StatusCode
	}
	ok := a.Status >= 200 && a.Status < 300
	h.mu.Lock()
	h.attempts = append(h.attempts, a)
	if !ok {
		h.failures[url]++
	}
	h.mu.Unlock()
	if answer != nil && err == nil {
		answer(a.Status, rb)
	}
	return ok
}

// Attempts returns the delivery log.
func (h *Hooks) Attempts() []HookAttempt {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]HookAttempt(nil), h.attempts...)
}

// Failures returns how many attempts to url failed.
func (h *Hooks) Failures(url string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failures[url]
}

// Wait waits for the deliveries in flight (retries included).
func (h *Hooks) Wait() { h.wg.Wait() }

// Close stops delivering and waits for the senders.
func (h *Hooks) Close() { h.cancel(); h.wg.Wait() }

// HookSender is a fake's webhook sender, made on first use: embed it, and
// call CloseHooks when the fake closes.
type HookSender struct {
	mu sync.Mutex
	h  *Hooks
}

// Hooks returns the sender: its delivery log and options.
func (s *HookSender) Hooks() *Hooks {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.h == nil {
		s.h = NewHooks(HookOptions{})
	}
	return s.h
}

// CloseHooks stops the sender, if one was made.
func (s *HookSender) CloseHooks() {
	s.mu.Lock()
	h := s.h
	s.mu.Unlock()
	if h != nil {
		h.Close()
	}
}
