package app

import (
	"cmp"
	"context"
	"time"

	"github.com/tidemarkhq/tidemark/cursor"
	"github.com/tidemarkhq/tidemark/internal/config"
)

// StartRunsRetention starts the sync_runs pruner (issue 15, config `runs:`).
// Every replica runs one; its lease lets one prune at a time. It returns
// the function that stops it.
func (a *App) StartRunsRetention(ctx context.Context) (stop func()) {
	r := a.Config.Runs
	pruned := a.Metrics.RunsPruned()
	p := &cursor.RunsPruner{
		Pool: a.Pool,
		Retention: cursor.Retention{
			Keep:     cmp.Or(r.Keep.D(), config.DefaultRunsKeep),
			KeepIdle: cmp.Or(r.KeepIdle.D(), config.DefaultRunsKeepIdle),
		},
		Log: a.Log.With().Str("component", "runs_retention").Logger(),
		Deleted: func(n cursor.Pruned) {
			pruned.Add("idle", n.Idle)
			pruned.Add("expired", n.Expired)
		},
	}
	p.Start(ctx)
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		p.Stop(ctx)
	}
}
