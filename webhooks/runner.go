package webhooks

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/tidemarkhq/tidemark/clients"
)

// Passer runs the targeted incremental passes: the daemon (poller.Daemon).
type Passer interface {
	// RunTriggered runs an incremental pass of rs of source now when this
	// process owns the source and no pass of it runs; it returns the
	// resources whose pass succeeded (none when it did not run). admit is
	// asked, once the process knows it owns the source, with the resources
	// the pass would list: the quota is taken only by the owner.
	RunTriggered(source string, rs []clients.Resource, admit func([]clients.Resource) bool) ([]clients.Resource, error)
}

// Quota spreads a source's spare hourly requests (its plan's quota less
// what its schedule spends) over the targeted passes: a burst of webhooks
// never spends the hour the scheduled passes need.
type Quota struct {
	Limiter *rate.Limiter
	// Cost is what one pass of a resource costs (1 when absent).
	Cost map[clients.Resource]int
	// Gap is the least time from the end of one triggered pass to the
	// start of the next: events arriving meanwhile coalesce, and passes
	// never run back to back at the edge of the source's rate limit.
	Gap time.Duration
	// Take, when set, takes n requests (n < 0: gives them back) from the
	// source's bucket shared by every process, shaped like Limiter
	// (cursor.Store.TakeQuota): a restart or a new owner starts with what
	// is left, not a full allowance. Limiter is the fallback when it
	// fails.
	Take func(ctx context.Context, n int) (time.Duration, error)
}

// NewQuota allows spare requests an hour: a quarter of them at once (at
// least one pass, minPass requests; at most half), the rest spread over the
// hour, so no hour holds more than spare (the burst is taken out of the
// rate). A spare under two passes allows nothing sustained: the caller
// leaves such a source to its schedule.
func NewQuota(spare, minPass int, cost map[clients.Resource]int) *Quota {
	burst := max(1, min(max(minPass, spare/4), spare/2))
	per := float64(spare-burst) / 3600
	return &Quota{Limiter: rate.NewLimiter(rate.Limit(max(per, 0)), burst), Cost: cost}
}

// ticket is what take took, and from which bucket: a give-back credits
// that bucket only, and only what it took.
type ticket struct {
	n      int
	shared bool
	local  *rate.Reservation
}

// take returns how long until a pass of rs fits the quota (0: now, and it
// is taken: the ticket says from where).
func (q *Quota) take(ctx context.Context, now time.Time, rs []clients.Resource) (ticket, time.Duration) {
	if q == nil {
		return ticket{}, 0
	}
	n := q.cost(rs)
	if q.Take != nil {
		if d, err := q.Take(ctx, n); err == nil {
			return ticket{n: n, shared: d == 0}, d
		}
	}
	res := q.Limiter.ReserveN(now, n)
	if !res.OK() {
		return ticket{}, time.Hour // more than the bucket holds: the schedule's pass covers it
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return ticket{}, d
	}
	return ticket{n: n, local: res}, 0
}

// wait is take without the ticket.
func (q *Quota) wait(ctx context.Context, now time.Time, rs []clients.Resource) time.Duration {
	_, d := q.take(ctx, now, rs)
	return d
}

func (q *Quota) cost(rs []clients.Resource) int {
	n := 0
	for _, r := range rs {
		n += max(1, q.Cost[r])
	}
	return n
}

// giveBack returns what take took for a pass that did not run after all (a
// pass of the source ran elsewhere): another process's pass must not spend
// the allowance. A ticket of the local limiter never credits the shared
// bucket.
func (q *Quota) giveBack(ctx context.Context, t ticket) {
	switch {
	case q == nil || t.n == 0:
	case t.shared:
		_, _ = q.Take(ctx, -t.n)
	case t.local != nil:
		t.local.Cancel()
	}
}

// Runner turns the triggers in Postgres into passes on the replica that
// owns each source: woken by NOTIFY when a trigger commits, and polling
// every Poll so a lost notification (a restart, a dropped connection)
// delays a trigger by at most Poll. A burst of events is one trigger row per
// source and resource, and Settle gathers it before the pass.
type Runner struct {
	Store  *Store
	Passer Passer
	// URL is the database to LISTEN on (a connection of its own).
	URL     string
	Log     zerolog.Logger
	Metrics *Metrics
	// Quotas by source (absent: the source's rate limiter alone bounds it).
	Quotas map[string]*Quota
	// Poll (default 2 s) and Settle (default 250 ms).
	Poll, Settle time.Duration
	// PurgeEvery (default 1 h) forgets keys expired for longer than the
	// store's Keep.
	PurgeEvery time.Duration

	mu       sync.Mutex
	busy     map[string]bool
	notAfter map[string]time.Time // no retry of a source before this
	wg       sync.WaitGroup
}

// Run runs until ctx is done, then waits for the passes in flight.
func (r *Runner) Run(ctx context.Context) {
	poll := r.Poll
	if poll <= 0 {
		poll = 2 * time.Second
	}
	settle := r.Settle
	if settle <= 0 {
		settle = 250 * time.Millisecond
	}
	purgeEvery := r.PurgeEvery
	if purgeEvery <= 0 {
		purgeEvery = time.Hour
	}
	r.busy, r.notAfter = map[string]bool{}, map[string]time.Time{}
	wake := make(chan struct{}, 1)
	if r.URL != "" {
		r.wg.Add(1)
		go r.listen(ctx, wake)
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	lastPurge := time.Time{}
	for {
		select {
		case <-ctx.Done():
			r.wg.Wait()
			return
		case <-wake:
			select { // gather the burst
			case <-ctx.Done():
				continue
			case <-time.After(settle):
			}
		case <-t.C:
		}
		if time.Since(lastPurge) > purgeEvery {
			lastPurge = time.Now()
			if n, err := r.Store.Purge(ctx, r.Store.Keep); err != nil && ctx.Err() == nil {
				r.Log.Warn().Err(err).Msg("could not purge expired webhook keys")
			} else if n > 0 {
				r.Log.Info().Int64("keys", n).Msg("purged expired webhook keys")
			}
		}
		r.once(ctx)
	}
}

// once starts a pass for each source with pending triggers that is not
// already running one here.
func (r *Runner) once(ctx context.Context) {
	ts, err := r.Store.Pending(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.Log.Warn().Err(err).Msg("could not read webhook triggers")
		}
		return
	}
	bySource := map[string][]Trigger{}
	var order []string
	for _, t := range ts {
		if _, ok := bySource[t.Source]; !ok {
			order = append(order, t.Source)
		}
		bySource[t.Source] = append(bySource[t.Source], t)
	}
	now := time.Now()
	for _, s := range order {
		r.mu.Lock()
		if r.busy[s] || now.Before(r.notAfter[s]) {
			r.mu.Unlock()
			continue
		}
		r.busy[s] = true
		r.mu.Unlock()
		r.wg.Add(1)
		go r.run(ctx, s, bySource[s])
	}
}

func (r *Runner) run(ctx context.Context, source string, ts []Trigger) {
	defer r.wg.Done()
	defer func() {
		r.mu.Lock()
		r.busy[source] = false
		r.mu.Unlock()
	}()
	log := r.Log.With().Str("source", source).Logger()
	rs := make([]clients.Resource, len(ts))
	var events int64
	for i, t := range ts {
		rs[i] = t.Resource
		events += t.Events
	}
	ok, wait, err := r.pass(ctx, source, rs)
	switch {
	case wait > 0:
		r.defer_(source, wait)
		r.Metrics.pass(source, "deferred")
		log.Info().Dur("wait", wait).Msg("webhook-triggered pass deferred: the source's spare hourly quota allows the next one then")
		return
	case err != nil:
		r.defer_(source, 5*time.Second)
		r.Metrics.pass(source, "failed")
		if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
			log.Warn().Err(err).Msg("webhook-triggered pass failed; the trigger stays")
		}
		return
	case len(ok) == 0:
		// Not the owner, or a pass of the source runs: the owner, or this
		// process after its pass, takes the trigger at the next poll.
		return
	}
	if q := r.Quotas[source]; q != nil && q.Gap > 0 {
		r.defer_(source, q.Gap)
	}
	r.Metrics.pass(source, "ok")
	r.clear(ctx, log, source, ts, ok)
	log.Debug().Int64("events", events).Int("resources", len(ok)).Msg("webhook-triggered pass done")
}

// pass runs the triggered pass, the quota taken once this process knows it
// owns the source (a non-owner takes nothing), and given back when the
// pass was admitted but did not run; wait > 0: deferred by the quota.
func (r *Runner) pass(ctx context.Context, source string, rs []clients.Resource) (ok []clients.Resource, wait time.Duration, err error) {
	q := r.Quotas[source]
	var tk ticket
	admitted := false
	ok, err = r.Passer.RunTriggered(source, rs, func(run []clients.Resource) bool {
		tk, wait = q.take(ctx, time.Now(), run)
		admitted = wait == 0
		return admitted
	})
	if admitted && err == nil && len(ok) == 0 {
		q.giveBack(ctx, tk)
	}
	return ok, wait, err
}

// clear drops the triggers of the resources whose pass succeeded.
func (r *Runner) clear(ctx context.Context, log zerolog.Logger, source string, ts []Trigger, ok []clients.Resource) {
	now := time.Now()
	for _, t := range ts {
		if !slices.Contains(ok, t.Resource) {
			continue
		}
		gone, err := r.Store.Done(ctx, t)
		if err != nil {
			log.Warn().Err(err).Msg("could not clear a webhook trigger; it runs again (harmless)")
			continue
		}
		if gone {
			r.Metrics.eventToRow(source, string(t.Resource), "pass", now.Sub(t.FirstEventAt))
		}
	}
}

func (r *Runner) defer_(source string, d time.Duration) {
	r.mu.Lock()
	r.notAfter[source] = time.Now().Add(d)
	r.mu.Unlock()
}

// listen pokes wake on every notification, reconnecting after errors.
func (r *Runner) listen(ctx context.Context, wake chan<- struct{}) {
	defer r.wg.Done()
	for ctx.Err() == nil {
		err := r.listenOnce(ctx, wake)
		if ctx.Err() != nil {
			return
		}
		r.Log.Warn().Err(err).Msg("webhook trigger LISTEN connection lost; polling meanwhile, reconnecting")
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

func (r *Runner) listenOnce(ctx context.Context, wake chan<- struct{}) error {
	conn, err := pgx.Connect(ctx, r.URL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		return err
	}
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}
