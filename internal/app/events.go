package app

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidemarkhq/tidemark/events"
)

// ChangeFeed is the daemon's part of the change feed (issue 13): retention
// and the webhook consumers, on a pool of their own so that the consumers'
// held connections never starve the passes.
type ChangeFeed struct {
	pool     *pgxpool.Pool
	pruner   *events.Pruner
	webhooks *events.Webhooks
}

// StartChangeFeed starts retention, when any source has `events: on` or a
// webhook is configured, and the webhook consumers. It registers the
// position-age metrics. Stop it with Stop.
func (a *App) StartChangeFeed(ctx context.Context) (*ChangeFeed, error) {
	cf := a.Config.ChangeFeed
	on := len(cf.Webhooks) > 0
	for _, s := range a.Config.Sources {
		on = on || bool(s.Events)
	}
	f := &ChangeFeed{}
	if !on {
		return f, nil
	}
	pc, err := pgxpool.ParseConfig(a.DBURL)
	if err != nil {
		return nil, Usagef("database URL: %v", redactErr(err))
	}
	// A consumer holds one connection; River's listener, producer and
	// workers share a few more.
	pc.MaxConns = int32(4 + 2*len(cf.Webhooks))
	if f.pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
		return nil, fmt.Errorf("change feed: database: %w", err)
	}
	retention := cf.Retention.D()
	if a.Metrics != nil {
		_ = a.Metrics.Registry.Register(&events.Collector{Pool: f.pool, Retention: retention})
	}
	log := a.Log.With().Str("component", "change_feed").Logger()
	f.pruner = &events.Pruner{Pool: f.pool, Retention: retention, Log: log}
	f.pruner.Start(ctx)
	if len(cf.Webhooks) > 0 {
		var eps []events.Endpoint
		for _, w := range cf.Webhooks {
			secrets := make([]string, len(w.Secrets))
			for i, s := range w.Secrets {
				secrets[i] = s.Value()
			}
			eps = append(eps, events.Endpoint{Name: w.Name, URL: w.URL, Secrets: secrets, Window: w.Window.D(), Timeout: w.Timeout.D()})
		}
		f.webhooks, err = events.NewWebhooks(events.WebhookParams{Pool: f.pool, Endpoints: eps, Retention: retention, Log: log})
		if err == nil {
			err = f.webhooks.Start(ctx)
		}
		if err != nil {
			f.Stop(ctx)
			return nil, err
		}
	}
	log.Info().Dur("retention", retention).Int("webhooks", len(cf.Webhooks)).Msg("change feed started")
	return f, nil
}

// Stop stops the webhook consumers (letting the POSTs in hand finish) and
// retention.
func (f *ChangeFeed) Stop(ctx context.Context) {
	if f == nil || f.pool == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if f.webhooks != nil {
		_ = f.webhooks.Stop(ctx)
	}
	if f.pruner != nil {
		f.pruner.Stop(ctx)
	}
	f.pool.Close()
}
