package app

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/cursor"
	"github.com/tidemarkhq/tidemark/internal/budget"
	"github.com/tidemarkhq/tidemark/poller"
	"github.com/tidemarkhq/tidemark/webhooks"
)

// webhookState is the daemon's webhook intake and trigger runner (issue 14).
type webhookState struct {
	once    sync.Once
	store   *webhooks.Store
	metrics *webhooks.Metrics
	intake  *webhooks.Intake
	// decoders decode an event's record with the client that reads the
	// source, for the sources whose kind can.
	decoders map[string]webhooks.Decoder
}

// noteSource remembers a built source whose client (probe, a bare one)
// decodes webhook events: webhooks.apply decodes an event's record with the
// client that reads the source.
func (a *App) noteSource(name string, s, probe clients.Source) {
	if a.wh == nil {
		a.wh = &webhookState{}
	}
	if a.wh.decoders == nil {
		a.wh.decoders = map[string]webhooks.Decoder{}
	}
	delete(a.wh.decoders, name)
	if _, ok := clients.As[webhooks.Decoder](probe); ok {
		a.wh.decoders[name] = sourceDecoder{s}
	}
}

// sourceDecoder decodes with the client the source has when the event
// comes (clients.As through the daemon's slot: its own client, or one
// built for the event when this replica does not own the source).
type sourceDecoder struct{ src clients.Source }

func (d sourceDecoder) DecodeEvent(r clients.Resource, payload []byte, fetched time.Time) ([]clients.Record, bool, error) {
	dec, ok := clients.As[webhooks.Decoder](d.src)
	if !ok {
		return nil, false, fmt.Errorf("source %s: its client could not be built to decode the event", d.src.Name())
	}
	return dec.DecodeEvent(r, payload, fetched)
}

func (a *App) webhookParts() *webhookState {
	if a.wh == nil {
		a.wh = &webhookState{}
	}
	w := a.wh
	w.once.Do(func() {
		w.store = a.WebhookStore()
		w.metrics = webhooks.NewMetrics(a.Metrics.Registry)
		seal, keyErr := webhooks.SealerFromEnv()
		if keyErr != nil {
			seal = nil
		}
		srcs := map[string]webhooks.Source{}
		for _, s := range a.Config.Sources {
			d := webhooks.DialectOf(s.Kind)
			if d == nil {
				continue
			}
			var rs []clients.Resource
			for _, r := range s.Resources {
				rs = append(rs, clients.Resource(r))
			}
			dec := a.wh.decoders[s.Name]
			srcs[s.Name] = webhooks.Source{Dialect: d, Resources: rs, Decoder: dec, Events: bool(s.Events), HistoryOn: a.historyConfigured(s.Name)}
		}
		// Only a source whose kind sends webhooks (Toggl, Clockify) needs
		// the key: a Harvest-only config hears nothing of it.
		if keyErr != nil && len(srcs) > 0 {
			a.Log.Warn().Err(keyErr).Msg("webhook deliveries will be refused (503) until the key is set")
		}
		w.intake = &webhooks.Intake{Store: w.store, Seal: seal, Sources: srcs,
			MaxBody: a.Config.Webhooks.MaxBody, BodyWithin: a.opsTimeouts().Body, Log: a.Log, Metrics: w.metrics, Apply: a.Config.Webhooks.Apply}
	})
	return w
}

// WebhookStore is the webhook key store of the App's database.
func (a *App) WebhookStore() *webhooks.Store {
	return &webhooks.Store{Pool: a.Pool, Keep: a.Config.Webhooks.Keep.D()}
}

// webhookRoutes adds POST /webhooks/{source} to the ops mux.
func (a *App) webhookRoutes(mux *http.ServeMux) {
	if a.Metrics == nil {
		return
	}
	mux.Handle(webhooks.Route, a.webhookParts().intake)
}

// startWebhooks runs the trigger runner beside the daemon: accepted
// webhooks become targeted passes of the sources this daemon owns. It stops
// when the App closes.
func (a *App) startWebhooks(d *poller.Daemon) {
	w := a.webhookParts()
	if len(w.intake.Sources) == 0 {
		return
	}
	quotas := map[string]*webhooks.Quota{}
	for i := range a.Config.Sources {
		s := &a.Config.Sources[i]
		if _, ok := w.intake.Sources[s.Name]; !ok {
			continue
		}
		r, err := budget.ForSource(s, budget.Assume{})
		if err != nil || r.Quota == 0 {
			continue
		}
		spare := r.Quota - r.HourlyRequests
		for _, c := range r.Caps {
			spare = min(spare, c.Quota-c.Hourly)
		}
		cost := map[clients.Resource]int{}
		for _, l := range r.Resources {
			cost[clients.Resource(l.Resource)] = l.Requests
		}
		if spare < 2*max(1, r.PassRequests) {
			a.Log.Warn().Str("source", s.Name).Int("spare_hourly", max(spare, 0)).
				Msg("webhook-triggered passes disabled: the schedule leaves less than two passes of the hourly quota (`tidemark doctor`); webhooks are recorded (and applied with webhooks.apply), passes run on the schedule")
			spare = 0
		}
		q := webhooks.NewQuota(spare, r.PassRequests, cost)
		if spare > 0 {
			// The bucket is the source's, kept in the database: a restart
			// or a new owner starts with what is left.
			qp := cursor.QuotaParams{Source: s.Name, Burst: float64(q.Limiter.Burst()), PerSecond: float64(q.Limiter.Limit())}
			st := cursor.New(a.Pool)
			q.Take = func(ctx context.Context, n int) (time.Duration, error) { return st.TakeQuota(ctx, qp, n) }
		}
		// Twice the spacing of the source's rate limit, at least a second.
		q.Gap = max(time.Second, 2*s.RateLimit.Per.D()/time.Duration(s.RateLimit.Requests))
		quotas[s.Name] = q
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	run := &webhooks.Runner{Store: w.store, Passer: d, URL: a.DBURL, Log: a.Log, Metrics: w.metrics, Quotas: quotas}
	go func() {
		defer close(done)
		run.Run(ctx)
	}()
	a.OnClose(func() { cancel(); <-done })
}

var _ webhooks.Passer = (*poller.Daemon)(nil)

// utcPtr returns m[k] in UTC, or nil when absent.
func utcPtr(m map[string]time.Time, k string) *time.Time {
	t, ok := m[k]
	if !ok {
		return nil
	}
	t = t.UTC()
	return &t
}
