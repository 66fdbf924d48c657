package simulated

import (
	"context"
	"fmt"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/harvest"
	"github.com/tidemarkhq/tidemark/clients/provider"
)

// Source is a Harvest client of a simulated tracker started for it; Tracker
// is the tracker, whose ground truth the demo checks the mirror against.
type Source struct {
	*harvest.Client
	Tracker *Tracker
}

func init() {
	provider.MustRegister(provider.Kind{
		Name:      "simulated",
		Doc:       "the built-in simulated tracker (Harvest dialect, generated agency, mutation stream)",
		Keys:      []provider.Key{provider.KeySimulated},
		Defaults:  provider.Defaults{RateLimit: harvest.DefaultRateLimit},
		Resources: harvest.Resources,
		New:       newSource,
	})
}

func newSource(ctx context.Context, s provider.Settings, env provider.Env) (provider.Built, error) {
	tr, err := New(Params{Seed: s.Simulated.Seed, Users: s.Simulated.Users, Days: s.Simulated.Days,
		VisibilityDelay: s.Simulated.VisibilityDelay, LateEvery: s.Simulated.LateEvery})
	if err != nil {
		return provider.Built{}, fmt.Errorf("source %s: start the simulated tracker: %w", s.Name, err)
	}
	if s.Simulated.MutationsPerTick > 0 {
		every := s.Simulated.Every
		if every <= 0 {
			every = time.Second
		}
		go func() {
			// The simulated tracker's own bug must not end the process.
			defer func() {
				if err := clients.Recovered("simulated tracker "+s.Name, recover()); err != nil {
					env.Logger.Error().Err(err).Str("stack", string(err.(*clients.PanicError).Stack)).Msg("simulated tracker stopped")
				}
			}()
			tr.Run(ctx, every, s.Simulated.MutationsPerTick)
		}()
	}
	env.Logger.Info().Str("source", s.Name).Str("url", tr.URL()).Msg("simulated tracker started")
	s.BaseURL, s.AccountID, s.Token = tr.URL(), tr.AccountID(), tr.Token()
	c, err := harvest.New(harvest.ParamsOf(s, env))
	if err != nil {
		tr.Close()
		return provider.Built{}, err
	}
	return provider.Built{Source: &Source{Client: c, Tracker: tr}, Close: tr.Close}, nil
}
