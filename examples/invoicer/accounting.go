package invoicer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Accounting is a fake accounting API that creates invoice drafts and
// honours Idempotency-Key the way payment and accounting APIs do (Stripe,
// the IETF Idempotency-Key draft): the same key with the same body returns
// the invoice it created, never a second; the same key with another body is
// refused with 422; a key whose first request is still being processed
// gets 409. A create takes Delay, and finishes even when the client is gone.
type Accounting struct {
	// Delay is how long a create takes; OnCreated, when set, runs after a
	// create's answer was written (tests kill the client there). Set both
	// before serving.
	Delay     time.Duration
	OnCreated func(Invoice)

	mu        sync.Mutex
	invoices  []Invoice
	byKey     map[string]keyed
	inFlight  map[string]bool
	creates   int // POSTs that created an invoice
	posts     int
	conflicts int // POSTs answered 409
	failNext  int // answer the next POSTs with 503
}

type keyed struct {
	body    []byte
	invoice Invoice
}

// Invoice is a draft invoice in the fake accounting system.
type Invoice struct {
	ID       string   `json:"id"`
	ClientID string   `json:"client_id"`
	Week     string   `json:"week"`
	Hours    string   `json:"hours"`
	Entries  []string `json:"entries"`
	Idem     string   `json:"-"`
	Replayed bool     `json:"-"`
}

// NewAccounting returns an empty fake.
func NewAccounting() *Accounting {
	return &Accounting{byKey: map[string]keyed{}, inFlight: map[string]bool{}}
}

// FailNext makes the next n POSTs answer 503.
func (a *Accounting) FailNext(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failNext = n
}

// Invoices returns the invoices created.
func (a *Accounting) Invoices() []Invoice {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Invoice(nil), a.invoices...)
}

// Conflicts returns how many POSTs were answered 409 (key in flight).
func (a *Accounting) Conflicts() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.conflicts
}

// Posts returns how many POSTs arrived.
func (a *Accounting) Posts() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.posts
}

func (a *Accounting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/invoices" {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	key := r.Header.Get("Idempotency-Key")
	inv, status, msg := a.create(key, body)
	if status != http.StatusCreated {
		if status == http.StatusOK {
			w.Header().Set("Idempotent-Replayed", "true")
			writeJSON(w, status, inv)
			return
		}
		http.Error(w, msg, status)
		return
	}
	writeJSON(w, http.StatusCreated, inv)
	if a.OnCreated != nil {
		a.OnCreated(inv)
	}
}

// create handles one POST: the invoice and 201 (or 200, replayed), or an
// error status and message.
func (a *Accounting) create(key string, body []byte) (Invoice, int, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.posts++
	if a.failNext > 0 {
		a.failNext--
		return Invoice{}, http.StatusServiceUnavailable, "accounting is down"
	}
	if key == "" {
		return Invoice{}, http.StatusBadRequest, "Idempotency-Key is required"
	}
	if a.inFlight[key] {
		a.conflicts++
		return Invoice{}, http.StatusConflict, "a request with this Idempotency-Key is being processed"
	}
	if k, ok := a.byKey[key]; ok {
		if !bytes.Equal(k.body, body) {
			return Invoice{}, http.StatusUnprocessableEntity, "Idempotency-Key reused with another request"
		}
		return k.invoice, http.StatusOK, ""
	}
	var inv Invoice
	if err := json.Unmarshal(body, &inv); err != nil {
		return Invoice{}, http.StatusBadRequest, err.Error()
	}
	if a.Delay > 0 {
		a.inFlight[key] = true
		a.mu.Unlock()
		time.Sleep(a.Delay) // the work, whether the client waits or not
		a.mu.Lock()
		delete(a.inFlight, key)
	}
	a.creates++
	inv.ID = fmt.Sprintf("inv_%d", a.creates)
	inv.Idem = key
	a.invoices = append(a.invoices, inv)
	a.byKey[key] = keyed{body: body, invoice: inv}
	return inv, http.StatusCreated, ""
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
