package poller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/cursor"
)

// Schedule says when to run a source's passes (robfig/cron specs, UTC).
type Schedule struct {
	Source      string
	Incremental string
	Reconcile   string // "" for none
}

// Back-off after failed passes: ticks are skipped until this has passed
// since the last failure, doubling per consecutive failure.
const (
	backoffBase = 15 * time.Second
	backoffMax  = 15 * time.Minute
)

// Daemon runs scheduled passes until stopped.
type Daemon struct {
	p      *Poller
	cron   *cron.Cron
	log    zerolog.Logger
	parser cron.Parser

	ctx    context.Context // passes run under it; cancelled by Stop
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	state map[string]*sourceState
}

type sourceState struct {
	running     bool
	failures    int
	notUntil    time.Time
	owned       bool // this daemon holds the source's ownership lease
	backfilling bool // a queued backfill of the source runs here
	// reconcilePending: a reconcile tick came while a pass ran; it runs
	// when that pass ends.
	reconcilePending bool
}

// BackfillPoll is how often a daemon looks for backfills queued for the
// sources it owns.
var BackfillPoll = 2 * time.Second

// NewDaemon schedules the passes; Start starts them.
func NewDaemon(p *Poller, parser cron.Parser, scheds []Schedule) (*Daemon, error) {
	d := &Daemon{
		p:      p,
		log:    p.log,
		parser: parser,
		state:  map[string]*sourceState{},
		cron: cron.New(cron.WithLocation(time.UTC), cron.WithParser(parser),
			cron.WithLogger(cronLogger{p.log})),
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	for _, s := range scheds {
		if _, err := p.source(s.Source); err != nil {
			return nil, err
		}
		d.state[s.Source] = &sourceState{}
		if _, err := d.cron.AddFunc(s.Incremental, d.job(s.Source, "incremental")); err != nil {
			return nil, fmt.Errorf("source %s: schedule %q: %w", s.Source, s.Incremental, err)
		}
		if s.Reconcile != "" {
			if _, err := d.cron.AddFunc(s.Reconcile, d.job(s.Source, "reconcile")); err != nil {
				return nil, fmt.Errorf("source %s: reconcile schedule %q: %w", s.Source, s.Reconcile, err)
			}
		}
	}
	return d, nil
}

// Start begins scheduling; it also runs one incremental pass of every source
// at once, so a fresh daemon does not sit idle until its first tick.
func (d *Daemon) Start(ctx context.Context, runNow bool) {
	d.cron.Start()
	d.wg.Add(1)
	go d.backfills()
	if runNow {
		for _, name := range d.p.order {
			if _, ok := d.state[name]; ok {
				go d.job(name, "incremental")()
			}
		}
	}
}

// Stop stops scheduling, cancels passes in flight (the page in hand commits
// or rolls back) and waits for them until ctx is done.
func (d *Daemon) Stop(ctx context.Context) error {
	stopped := d.cron.Stop()
	d.cancel()
	done := make(chan struct{})
	go func() {
		<-stopped.Done()
		d.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("passes still running at shutdown deadline: %w", ctx.Err())
	}
}

// own makes sure this daemon owns the source (DESIGN.md, Scale-out): an
// advisory lock held for the daemon's life, so that one replica, with one
// rate budget, serves a source at a time. When the owner dies its lock
// frees and another replica takes over at its next tick.
func (d *Daemon) own(source string, log zerolog.Logger) bool {
	if d.p.leaser.Holds(ownerLease(source)) {
		d.mu.Lock()
		d.state[source].owned = true
		d.mu.Unlock()
		return true
	}
	_, err := d.p.leaser.TryAcquire(d.ctx, ownerLease(source)) // held for the daemon's life
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.state[source]
	switch {
	case err == nil:
		first := !st.owned
		st.owned = true
		if first {
			log.Info().Msg("this daemon now owns the source")
			d.adopt(source, log)
		}
		return true
	case errors.Is(err, ErrBusy):
		if st.owned {
			log.Warn().Msg("lost the source to another replica")
		}
		st.owned = false
		log.Info().Msg("source owned by another replica or a local backfill; skipping this tick")
	default:
		st.owned = false
		log.Error().Err(err).Msg("could not take the source's ownership lease")
	}
	return false
}

func ownerLease(source string) string { return "owner:" + source }

// adopt cleans up after the source's previous owner, now gone (killed,
// crashed): its runs still marked running are abandoned, and its backfills
// still marked running go back to the queue, to be resumed here. Only the
// owner may do this, so a live replica's work is never touched.
func (d *Daemon) adopt(source string, log zerolog.Logger) {
	ctx, cancel := context.WithTimeout(d.ctx, 10*time.Second)
	defer cancel()
	if n, err := d.p.store.AbandonRuns(ctx, source, time.Now()); err != nil {
		log.Warn().Err(err).Msg("could not mark runs of the previous owner abandoned")
	} else if n > 0 {
		log.Info().Int64("runs", n).Msg("marked runs left running by the previous owner as abandoned")
	}
	if n, err := d.p.store.RequeueRunningBackfills(ctx, source); err != nil {
		log.Warn().Err(err).Msg("could not queue the previous owner's backfills again")
	} else if n > 0 {
		log.Info().Int64("backfills", n).Msg("queued the previous owner's unfinished backfills again")
	}
}

// backfills runs, every BackfillPoll, the backfills queued for the sources
// this daemon owns, one at a time per source, under the same client and so
// the same rate limiter as its passes.
func (d *Daemon) backfills() {
	defer d.wg.Done()
	t := time.NewTicker(BackfillPoll)
	defer t.Stop()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-t.C:
		}
		queued, err := d.p.store.QueuedBackfills(d.ctx, "")
		if err != nil {
			if d.ctx.Err() == nil {
				d.log.Warn().Err(err).Msg("could not look for queued backfills")
			}
			continue
		}
		for _, b := range queued {
			d.mu.Lock()
			st, ok := d.state[b.Source]
			if !ok || !st.owned || st.backfilling || !d.p.leaser.Holds(ownerLease(b.Source)) {
				d.mu.Unlock()
				continue
			}
			st.backfilling = true
			d.wg.Add(1)
			d.mu.Unlock()
			go d.runQueued(b)
		}
	}
}

func (d *Daemon) runQueued(b cursor.Backfill) {
	defer d.wg.Done()
	defer func() {
		d.mu.Lock()
		d.state[b.Source].backfilling = false
		d.mu.Unlock()
	}()
	log := d.log.With().Str("source", b.Source).Str("resource", b.Resource).Int64("backfill_id", b.ID).Logger()
	log.Info().Msg("running a queued backfill")
	_, err := d.p.Backfill(d.ctx, BackfillParams{Source: b.Source, Resource: clients.Resource(b.Resource),
		From: b.From, To: b.To, WindowDays: b.WindowDays, Requeue: true})
	switch {
	case err == nil:
	case d.ctx.Err() != nil || errors.Is(err, ErrLeaseLost):
		// Shutting down, or the source may now be owned elsewhere: Backfill
		// handed it back to the queue (requeued) for the owner.
		log.Info().Err(err).Msg("queued backfill interrupted; it stays queued for the source's owner")
	default:
		// Also when it failed before it started (say, a resource the
		// source does not mirror): never leave it queued, or it would be
		// retried forever and its follower would wait forever.
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if ferr := d.p.store.FinishBackfill(c, b.ID, cursor.StatusFailed, err.Error()); ferr != nil {
			log.Warn().Err(ferr).Msg("could not mark the backfill failed")
		}
		log.Error().Err(err).Msg("queued backfill failed")
	}
}

// job returns the cron job of one kind of pass of one source.
func (d *Daemon) job(source, kind string) func() {
	return func() { d.runJob(source, kind) }
}

// runJob runs one pass. A tick is skipped while the source's previous pass
// runs, or while it backs off after failures; the skip is logged. A
// reconcile tick that finds a pass running is not dropped but runs right
// after it: reconcile schedules are daily or weekly and coincide with
// incremental ticks ("0 3 * * *" is also a "*/5" tick), so dropping it would
// leave deletions unseen for a day or a week.
func (d *Daemon) runJob(source, kind string) {
	log := d.log.With().Str("source", source).Str("kind", kind).Logger()
	d.mu.Lock()
	st := d.state[source]
	if d.ctx.Err() != nil {
		d.mu.Unlock()
		return
	}
	if st.running {
		if kind == "reconcile" && !st.reconcilePending {
			st.reconcilePending = true
			log.Info().Msg("a pass of this source is running; the reconcile follows it")
		} else {
			log.Warn().Msg("previous pass of this source still running; skipping this tick")
		}
		d.mu.Unlock()
		return
	}
	if now := time.Now(); now.Before(st.notUntil) {
		d.mu.Unlock()
		log.Info().Time("until", st.notUntil).Int("failures", st.failures).Msg("backing off after failures; skipping this tick")
		return
	}
	st.running = true
	d.wg.Add(1)
	d.mu.Unlock()
	defer d.wg.Done()

	var err error
	if !d.own(source, log) {
		err = errNotOwner
	} else if kind == "reconcile" {
		_, err = d.p.Reconcile(d.ctx, source)
	} else {
		_, err = d.p.Incremental(d.ctx, source)
	}

	d.mu.Lock()
	st.running = false
	switch {
	case err == nil:
		if st.failures > 0 {
			log.Info().Int("after_failures", st.failures).Msg("source recovered")
		}
		st.failures, st.notUntil = 0, time.Time{}
	case errors.Is(err, errNotOwner):
	case errors.Is(err, ErrBusy):
		log.Info().Msg("source leased by another process or pass; skipping this tick")
	case d.ctx.Err() != nil:
		// Shutting down: not a failure of the source.
	default:
		st.failures++
		wait := min(backoffBase<<min(st.failures-1, 16), backoffMax)
		st.notUntil = time.Now().Add(wait)
		log.Error().Err(err).Int("failures", st.failures).Dur("backoff", wait).Msg("pass failed")
	}
	reconcile := st.reconcilePending && kind != "reconcile" && d.ctx.Err() == nil
	st.reconcilePending = false
	d.mu.Unlock()
	if reconcile {
		d.runJob(source, "reconcile")
	}
}

var errNotOwner = errors.New("source owned elsewhere")

// cronLogger sends robfig/cron's own messages to zerolog.
type cronLogger struct{ log zerolog.Logger }

func (l cronLogger) Info(msg string, kv ...any) { l.log.Debug().Fields(kv).Msg("cron: " + msg) }
func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.Error().Err(err).Fields(kv).Msg("cron: " + msg)
}
