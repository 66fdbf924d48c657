package poller

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/cursor"
)

// runBatch collects the idle incremental runs of one source's passes, so
// that they are written in one statement when the passes end (an idle pass
// writes nothing else). Steps may run passes beside each other.
type runBatch struct {
	mu   sync.Mutex
	runs []cursor.RunRecord
}

func (b *runBatch) add(r cursor.RunRecord) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.runs = append(b.runs, r)
}

// recordRuns writes the batch's runs, even when ctx is done (the passes
// did run).
func (p *Poller) recordRuns(ctx context.Context, source string, b *runBatch) {
	b.mu.Lock()
	runs := b.runs
	b.runs = nil
	b.mu.Unlock()
	if len(runs) == 0 {
		return
	}
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), dbTimeout)
	defer cancel()
	if err := cursor.RecordRuns(c, p.pool, runs); err != nil {
		p.log.Error().Err(err).Str("source", source).Int("runs", len(runs)).Msg("could not record idle runs")
	}
}

// runVisibleAfter is how long an incremental pass runs before its run is
// written as running (a shorter one is written once, at its end).
const runVisibleAfter = 2 * time.Second

// showRunning writes rec as running if the pass is still going after
// runVisibleAfter. The function it returns stops that. It does not wait for
// a write already in flight: the caller may hold a pool connection (its
// last transaction) that the write needs, and a running record that lands
// after the run's end changes nothing (RecordRuns).
func (p *Poller) showRunning(ctx context.Context, log zerolog.Logger, rec cursor.RunRecord) (stop func()) {
	rec.Status = cursor.StatusRunning
	t := time.AfterFunc(runVisibleAfter, func() {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), dbTimeout)
		defer cancel()
		if err := cursor.RecordRuns(c, p.pool, []cursor.RunRecord{rec}); err != nil {
			log.Warn().Err(err).Msg("could not record the run as running")
		}
	})
	return func() { t.Stop() }
}
