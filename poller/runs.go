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

// recordRuns writes the batch's runs, even when the passes' context is
// done (they did run), or hands them to the running daemon's idle runs.
func (p *Poller) recordRuns(b *runBatch) {
	b.mu.Lock()
	runs := b.runs
	b.runs = nil
	b.mu.Unlock()
	if len(runs) == 0 {
		return
	}
	if ir := p.idle.Load(); ir != nil && ir.add(runs) {
		return
	}
	p.writeRuns(runs)
}

// idleRuns gathers the idle runs of every source a daemon polls, written
// together every idleRunsEvery: a thousand idle sources ticking each
// minute cost two statements a second for their runs, not seventeen, and
// a run shows in `tidemark runs` that much later.
type idleRuns struct {
	mu     sync.Mutex
	runs   []cursor.RunRecord
	spare  []cursor.RunRecord // the last flush's, reused (flush runs alone)
	closed bool               // flushed for the last time: the caller writes its own
}

const idleRunsEvery = 500 * time.Millisecond

// add gathers runs, unless ir is closed.
func (ir *idleRuns) add(runs []cursor.RunRecord) bool {
	ir.mu.Lock()
	defer ir.mu.Unlock()
	if ir.closed {
		return false
	}
	ir.runs = append(ir.runs, runs...)
	return true
}

// flush writes the runs gathered so far; last closes ir.
func (ir *idleRuns) flush(p *Poller, last bool) {
	ir.mu.Lock()
	runs := ir.runs
	ir.runs, ir.spare, ir.closed = ir.spare[:0], nil, last
	ir.mu.Unlock()
	p.writeRuns(runs)
	clear(runs) // no strings kept alive
	ir.mu.Lock()
	ir.spare = runs[:0]
	ir.mu.Unlock()
}

// writeRuns writes idle runs in statements of at most idleRunsBatch: a
// connection keeps the buffer of the largest message it sent (a thousand
// sources ticking in the same half second would leave each a megabyte).
func (p *Poller) writeRuns(runs []cursor.RunRecord) {
	for len(runs) > 0 {
		n := min(len(runs), idleRunsBatch)
		c, cancel := context.WithTimeout(context.Background(), dbTimeout)
		if err := cursor.RecordRuns(c, p.pool, runs[:n]); err != nil {
			p.log.Error().Err(err).Int("runs", n).Msg("could not record idle runs")
		}
		cancel()
		runs = runs[n:]
	}
}

// idleRunsBatch bounds the runs one statement writes.
const idleRunsBatch = 200

// writeIdleRuns flushes ir every idleRunsEvery until done closes; the
// daemon flushes what is left once its passes have ended.
func (p *Poller) writeIdleRuns(ir *idleRuns, done <-chan struct{}) {
	t := time.NewTicker(idleRunsEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			ir.flush(p, false)
		}
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
