package app

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/periodic"
	"github.com/tidemarkhq/tidemark/poller"
	"github.com/tidemarkhq/tidemark/upsert"
)

// prepareHistory brings the history of ps in line with its `history:`
// before any pass writes (upsert.PrepareHistory): turned on, the history
// table exists and the stored versions are recorded as first seen; turned
// off, it is marked off and what was recorded stays.
func (a *App) prepareHistory(ctx context.Context, ps poller.Source) error {
	if a.Pool == nil {
		return nil
	}
	on, err := a.historyOn(ctx)
	if err != nil {
		return err
	}
	// Only what changes: a source without history, and none recorded,
	// costs nothing (a thousand idle sources start as fast as before).
	var off []clients.Resource
	for _, r := range ps.Resources {
		if !ps.HistoryOn(r) && on[ps.Name()+"/"+string(r)] {
			off = append(off, r)
		}
	}
	if len(ps.History) == 0 && len(off) == 0 {
		return nil
	}
	if err := upsert.PrepareHistory(ctx, a.Pool, ps.Name(), ps.History, off); err != nil {
		return err
	}
	a.histMu.Lock()
	defer a.histMu.Unlock()
	for _, r := range off {
		delete(a.histOn, ps.Name()+"/"+string(r))
	}
	for _, r := range ps.History {
		a.histOn[ps.Name()+"/"+string(r)] = true
	}
	return nil
}

// prepareHistories prepares the history of the sources that keep one,
// before their passes run. The database may be down as the daemon starts,
// which must not stop it: a source whose history could not be prepared is
// tried again in the background (its passes fail meanwhile, as they would
// on that database anyway). A source turned off is marked off by the
// daemon's history loop (StartHistoryRetention), so that building a poller
// never needs the database.
func (a *App) prepareHistories(ctx context.Context, srcs []poller.Source) {
	for _, ps := range srcs {
		if len(ps.History) == 0 {
			continue
		}
		if err := a.prepareHistory(ctx, ps); err != nil {
			a.Log.Warn().Err(err).Str("source", ps.Name()).Msg("history not prepared yet; trying again every 10 s")
			go a.prepareLater(ctx, ps)
		}
	}
}

// prepareLater retries prepareHistory until it succeeds or ctx ends.
func (a *App) prepareLater(ctx context.Context, ps poller.Source) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Second):
		}
		if err := a.prepareHistory(ctx, ps); err == nil {
			a.Log.Info().Str("source", ps.Name()).Msg("history prepared")
			return
		}
	}
}

// historyOn reads history_sources once: "source/resource" → on.
func (a *App) historyOn(ctx context.Context) (map[string]bool, error) {
	a.histMu.Lock()
	defer a.histMu.Unlock()
	if a.histOn != nil {
		return maps.Clone(a.histOn), nil
	}
	rows, err := a.Pool.Query(ctx, `SELECT source || '/' || resource FROM history_sources`)
	if err != nil {
		return nil, fmt.Errorf("history: read history_sources: %w", err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("history: read history_sources: %w", err)
	}
	a.histOn = map[string]bool{}
	for _, k := range keys {
		a.histOn[k] = true
	}
	return maps.Clone(a.histOn), nil
}

// historyConfigured reports, for source, whether the config as it is now
// (a reload replaces it) has history on for a resource: the webhook
// intake's applies follow it.
func (a *App) historyConfigured(source string) func(clients.Resource) bool {
	return func(r clients.Resource) bool {
		a.cfgMu.RLock()
		defer a.cfgMu.RUnlock()
		sc, err := a.Config.Source(source)
		return err == nil && sc.HistoryOn(string(r))
	}
}

// namedSource is a clients.Source with only a name: what marking a
// source's history off needs of it.
type namedSource string

func (n namedSource) Name() string                  { return string(n) }
func (n namedSource) Resources() []clients.Resource { return nil }
func (n namedSource) List(context.Context, clients.Resource, clients.Window, func(context.Context, clients.Page) error) error {
	return nil
}

// configuredResources are sc's resources.
func configuredResources(sc *config.Source) []clients.Resource {
	out := make([]clients.Resource, len(sc.Resources))
	for i, r := range sc.Resources {
		out[i] = clients.Resource(r)
	}
	return out
}

// historyEvery is how often the daemon prunes history past `history.keep`.
const historyEvery = time.Hour

// StartHistoryRetention prunes, at start and then hourly, the versions of
// each source with `history.keep` whose valid time ended before the
// horizon; a current version always stays. It returns the function that
// stops it.
func (a *App) StartHistoryRetention(ctx context.Context) (stop func()) {
	type kept struct {
		name      string
		resources []clients.Resource
		keep      time.Duration
	}
	var srcs []kept
	var off []poller.Source // sources without history: marked off here
	for i := range a.Config.Sources {
		sc := &a.Config.Sources[i]
		if sc.History.Keep > 0 && sc.History.On() {
			srcs = append(srcs, kept{sc.Name, historyResources(sc), sc.History.Keep.D()})
		}
		if !sc.History.On() {
			off = append(off, poller.Source{Source: namedSource(sc.Name), Resources: configuredResources(sc)})
		}
	}
	log := a.Log.With().Str("component", "history_retention").Logger()
	var loop periodic.Loop
	loop.Start(ctx, historyEvery, func(ctx context.Context) {
		for _, ps := range off {
			if err := a.prepareHistory(ctx, ps); err != nil && ctx.Err() == nil {
				log.Warn().Err(err).Str("source", ps.Name()).Msg("history could not be marked off; next try in an hour")
			}
		}
		off = nil // once: a reload marks the sources it changes
		for _, s := range srcs {
			horizon := time.Now().Add(-s.keep)
			for _, r := range s.resources {
				n, err := upsert.PruneHistory(ctx, a.Pool, s.name, r, horizon)
				if err != nil {
					if ctx.Err() == nil {
						log.Warn().Err(err).Str("source", s.name).Str("resource", string(r)).Msg("history retention failed; next try in an hour")
					}
					continue
				}
				if n > 0 {
					log.Info().Str("source", s.name).Str("resource", string(r)).Int64("pruned", n).Time("horizon", horizon).Msg("history pruned")
				}
			}
		}
	})
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		loop.Stop(ctx)
	}
}
