// Package sourcetest owns the test setup the provider packages share:
// building a client against a fake with fast HTTP waits, listing a source
// into pages, indexing what was listed, checking a decode error's words,
// the page malformations and Params refusals every provider reports alike,
// and a log sink safe for a client's concurrent writes. It is for tests
// only; the fakes themselves live in internal/fakeapi and beside each
// provider.
package sourcetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/provider"
	"github.com/tidemarkhq/tidemark/internal/logtest"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/internal/slowdown"
	"github.com/tidemarkhq/tidemark/poller"
	"github.com/tidemarkhq/tidemark/schema"
)

// Opt adjusts a provider's Params P, then (called again with zero Params)
// the HTTP configuration built from them.
type Opt[P any] func(*P, *httpx.Config)

// Kind is how a provider's client is built from its Params P.
type Kind[P, C any] struct {
	HTTPConfig func(P) httpx.Config
	// SetHTTP puts the built HTTP client in the Params.
	SetHTTP func(*P, *httpx.Client)
	New     func(P) (C, error)
}

// Build builds a client from p: opts adjust p, then the HTTP configuration
// built from it, after fast waits (1 ms back-off) so that retries cost no
// test time, and 20 s per request (scaled by TIDEMARK_TEST_SLOWDOWN): a
// safety net, not the expected time; 2 s timed out pages of 1,200 entries
// on a busy 2-core machine. A test of timeouts sets its own. It fails t
// when New refuses the Params.
func (k Kind[P, C]) Build(t testing.TB, p P, opts ...Opt[P]) C {
	t.Helper()
	for _, o := range opts {
		o(&p, &httpx.Config{})
	}
	cfg := k.HTTPConfig(p)
	cfg.BackoffBase, cfg.BackoffMax = time.Millisecond, 2*time.Millisecond
	cfg.Timeout = slowdown.Scale(20 * time.Second)
	for _, o := range opts {
		var zero P
		o(&zero, &cfg)
	}
	k.SetHTTP(&p, httpx.New(cfg))
	c, err := k.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Closed registers f's Close with t and returns f: a fake server that
// outlives no test.
func Closed[F interface{ Close() }](t testing.TB, f F) F {
	t.Helper()
	t.Cleanup(f.Close)
	return f
}

// Collect lists r for w and returns every page, and the listing's error.
func Collect(t testing.TB, src clients.Source, r clients.Resource, w clients.Window) ([]clients.Page, error) {
	t.Helper()
	return CollectContext(t.Context(), src, r, w)
}

// CollectContext is Collect with ctx (a logger in it, say) instead of the
// test's.
func CollectContext(ctx context.Context, src clients.Source, r clients.Resource, w clients.Window) ([]clients.Page, error) {
	var pages []clients.Page
	err := src.List(ctx, r, w, func(_ context.Context, p clients.Page) error {
		pages = append(pages, p)
		return nil
	})
	return pages, err
}

// Records indexes the pages' records by id; a later page's record wins.
func Records(pages []clients.Page) map[string]clients.Record {
	out := map[string]clients.Record{}
	for _, p := range pages {
		for _, r := range p.Records {
			out[r.ID] = r
		}
	}
	return out
}

// IDs are the pages' record ids in the order served, repeats included.
func IDs(pages []clients.Page) []string {
	var out []string
	for _, p := range pages {
		for _, r := range p.Records {
			out = append(out, r.ID)
		}
	}
	return out
}

// WantDecodeError fails t unless err is a decode error of source's page of
// res that names field and says what.
func WantDecodeError(t testing.TB, err error, source, res string, page int, field, what string) {
	t.Helper()
	if !errors.Is(err, httpx.ErrDecode) {
		t.Fatalf("err = %v, want a decode error", err)
	}
	msg := err.Error()
	prefix := fmt.Sprintf("decode %s %s page %d: field %s: ", source, res, page, field)
	if !strings.HasPrefix(msg, prefix) || !strings.Contains(msg, what) {
		t.Fatalf("error %q\nwant prefix %q and %q", msg, prefix, what)
	}
}

// EachChange runs f in a parallel subtest per way a record can leave a
// listing mid-walk: deleted, or moved out of what is listed.
func EachChange(t *testing.T, f func(t *testing.T, deleted bool)) {
	for _, change := range []string{"delete", "move"} {
		t.Run(change, func(t *testing.T) {
			t.Parallel()
			f(t, change == "delete")
		})
	}
}

// RequestLog is a fake's request log (fakeapi.Kit).
type RequestLog interface {
	RequestCount() int
	ResetRequests()
}

// CheckPassCost holds the budget planner's model against a fake's request
// log: it lists every resource once through src (a warm-up, so that the
// once-a-day requests are made), then each again over w(r), and fails where
// the requests f saw differ from cost(r).Requests. The data must fit one
// page per listing: the model's lower bound is then exact.
func CheckPassCost(t *testing.T, src clients.Source, f RequestLog, resources []clients.Resource, w func(clients.Resource) clients.Window, cost func(clients.Resource) provider.Cost) {
	t.Helper()
	for _, r := range resources {
		if _, err := Collect(t, src, r, w(r)); err != nil {
			t.Fatalf("warm-up %s: %v", r, err)
		}
	}
	for _, r := range resources {
		f.ResetRequests()
		if _, err := Collect(t, src, r, w(r)); err != nil {
			t.Fatalf("%s: %v", r, err)
		}
		if got, want := f.RequestCount(), cost(r).Requests; got != want {
			t.Errorf("%s over %+v: %d requests, the planner counts %d (%s)", r, w(r), got, want, cost(r).Note)
		}
	}
}

// ReconcileWindow is the window a reconcile lists r over (poller.reconcile):
// lookbackDays back and a week ahead by spent date, or the whole listing.
func ReconcileWindow(today clients.Date, lookbackDays int) func(clients.Resource) clients.Window {
	return func(r clients.Resource) clients.Window {
		if def, ok := schema.Lookup(r); ok && def.ListedByDate() {
			return clients.Window{From: today.AddDays(-lookbackDays), To: today.AddDays(7)}
		}
		return clients.Window{}
	}
}

// SyncBuffer is a log sink safe for a client's concurrent writes.
type SyncBuffer = logtest.Buffer

// Mirror is a poller of s over a fresh database (its pool too), closed
// when the test ends: a provider's behaviour seen through passes.
func Mirror(t *testing.T, s poller.Source) (*poller.Poller, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.DB(t)
	p, err := poller.New(poller.Params{Pool: pool, Logger: zerolog.New(zerolog.NewTestWriter(t)), Sources: []poller.Source{s}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, pool
}
