package app

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/provider"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/poller"
)

// A replica holds what a source costs only while it owns it (issue 15: 10,000
// sources over 3 replicas, each holding its share). In the daemon a source is
// a slot: its name and resources, and its client (HTTP configuration, rate
// limiter, loggers, wait recorder) built when the daemon takes the source
// and dropped when it gives it up, with the source's metric series. Every
// source is still built once at start, to refuse a bad configuration then
// rather than at its adoption; that client is dropped at once.

// slot is a configured source whose client exists while it is needed.
type slot struct {
	sc        *config.Source
	resources []clients.Resource
	build     func() (provider.Built, error)

	mu  sync.Mutex
	src clients.Source // nil: not built
}

func (s *slot) Name() string                  { return s.sc.Name }
func (s *slot) Resources() []clients.Resource { return s.resources }

// client returns the source's client, built when missing; it stays until
// release.
func (s *slot) client() (clients.Source, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.src == nil {
		b, err := s.build()
		if err != nil {
			return nil, err
		}
		s.src = b.Source
	}
	return s.src, nil
}

// built returns the client if there is one (nil: none).
func (s *slot) built() clients.Source {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.src
}

// release drops the client; a listing in flight keeps the one it has.
func (s *slot) release() {
	s.mu.Lock()
	s.src = nil
	s.mu.Unlock()
}

func (s *slot) List(ctx context.Context, r clients.Resource, w clients.Window, fn func(context.Context, clients.Page) error) error {
	c, err := s.client()
	if err != nil {
		return err
	}
	return c.List(ctx, r, w, fn)
}

// Unwrap returns the source's client, for its optional capabilities
// (clients.As): the one built if there is one, else one built for the
// caller and not kept (a webhook event decoded by a replica that does not
// own the source). nil when it cannot be built.
func (s *slot) Unwrap() clients.Source {
	if c := s.built(); c != nil {
		return c
	}
	b, err := s.build()
	if err != nil {
		return nil
	}
	return b.Source
}

// shareSources makes the daemon's replica hold a source's client and metric
// series only while it owns the source: built when it takes it (with the
// source's schedule gauge, the alerts' yardstick), dropped when it gives it
// up.
func (a *App) shareSources(d *poller.Daemon) {
	d.OnOwnership(func(source string, owned bool) {
		a.slotsMu.Lock()
		s := a.slots[source] // nil for a source built once (the demo's simulated one)
		a.slotsMu.Unlock()
		if !owned {
			if s != nil {
				s.release()
			}
			a.Metrics.Forget(source)
			return
		}
		if sc, err := a.cfg().Source(source); err == nil {
			a.Metrics.Schedule(source, ScheduleGap(sc.Schedule, time.Now()))
		}
		if s == nil {
			return
		}
		if _, err := s.client(); err != nil {
			// Its passes fail with the same error, recorded and backed off.
			a.Log.Error().Str("source", source).Err(err).Msg("could not build the source's client")
		}
	})
}

// builtSources names the sources that have a client now, sorted (tests).
func (a *App) builtSources() []string {
	a.slotsMu.Lock()
	defer a.slotsMu.Unlock()
	var out []string
	for name, s := range a.slots {
		if s.built() != nil {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
