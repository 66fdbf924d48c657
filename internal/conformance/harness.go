package conformance

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
)

// Base is the part of a Fake every provider's harness shares: the source
// under test and the fake's clock. A harness embeds it beside its fake
// server (which gives Requests and Versions) and adds Put, Delete and
// Malform in its dialect.
type Base struct {
	Clock *fakeapi.Clock
	Src   clients.Source
}

// Source is the source under test.
func (b *Base) Source() clients.Source { return b.Src }

// Tick moves the fake's clock forward.
func (b *Base) Tick(d time.Duration) { b.Clock.Advance(d) }

// Start starts a fake on a fresh manual clock (NewClock), closed when t
// ends, and builds the source under test against it with a logger into t;
// it fails t when the source refuses its parameters.
func Start[F interface{ Close() }](t *testing.T, fake func(now func() time.Time) F, source func(F, zerolog.Logger) (clients.Source, error)) (F, Base) {
	t.Helper()
	clk := NewClock()
	f := fake(clk.Now)
	t.Cleanup(f.Close)
	src, err := source(f, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	return f, Base{Clock: clk, Src: src}
}
