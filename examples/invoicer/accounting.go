package invoicer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// Accounting is a fake accounting API that creates invoice drafts and
// honours Idempotency-Key the way payment and accounting APIs do: the same
// key with the same body returns the invoice it created, never a second;
// the same key with another body is refused with 422.
type Accounting struct {
	mu       sync.Mutex
	invoices []Invoice
	byKey    map[string]keyed
	creates  int // POSTs that created an invoice
	posts    int
	failNext int // answer the next POSTs with 503
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
func NewAccounting() *Accounting { return &Accounting{byKey: map[string]keyed{}} }

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
	a.mu.Lock()
	defer a.mu.Unlock()
	a.posts++
	if a.failNext > 0 {
		a.failNext--
		http.Error(w, "accounting is down", http.StatusServiceUnavailable)
		return
	}
	if key == "" {
		http.Error(w, "Idempotency-Key is required", http.StatusBadRequest)
		return
	}
	if k, ok := a.byKey[key]; ok {
		if !bytes.Equal(k.body, body) {
			http.Error(w, "Idempotency-Key reused with another request", http.StatusUnprocessableEntity)
			return
		}
		w.Header().Set("Idempotent-Replayed", "true")
		writeJSON(w, http.StatusOK, k.invoice)
		return
	}
	var inv Invoice
	if err := json.Unmarshal(body, &inv); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	a.creates++
	inv.ID = fmt.Sprintf("inv_%d", a.creates)
	inv.Idem = key
	a.invoices = append(a.invoices, inv)
	a.byKey[key] = keyed{body: body, invoice: inv}
	writeJSON(w, http.StatusCreated, inv)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
