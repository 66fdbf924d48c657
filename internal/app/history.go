package app

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemarkhq/tidemark/clients"
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
	for i := range a.Config.Sources {
		sc := &a.Config.Sources[i]
		if sc.History.Keep > 0 && sc.History.On() {
			srcs = append(srcs, kept{sc.Name, historyResources(sc), sc.History.Keep.D()})
		}
	}
	if len(srcs) == 0 {
		return func() {}
	}
	log := a.Log.With().Str("component", "history_retention").Logger()
	var loop periodic.Loop
	loop.Start(ctx, historyEvery, func(ctx context.Context) {
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
