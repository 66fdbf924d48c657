package conformance

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
)

// Server is what the suite needs of a provider's fake server, all of it
// the fake kit's: its request log, its ground truth and broken listings on
// demand. Close is called when the test ends.
type Server interface {
	Close()
	Requests() []fakeapi.Request
	Versions(r clients.Resource) map[string]time.Time
	MalformResource(r clients.Resource, m Malformation)
	DropDate(on bool)
	Repeat(m fakeapi.Repeat)
}

// Provider is a Harness declared from a provider's fake server S: what
// differs is how the fake starts, how the source under test is built
// against it, and how a record is put and deleted in its dialect. A
// provider's test runs it with
//
//	conformance.Run(t, conformance.Provider[*toggltest.Server]{Caps: …, Fake: …, Source: …, Put: …, Delete: …})
type Provider[S Server] struct {
	// Caps are the provider's Capabilities.
	Caps Capabilities
	// Fake starts the fake on the suite's clock (now), with its own limits
	// off.
	Fake func(now func() time.Time) S
	// Source builds the source under test against f: o's rate limit, every
	// resource under test, logging to log.
	Source func(f S, o Options, log zerolog.Logger) (clients.Source, error)
	// Put and Delete are Fake's Put and Delete in the fake's dialect; now
	// is the fake's clock.
	Put    func(f S, now time.Time, r clients.Resource, id int64, content string)
	Delete func(f S, r clients.Resource, id int64)
}

// Capabilities returns p.Caps.
func (p Provider[S]) Capabilities() Capabilities { return p.Caps }

// New starts the fake on a fresh manual clock (NewClock), closed when t
// ends, and builds the source under test against it with a logger into t;
// it fails t when the source refuses its parameters.
func (p Provider[S]) New(t *testing.T, o Options) Fake {
	t.Helper()
	clk := NewClock()
	s := p.Fake(clk.Now)
	t.Cleanup(s.Close)
	src, err := p.Source(s, o, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	return &fake[S]{p: p, s: s, clk: clk, src: src}
}

// fake is a Provider's Fake.
type fake[S Server] struct {
	p   Provider[S]
	s   S
	clk *fakeapi.Clock
	src clients.Source
}

func (f *fake[S]) Source() clients.Source { return f.src }

func (f *fake[S]) Tick(d time.Duration) { f.clk.Advance(d) }

func (f *fake[S]) Put(r clients.Resource, id int64, content string) {
	f.p.Put(f.s, f.clk.Now(), r, id, content)
}

func (f *fake[S]) Delete(r clients.Resource, id int64) { f.p.Delete(f.s, r, id) }

func (f *fake[S]) Malform(r clients.Resource, m Malformation) { f.s.MalformResource(r, m) }

func (f *fake[S]) DropDate() { f.s.DropDate(true) }

func (f *fake[S]) Repeat(m fakeapi.Repeat) { f.s.Repeat(m) }

func (f *fake[S]) Requests() []fakeapi.Request { return f.s.Requests() }

func (f *fake[S]) Versions(r clients.Resource) map[string]time.Time { return f.s.Versions(r) }
