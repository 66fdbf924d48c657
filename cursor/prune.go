package cursor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/internal/periodic"
	"github.com/tidemarkhq/tidemark/lease"
)

// Retention bounds sync_runs (config runs.keep and runs.keep_idle).
type Retention struct {
	// Keep is how long every finished run is kept.
	Keep time.Duration
	// KeepIdle is how long an idle run is kept; at most Keep.
	KeepIdle time.Duration
}

// Pruned counts the runs PruneRuns deleted: Idle under keep_idle, Expired
// under keep.
type Pruned struct{ Idle, Expired int64 }

// PruneBatch is how many runs one delete statement removes at most: each is
// its own short transaction, so retention never holds long locks nor writes
// a burst of WAL.
const PruneBatch = 5000

// idleRun is true for a pass that ended ok with nothing inserted, updated or
// tombstoned and its cursor unchanged. It is the predicate of the partial
// indexes sync_runs_idle_expiry and sync_runs_busy_expiry (NOT idleRun) of
// migration 00014: the planner uses them only when the delete's WHERE
// implies their predicate.
const idleRun = `(status = 'ok' AND kind IN ('incremental', 'backfill', 'reconcile')
    AND inserted = 0 AND updated = 0 AND tombstoned = 0
    AND high_water_after IS NOT DISTINCT FROM high_water_before)`

// sqlPruneRuns deletes up to $2 finished runs, idle or not as %s says, that
// finished before now - $1. It keeps the newest run of each (source,
// resource, kind), which `tidemark cursors` and the status page show, and
// the newest successful one (their "last ok"): a run goes only when a newer
// run of its key exists, and a newer successful one when it succeeded.
// Newest is as `tidemark cursors` orders: started_at, then id.
const sqlPruneRuns = `
DELETE FROM sync_runs WHERE id IN (
    SELECT r.id FROM sync_runs r
    WHERE %s AND r.finished_at < now() - $1::interval AND r.status <> 'running'
      AND EXISTS (
        SELECT 1 FROM sync_runs n
        WHERE n.source = r.source AND n.resource = r.resource AND n.kind = r.kind
          AND n.started_at >= r.started_at AND (n.started_at > r.started_at OR n.id > r.id)
          AND (n.status = 'ok' OR r.status <> 'ok'))
    LIMIT $2)`

var (
	sqlPruneIdle    = fmt.Sprintf(sqlPruneRuns, idleRun)
	sqlPruneExpired = fmt.Sprintf(sqlPruneRuns, "NOT "+idleRun)
)

// PruneRuns deletes the idle runs that finished before now - KeepIdle and
// the other runs that finished before now - Keep, batch runs per statement
// (0: PruneBatch). A running row is never deleted, nor the newest run and
// the newest successful run of each (source, resource, kind). Idle runs go
// first, so the second delete needs only the non-idle ones.
func PruneRuns(ctx context.Context, db DB, r Retention, batch int) (Pruned, error) {
	if r.Keep <= 0 || r.KeepIdle <= 0 || r.KeepIdle > r.Keep {
		return Pruned{}, fmt.Errorf("prune runs: keep %s and keep_idle %s: want 0 < keep_idle <= keep", r.Keep, r.KeepIdle)
	}
	batch = cmp.Or(batch, PruneBatch)
	var p Pruned
	var err error
	if p.Idle, err = pruneBatches(ctx, db, sqlPruneIdle, r.KeepIdle, batch); err != nil {
		return p, fmt.Errorf("prune idle runs older than %s: %w", r.KeepIdle, err)
	}
	if p.Expired, err = pruneBatches(ctx, db, sqlPruneExpired, r.Keep, batch); err != nil {
		return p, fmt.Errorf("prune runs older than %s: %w", r.Keep, err)
	}
	return p, nil
}

// pruneBatches runs one delete until it deletes less than a batch.
func pruneBatches(ctx context.Context, db DB, sql string, keep time.Duration, batch int) (int64, error) {
	var total int64
	for {
		tag, err := db.Exec(ctx, sql, keep, batch)
		if err != nil {
			return total, err
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) {
			return total, nil
		}
	}
}

// RunsLease is the lease a fleet's run pruner holds while it prunes: one
// replica prunes, the others skip that round.
const RunsLease = "maintenance:runs"

// RunsPruner deletes expired runs on a ticker (default every 5 minutes),
// under RunsLease. Start/Stop, like every long-running part.
type RunsPruner struct {
	Pool      *pgxpool.Pool
	Retention Retention
	Every     time.Duration // default 5 min
	Batch     int           // default PruneBatch
	Log       zerolog.Logger
	// Deleted, when set, is told how many runs each round deleted.
	Deleted func(Pruned)

	leaser *lease.Leaser
	loop   periodic.Loop
}

// Start runs the pruner until Stop.
func (p *RunsPruner) Start(ctx context.Context) {
	p.leaser = lease.New(p.Pool.Config().ConnString())
	p.loop.Start(ctx, cmp.Or(p.Every, 5*time.Minute), p.Once)
}

// Once prunes once if no other replica is pruning; Start calls it on the
// ticker.
func (p *RunsPruner) Once(ctx context.Context) {
	if p.leaser == nil {
		p.leaser = lease.New(p.Pool.Config().ConnString())
	}
	held, err := p.leaser.TryAcquire(ctx, RunsLease)
	switch {
	case errors.Is(err, lease.ErrBusy):
		p.Log.Debug().Msg("run retention: another replica is pruning")
		return
	case err != nil:
		if ctx.Err() == nil {
			p.Log.Warn().Err(err).Msg("run retention: could not take its lease")
		}
		return
	}
	defer held.Release()
	n, err := PruneRuns(ctx, p.Pool, p.Retention, p.Batch)
	if p.Deleted != nil {
		p.Deleted(n)
	}
	switch {
	case ctx.Err() != nil:
	case err != nil:
		p.Log.Error().Err(err).Msg("run retention failed")
	case n.Idle+n.Expired > 0:
		p.Log.Info().Int64("idle", n.Idle).Int64("expired", n.Expired).
			Dur("keep", p.Retention.Keep).Dur("keep_idle", p.Retention.KeepIdle).Msg("old runs deleted")
	}
}

// Stop stops the pruner, waits for it and closes its lease connection.
func (p *RunsPruner) Stop(ctx context.Context) {
	p.loop.Stop(ctx)
	if p.leaser != nil {
		p.leaser.Close()
	}
}
