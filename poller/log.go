package poller

import "github.com/rs/zerolog"

func logCounts(e *zerolog.Event, r Result) *zerolog.Event {
	c := r.Counts
	return e.Int("pages", r.Pages).Int64("fetched", c.Fetched).Int64("inserted", c.Inserted).
		Int64("updated", c.Updated).Int64("unchanged", c.Unchanged).Int64("stale", c.Stale).
		Int64("ties", c.Ties).Int64("tombstoned", c.Tombstoned).
		Time("high_water", r.HighWaterAfter).Dur("took", r.Took)
}
