package app

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/cursor"
	"github.com/tidemarkhq/tidemark/internal/budget"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/poller"
)

// Budgets plans every configured source's requests against its plan
// (internal/budget), in config order.
func Budgets(cfg *config.Config, a budget.Assume) ([]budget.Report, error) {
	var reps []budget.Report
	for i := range cfg.Sources {
		r, err := budget.ForSource(&cfg.Sources[i], a)
		if err != nil {
			return nil, UsageError{fmt.Errorf("source %s: budget: %w", cfg.Sources[i].Name, err)}
		}
		reps = append(reps, r)
	}
	return reps, nil
}

// CheckBudgets is the daemon's start-up check: a source whose schedule
// does not fit its hourly budget is logged at Warn with the numbers; one
// that cannot fit even one pass an hour is refused (a UsageError naming
// the source and the numbers), since every pass would spend the quota and
// wait.
func (a *App) CheckBudgets() error { return a.checkBudgetsOf() }

// budgetAssume is what the daemon's checks assume of the sources' plans.
var budgetAssume = budget.Assume{}

func (a *App) checkBudgetsOf() error {
	reps, err := Budgets(a.Config, budgetAssume)
	if err != nil {
		return err
	}
	for _, r := range reps {
		ev := a.Log.Info()
		switch {
		case r.Refuse:
			return Usagef("%s (give the source a plan with a larger budget, fewer resources, or a slower schedule; `tidemark doctor` shows the numbers)", r.Summary())
		case r.Verdict == budget.DoesNotFit:
			ev = a.Log.Warn()
		case r.Verdict == budget.Tight:
			ev = a.Log.Warn()
		}
		ev.Str("source", r.Source).Str("plan", r.Plan).Str("schedule", r.Schedule).
			Int("passes_per_hour", r.PassesPerHour).Int("pass_requests", r.PassRequests).
			Int("hourly_requests", r.HourlyRequests).Int("hourly_quota", r.Quota).
			Str("verdict", string(r.Verdict)).Str("suggest", r.Suggest).
			Msg("request budget: " + r.Summary())
	}
	return nil
}

// pacing is what the App's pacers share: one view of the slots other
// processes took, and the poller whose leases say which sources this
// process owns.
type pacing struct {
	once sync.Once
	set  *cursor.Pacers
	owns atomic.Pointer[*poller.Poller]
}

// Pacer is the source's request pacer shared with every process on the
// database (nil without one). Every request to the source's provider goes
// through it, the CLI's too (webhooks register and status: issue 30, item
// 12). While this process holds the source's ownership lease, requests are
// paced here with no write (cursor.Pacers). One per source in a process.
func (a *App) Pacer(source string) httpx.Pacer {
	if a.Pool == nil {
		return nil
	}
	a.pacing.once.Do(func() { a.pacing.set = cursor.NewPacers(a.Pool) })
	owns := func() bool {
		p := a.pacing.owns.Load()
		return p != nil && (*p).Owns(source)
	}
	p, _ := a.pacers.LoadOrStore(source, a.pacing.set.Pacer(source, owns))
	return p.(*cursor.Pacer)
}

// releasePacers gives back the slots this process took and will not use,
// before the pool closes: the next process need not wait for them.
func (a *App) releasePacers() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a.pacers.Range(func(_, p any) bool {
		if err := p.(*cursor.Pacer).Release(ctx); err != nil {
			a.Log.Debug().Err(err).Msg("request slots not given back; the next process waits for them")
		}
		return true
	})
}
