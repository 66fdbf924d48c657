package webhooks

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/upsert"
)

// Decoder decodes the record an event carries as a listing of the resource
// would (toggl.Client.DecodeEvent); ok false: not faithfully possible.
type Decoder interface {
	DecodeEvent(r clients.Resource, payload []byte, fetched time.Time) ([]clients.Record, bool, error)
}

// ApplyTimeout bounds applying one event's record.
const ApplyTimeout = 10 * time.Second

// apply writes an accepted event's record through the versioned write
// (webhooks.apply): a record older than the stored one is skipped, the same
// one writes nothing, and the pass the event triggered confirms it. The
// record counts as fetched when it was observed (see observed), not when
// it arrived. It runs after the answer; a failure only leaves the work to
// that pass.
func (in *Intake) apply(log zerolog.Logger, source string, src Source, r clients.Resource, payload json.RawMessage, observed, arrived time.Time) {
	recs, ok, err := src.Decoder.DecodeEvent(r, payload, observed)
	if err != nil || !ok {
		if err != nil {
			log.Warn().Err(err).Str("resource", string(r)).Msg("webhook record not applied (the pass will read it)")
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ApplyTimeout)
	defer cancel()
	var c upsert.Counts
	err = pgx.BeginFunc(ctx, in.Store.Pool, func(tx pgx.Tx) error {
		var err error
		c, err = upsert.Apply(ctx, tx, source, r, recs, upsert.WithEvents(src.Events),
			upsert.WithHistory(src.HistoryOn != nil && src.HistoryOn(r)), upsert.WithRun("webhook"))
		return err
	})
	if err != nil {
		log.Warn().Err(err).Str("resource", string(r)).Msg("webhook record not applied (the pass will read it)")
		return
	}
	if c.Inserted+c.Updated+c.Tombstoned > 0 {
		in.Metrics.eventToRow(source, string(r), "apply", time.Since(arrived))
	}
	log.Debug().Str("resource", string(r)).Int64("inserted", c.Inserted).Int64("updated", c.Updated).Int64("stale", c.Stale).
		Msg("webhook record applied")
}
