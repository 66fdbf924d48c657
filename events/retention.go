package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/internal/periodic"
)

// DefaultRetention is how long events are kept when not configured.
const DefaultRetention = 7 * 24 * time.Hour

// Prune deletes the events recorded before now - retention and moves the
// horizon past them, in batches of pruneBatch events, each in a short
// transaction of its own. A consumer positioned before the horizon then
// gets a *BehindHorizonError. It returns how many it deleted.
func Prune(ctx context.Context, pool *pgxpool.Pool, retention time.Duration) (int64, error) {
	if retention <= 0 {
		return 0, fmt.Errorf("prune events: retention %s must be positive", retention)
	}
	// recorded_at grows with seq (appends are serialized), so everything
	// expired is a prefix of the feed.
	var through *int64
	if err := pool.QueryRow(ctx, `SELECT max(seq) FROM events WHERE recorded_at < clock_timestamp() - $1::interval`, retention).Scan(&through); err != nil {
		return 0, fmt.Errorf("prune events: %w", err)
	}
	var total int64
	for through != nil {
		var n int64
		var done bool
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			// Lock the horizon first: consumers read it under a share lock,
			// so none is between its check and its read while events go.
			var from int64
			if err := tx.QueryRow(ctx, `SELECT pruned_through FROM event_horizon FOR UPDATE`).Scan(&from); err != nil {
				return err
			}
			// Then the append lock: an append counts the occurrences in
			// event_states and in the feed at one moment, never while its
			// events move from one to the other.
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, appendLock); err != nil {
				return err
			}
			to := min(from+pruneBatch, *through)
			done = to >= *through
			if err := tx.QueryRow(ctx, pruneSQL, from, to).Scan(&n); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `UPDATE event_horizon SET pruned_through = GREATEST(pruned_through, $1), pruned_at = now()`, to)
			return err
		})
		if err != nil {
			return total, fmt.Errorf("prune events: %w", err)
		}
		total += n
		if done {
			break
		}
	}
	return total, nil
}

// pruneSQL deletes the events in (from, to] and keeps in event_states, per
// record, the content hashes of those at the latest version deleted (added
// to the ones kept before at that version), so that a record back at a
// state it had then still gets the next occurrence's id (Append). One
// small row a record, written here only: appends write none. Older
// versions are dropped: a record's versions never go back.
const pruneSQL = `WITH gone AS (
    DELETE FROM events WHERE seq > $1 AND seq <= $2
    RETURNING seq, source, resource, record_id, version, content_hash
), latest AS (
    SELECT source, resource, record_id, max(version) AS version FROM gone GROUP BY 1, 2, 3
), kept AS (
    INSERT INTO event_states AS s (source, resource, record_id, version, hashes)
    SELECT g.source, g.resource, g.record_id, g.version, array_agg(g.content_hash ORDER BY g.seq)
    FROM gone g JOIN latest USING (source, resource, record_id, version)
    GROUP BY g.source, g.resource, g.record_id, g.version
    ON CONFLICT (source, resource, record_id) DO UPDATE SET
        version = EXCLUDED.version,
        hashes = CASE WHEN s.version = EXCLUDED.version THEN s.hashes || EXCLUDED.hashes ELSE EXCLUDED.hashes END
    WHERE s.version <= EXCLUDED.version
)
SELECT count(*) FROM gone`

// pruneBatch bounds one retention transaction.
const pruneBatch = 10_000

// Pruner deletes expired events on a ticker: Start/Stop, like every
// long-running part.
type Pruner struct {
	Pool      *pgxpool.Pool
	Retention time.Duration
	Every     time.Duration // default 10 min
	Log       zerolog.Logger

	loop periodic.Loop
}

// Start runs the pruner until Stop.
func (p *Pruner) Start(ctx context.Context) {
	p.loop.Start(ctx, cmpOr(p.Every, 10*time.Minute), func(ctx context.Context) {
		n, err := Prune(ctx, p.Pool, p.Retention)
		switch {
		case errors.Is(err, context.Canceled):
		case err != nil:
			p.Log.Error().Err(err).Msg("event retention failed")
		case n > 0:
			p.Log.Info().Int64("deleted", n).Dur("retention", p.Retention).Msg("expired events deleted")
		}
		p.warnLagging(ctx)
	})
}

// warnLagging logs, at each tick, the consumers whose oldest unacknowledged
// event is past half the horizon: they must catch up before retention
// deletes what they have not seen.
func (p *Pruner) warnLagging(ctx context.Context) {
	cs, err := Consumers(ctx, p.Pool)
	if err != nil {
		return
	}
	for _, c := range cs {
		if c.Status == "active" && !c.Behind && c.Age > p.Retention/2 {
			p.Log.Warn().Str("consumer", c.Name).Dur("position_age", c.Age).Dur("retention", p.Retention).
				Msg("consumer is past half the retention horizon: it must catch up before retention deletes events it has not seen")
		}
	}
}

// Stop stops the pruner and waits for it.
func (p *Pruner) Stop(ctx context.Context) { p.loop.Stop(ctx) }

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// ResetParams moves a consumer.
type ResetParams struct {
	Consumer string
	// Enable turns a disabled consumer back on (after its endpoint was fixed).
	Enable bool
	// ToHead moves the position to the newest event: what a consumer does
	// after it resynchronized from the mirror tables.
	ToHead bool
}

// Reset moves a consumer to the head of the feed and/or enables it. It
// fails for an unknown consumer.
func Reset(ctx context.Context, pool *pgxpool.Pool, p ResetParams) error {
	tag, err := pool.Exec(ctx, `UPDATE event_consumers SET
    position = CASE WHEN $2 THEN GREATEST(position, (SELECT pruned_through FROM event_horizon), (SELECT coalesce(max(seq), 0) FROM events)) ELSE position END,
    status = CASE WHEN $3 THEN 'active' ELSE status END,
    status_note = CASE WHEN $3 THEN NULL ELSE status_note END,
    updated_at = now()
WHERE name = $1`, p.Consumer, p.ToHead, p.Enable)
	if err != nil {
		return fmt.Errorf("reset consumer %q: %w", p.Consumer, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("reset consumer %q: no such consumer (see `tidemark events consumers`)", p.Consumer)
	}
	return nil
}

// Disable stops a consumer with a note saying why, in tx.
func Disable(ctx context.Context, tx pgx.Tx, consumer, note string) error {
	_, err := tx.Exec(ctx, `UPDATE event_consumers SET status = 'disabled', status_note = $2, updated_at = now() WHERE name = $1`, consumer, note)
	if err != nil {
		return fmt.Errorf("disable consumer %q: %w", consumer, err)
	}
	return nil
}

// ConsumerStatus is one consumer as `tidemark events consumers` shows it.
type ConsumerStatus struct {
	Name     string `json:"name"`
	Position int64  `json:"position"`
	Status   string `json:"status"`
	Note     string `json:"status_note,omitempty"`
	// Pending is how many kept events are after the position.
	Pending int64 `json:"pending"`
	// Age is how long the oldest unacknowledged event has waited (0 when
	// caught up); retention deletes it at Age = the horizon.
	Age        time.Duration `json:"-"`
	AgeSeconds float64       `json:"position_age_seconds"`
	// Behind is true when retention already deleted unacknowledged events.
	Behind bool `json:"behind_horizon"`
}

// Consumers lists every consumer with its lag.
func Consumers(ctx context.Context, pool *pgxpool.Pool) ([]ConsumerStatus, error) {
	rows, err := pool.Query(ctx, `SELECT c.name, c.position, c.status, coalesce(c.status_note, ''),
    (SELECT count(*) FROM events e WHERE e.seq > c.position),
    coalesce(extract(epoch FROM clock_timestamp() - (SELECT e.recorded_at FROM events e WHERE e.seq > c.position ORDER BY e.seq LIMIT 1)), 0)::float8,
    c.position < h.pruned_through
FROM event_consumers c, event_horizon h ORDER BY c.name`)
	if err != nil {
		return nil, fmt.Errorf("list consumers: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ConsumerStatus, error) {
		var c ConsumerStatus
		var age float64
		err := r.Scan(&c.Name, &c.Position, &c.Status, &c.Note, &c.Pending, &age, &c.Behind)
		c.Age, c.AgeSeconds = time.Duration(age*float64(time.Second)), age
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("list consumers: %w", err)
	}
	return out, nil
}

// Collector exports, at each scrape, every consumer's position age against
// the retention horizon: alert well before the ratio reaches 1, when
// retention starts deleting events the consumer has not seen.
type Collector struct {
	Pool      *pgxpool.Pool
	Retention time.Duration
}

var (
	ageDesc = prometheus.NewDesc("tidemark_events_position_age_seconds",
		"How long the oldest event a consumer has not acknowledged has waited (0 when caught up).", []string{"consumer"}, nil)
	ratioDesc = prometheus.NewDesc("tidemark_events_position_age_horizon_ratio",
		"Position age over the retention horizon: at 1 retention deletes unacknowledged events; alert above 0.5.", []string{"consumer"}, nil)
	behindDesc = prometheus.NewDesc("tidemark_events_behind_horizon",
		"1 when retention already deleted events the consumer had not acknowledged: it must resynchronize from the mirror tables.", []string{"consumer"}, nil)
	horizonDesc = prometheus.NewDesc("tidemark_events_retention_seconds", "The retention horizon of the change feed.", nil, nil)
)

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- ageDesc
	ch <- ratioDesc
	ch <- behindDesc
	ch <- horizonDesc
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(horizonDesc, prometheus.GaugeValue, c.Retention.Seconds())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cs, err := Consumers(ctx, c.Pool)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(ageDesc, err)
		return
	}
	for _, s := range cs {
		ch <- prometheus.MustNewConstMetric(ageDesc, prometheus.GaugeValue, s.Age.Seconds(), s.Name)
		ch <- prometheus.MustNewConstMetric(ratioDesc, prometheus.GaugeValue, s.Age.Seconds()/c.Retention.Seconds(), s.Name)
		b := 0.0
		if s.Behind {
			b = 1
		}
		ch <- prometheus.MustNewConstMetric(behindDesc, prometheus.GaugeValue, b, s.Name)
	}
}
