package poller

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/cursor"
	"github.com/tidemarkhq/tidemark/lease"
)

// Schedule says when to run a source's passes (robfig/cron specs, UTC).
type Schedule struct {
	Source      string
	Incremental string
	Reconcile   string // "" for none
}

// Back-off after failed passes, per resource and kind of pass: that
// resource's ticks are skipped until this has passed since its last failure,
// doubling per consecutive failure. Reconciles back off further: each one
// re-lists a long range.
const (
	backoffBase         = 15 * time.Second
	backoffMax          = 15 * time.Minute
	reconcileBackoffMax = time.Hour
)

// CappedBackoffMax bounds the back-off of a listing that stays capped or
// unstable (clients.ErrCapped): retried at the next tick once, then after
// backoffBase, doubling, up to this.
const CappedBackoffMax = time.Hour

// Daemon runs scheduled passes until stopped.
type Daemon struct {
	p      *Poller
	cron   *cron.Cron
	log    zerolog.Logger
	parser cron.Parser

	ctx    context.Context // passes run under it; cancelled by Stop
	cancel context.CancelFunc
	wg     sync.WaitGroup

	backoffBase, backoffMax, reconcileBackoffMax time.Duration

	// slots bounds the passes running at once (MaxConcurrentPasses).
	slots chan struct{}

	mu    sync.Mutex
	state map[string]*sourceState
	fleet *fleet // nil: not a fleet member (takes every source it can)
	// ownership, when set, is told of each source this daemon takes and
	// gives up (fleet.go, OnOwnership).
	ownership func(source string, owned bool)

	idle     *idleRuns     // the idle runs gathered while it runs (runs.go)
	idleDone chan struct{} // the idle runs' writer has stopped
}

type sourceState struct {
	running     bool
	queued      bool         // a tick waits for a slot of the daemon's passes
	owned       bool         // this daemon holds the source's ownership lease
	owner       *lease.Lease // that lease, to hand it over (fleet)
	assigned    bool         // the fleet assigns the source to this daemon
	backfilling bool         // a queued backfill of the source runs here
	removed     bool         // a reload is removing the source: no tick starts
	entries     []cron.EntryID
	// rerun: a reconcile tick came while a pass ran; a pass runs again when
	// that one ends, to take the due reconciles.
	rerun bool
	// loaded: passes has been read from pass_state (once, after owning).
	loaded bool
	// skipping: a tick was skipped for a pass still running (logged once
	// until a pass starts again: a normal state, not news at every tick).
	skipping bool
	// splay is how long after its incremental tick its pass starts.
	splay  time.Duration
	passes map[Step]*passState
}

// passState is the daemon's memory of one resource's kind of pass; it is
// mirrored to the pass_state table for `tidemark cursors` and restarts.
type passState struct {
	failures int
	notUntil time.Time
	due      bool // reconcile only: due and not yet run
}

func (st *sourceState) pass(r clients.Resource, kind string) *passState {
	k := Step{Resource: r, Kind: kind}
	ps, ok := st.passes[k]
	if !ok {
		if st.passes == nil {
			st.passes = map[Step]*passState{}
		}
		ps = &passState{}
		st.passes[k] = ps
	}
	return ps
}

// MaxConcurrentPasses bounds the sources whose passes a daemon runs at
// once; the ticks of the others wait for a slot. A thousand sources on one
// schedule tick in the same few seconds (their splay), and a source's
// requests are paced by its own budget (Harvest: 150 ms apart), so idle
// ticks need a few hundred at once at most. It bounds a cold start: a
// first replica up with nothing synced ran every source's first sync at
// once, holding each source it would have handed to the replicas that
// joined a moment later (a source is handed over between passes, and a
// tick waiting for a slot is between passes). A pass gives its slot back
// while its source keeps it waiting (a quota, a Retry-After: httpx's long
// waits), so passes waiting an hour for their quotas stall nobody else.
const MaxConcurrentPasses = 256

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
		slots:  make(chan struct{}, MaxConcurrentPasses),

		backoffBase: backoffBase, backoffMax: backoffMax, reconcileBackoffMax: reconcileBackoffMax,
		cron: cron.New(cron.WithLocation(time.UTC), cron.WithParser(parser),
			cron.WithLogger(cronLogger{p.log})),
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	for _, s := range scheds {
		if _, err := p.source(s.Source); err != nil {
			return nil, err
		}
		d.state[s.Source] = &sourceState{}
		if err := d.schedule(s.Source, s.Incremental, cursor.KindIncremental); err != nil {
			return nil, fmt.Errorf("source %s: schedule %q: %w", s.Source, s.Incremental, err)
		}
		if s.Reconcile != "" {
			if err := d.schedule(s.Source, s.Reconcile, cursor.KindReconcile); err != nil {
				return nil, fmt.Errorf("source %s: reconcile schedule %q: %w", s.Source, s.Reconcile, err)
			}
		}
	}
	return d, nil
}

// SetMaxConcurrentPasses changes MaxConcurrentPasses (tests); call before
// Start.
func (d *Daemon) SetMaxConcurrentPasses(n int) { d.slots = make(chan struct{}, n) }

// SetBackoff changes the back-off after failures (tests); call before Start.
func (d *Daemon) SetBackoff(base, max time.Duration) {
	d.backoffBase, d.backoffMax, d.reconcileBackoffMax = base, max, max
}

// Start begins scheduling; it also runs one incremental pass of every source
// at once, so a fresh daemon does not sit idle until its first tick.
func (d *Daemon) Start(ctx context.Context, runNow bool) {
	d.idle, d.idleDone = &idleRuns{}, make(chan struct{})
	d.p.idle.Store(d.idle)
	go func() {
		defer close(d.idleDone)
		d.p.writeIdleRuns(d.idle, d.ctx.Done())
	}()
	if d.fleet != nil {
		d.rebalance() // the shares are known before the first passes
		d.wg.Add(1)
		go d.fleetLoop()
	}
	d.cron.Start()
	d.wg.Add(1)
	go d.backfills()
	if runNow {
		for _, name := range d.p.Sources() {
			if st, ok := d.state[name]; ok {
				// Spread like the ticks, in proportion to how many there
				// are: a thousand first passes at once were the daemon's
				// peak of memory, while a few start at once.
				delay := st.splay * time.Duration(min(len(d.state), startSpread)) / startSpread
				go d.incremental(name, delay)()
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
		if d.idle != nil {
			// The passes have ended: write the idle runs they left.
			d.p.idle.CompareAndSwap(d.idle, nil)
			<-d.idleDone
			d.idle.flush(d.p, true)
		}
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
		st := d.state[source]
		// Assigned to another member: hand it over here, between two
		// passes (the caller holds st.running), rather than wait for a
		// heartbeat that finds the source idle: a source whose passes
		// follow each other closely would never be handed over.
		if d.assignedElsewhere(st) && d.fleet.members != nil && st.owner != nil && !st.backfilling {
			h := st.owner
			st.disown()
			d.mu.Unlock()
			h.Release()
			d.owning(source, false)
			log.Info().Msg("source assigned to another fleet member; handed over")
			return false
		}
		st.owned = true
		d.mu.Unlock()
		return true
	}
	d.mu.Lock()
	if d.assignedElsewhere(d.state[source]) {
		d.mu.Unlock()
		log.Debug().Msg("source assigned to another fleet member; skipping this tick")
		return false
	}
	d.mu.Unlock()
	held, err := d.p.leaser.TryAcquire(d.ctx, ownerLease(source)) // held for the daemon's life, or until handed over
	d.mu.Lock()
	st := d.state[source]
	was := st.owned
	d.mu.Unlock()
	if err == nil && !was {
		// Outside d.mu (its statements may wait up to their timeout, and
		// every source's scheduling needs d.mu) and before the source
		// counts as owned, so that no queued backfill starts here only to
		// be requeued as the previous owner's; the caller holds
		// st.running, so no pass of it starts meanwhile.
		log.Info().Msg("this daemon now owns the source")
		d.adopt([]string{source}, log)
	}
	d.mu.Lock()
	switch {
	case err == nil:
		st.owned, st.owner = true, held
		// Not held until now (or no longer, its connection gone): what
		// was remembered of the source's pages may have been rewritten.
		if src := d.p.src(source); src != nil {
			src.memo.forget("")
		}
	case errors.Is(err, ErrBusy):
		if was {
			log.Warn().Msg("lost the source to another replica")
		}
		st.disown()
		log.Info().Msg("source owned by another replica or a local backfill; skipping this tick")
	default:
		st.disown()
		log.Error().Err(err).Msg("could not take the source's ownership lease")
	}
	d.mu.Unlock()
	if now := err == nil; now != was {
		d.owning(source, now)
	}
	return err == nil
}

func ownerLease(source string) string { return "owner:" + source }

// adopt cleans up after the sources' previous owners, now gone (killed,
// crashed): their runs still marked running are abandoned, and their
// backfills still marked running go back to the queue, to be resumed here.
// Only the owner may do this, so a live replica's work is never touched.
func (d *Daemon) adopt(sources []string, log zerolog.Logger) {
	ctx, cancel := context.WithTimeout(d.ctx, 10*time.Second)
	defer cancel()
	if n, err := d.p.store.AbandonRuns(ctx, sources, time.Now()); err != nil {
		log.Warn().Err(err).Msg("could not mark runs of the previous owner abandoned")
	} else if n > 0 {
		log.Info().Int64("runs", n).Msg("marked runs left running by the previous owner as abandoned")
	}
	if n, err := d.p.store.RequeueRunningBackfills(ctx, sources); err != nil {
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
	d.every(BackfillPoll, d.startQueued)
}

// every runs fn every interval until the daemon stops.
func (d *Daemon) every(interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// startQueued starts the queued backfills of the sources this daemon owns.
func (d *Daemon) startQueued() {
	queued, err := d.p.store.QueuedBackfills(d.ctx, "")
	if err != nil {
		if d.ctx.Err() == nil {
			d.log.Warn().Err(err).Msg("could not look for queued backfills")
		}
		return
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

// startSpread is the number of sources from which the first passes at
// Start are spread over their whole splay.
const startSpread = 1000

// MaxSplay bounds how long after its tick a source's scheduled pass
// starts (see schedule).
const MaxSplay = 10 * time.Second

// schedule adds a cron job of one kind of pass of a source. Its passes start
// a fixed delay after each tick, the same for every tick of the source and
// different across sources: a tenth of the schedule's interval at most, and
// MaxSplay. Every source on "* * * * *" firing in the same instant made a
// thousand passes wait at once for the database pool, each on its own
// goroutine stack (issue 15: the daemon's peak memory); spread over a few
// seconds they run a few at a time. The delay is the schedule's own
// (splaySchedule): cron starts each pass when it is due, where a
// goroutine and a timer per source waiting out its delay from the tick
// were a thousand of each every tick.
func (d *Daemon) schedule(source, spec, kind string) error {
	sched, err := d.parser.Parse(spec)
	if err != nil {
		return err
	}
	next := sched.Next(time.Now().UTC())
	splay := splayOf(source, sched.Next(next).Sub(next)/10)
	run := d.job(source, kind)
	if kind == cursor.KindIncremental {
		d.state[source].splay = splay
		run = d.incremental(source, 0)
	}
	id := d.cron.Schedule(splaySchedule{Schedule: sched, splay: splay}, cron.FuncJob(run))
	st := d.state[source]
	st.entries = append(st.entries, id)
	return nil
}

// splaySchedule activates splay after each activation of its schedule.
type splaySchedule struct {
	cron.Schedule
	splay time.Duration
}

// Next is after t: the schedule's first activation after t-splay is after
// t-splay.
func (s splaySchedule) Next(t time.Time) time.Time {
	n := s.Schedule.Next(t.Add(-s.splay))
	if n.IsZero() {
		return n
	}
	return n.Add(s.splay)
}

// incremental returns an incremental tick of source, delayed by splay
// unless the tick is none of this daemon's business (skipsTick). A
// reconcile tick always runs: it records the due reconcile for whichever
// replica owns the source.
func (d *Daemon) incremental(source string, splay time.Duration) func() {
	run := d.splayed(splay, d.job(source, cursor.KindIncremental))
	return func() {
		d.mu.Lock()
		st := d.state[source]
		skip := st == nil || st.removed || d.skipsTick(st)
		d.mu.Unlock()
		if !skip {
			run()
		}
	}
}

// splayed returns run delayed by splay (cut short when the daemon stops).
func (d *Daemon) splayed(splay time.Duration, run func()) func() {
	return func() {
		if splay > 0 {
			t := time.NewTimer(splay)
			defer t.Stop()
			select {
			case <-t.C:
			case <-d.ctx.Done():
				return
			}
		}
		run()
	}
}

// splayOf is source's delay in [0, min(limit, MaxSplay)): a hash of its name.
func splayOf(source string, limit time.Duration) time.Duration {
	limit = min(limit, MaxSplay)
	if limit <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(source))
	return time.Duration(h.Sum64() % uint64(limit))
}

// runJob runs one tick of a source. Each resource backs off on its own: one
// resource failing (a token without access to users, a malformed record)
// neither blocks nor delays the others. A reconcile tick marks a reconcile
// of every resource due; a due reconcile is never dropped: it waits for a
// pass in flight, or its own back-off, and runs at the next tick it can
// (daily reconciles coincide with incremental ticks, "0 3 * * *" is also a
// "*/5" tick), and it stays due, across restarts too, until it has run.
func (d *Daemon) runJob(source, kind string) {
	log := d.log.With().Str("source", source).Str("kind", kind).Logger()
	d.mu.Lock()
	st := d.state[source]
	if d.ctx.Err() != nil || st == nil || st.removed {
		d.mu.Unlock()
		return
	}
	if kind == cursor.KindReconcile && (st.owned || st.loaded) {
		// Elsewhere the due reconcile is only recorded (persistDue), and
		// read back (load) if this daemon takes the source.
		d.markDue(source, st)
	}
	if st.running || st.queued {
		if kind == cursor.KindReconcile {
			st.rerun = true
			log.Info().Msg("a pass of this source is running; the reconcile follows it")
		} else if !st.skipping {
			st.skipping = true
			log.Info().Msg("previous pass of this source still running; skipping its ticks until it ends")
		}
		d.mu.Unlock()
		d.persistDue(source, kind, log)
		return
	}
	st.queued, st.skipping = true, false
	d.wg.Add(1)
	d.mu.Unlock()
	defer d.wg.Done()
	d.persistDue(source, kind, log)
	slot := &passSlot{slots: d.slots}
	if !d.slot(st, slot) {
		return
	}

	if d.own(source, log) {
		d.load(source, st, log)
		d.tick(httpx.WithLongWaits(d.ctx, slot.leave, slot.back), source, kind, st, log)
	}

	d.mu.Lock()
	st.running = false
	rerun := st.rerun && d.ctx.Err() == nil
	st.rerun = false
	d.mu.Unlock()
	slot.release() // before a rerun
	if rerun {
		d.runJob(source, cursor.KindReconcile)
	}
}

// slot waits for a slot of the daemon's passes for a queued tick of st and
// marks it running; false (and no slot held) when the tick is off: the
// daemon stops, a fleet round holds the source (taking or handing it
// over), or handed it to another member while the tick waited.
func (d *Daemon) slot(st *sourceState, slot *passSlot) bool {
	_ = slot.back(d.ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	st.queued = false
	if d.ctx.Err() != nil || st.running || st.removed || d.skipsTick(st) {
		slot.release()
		return false
	}
	st.running = true
	return true
}

// passSlot is a pass's hold on a slot of MaxConcurrentPasses. The pass
// gives it back while its source keeps it waiting (httpx.WithLongWaits)
// and takes one again after; its steps may wait side by side, so it is
// given back when the first starts waiting and taken when the last is
// done.
type passSlot struct {
	slots   chan struct{}
	mu      sync.Mutex
	held    bool
	waiting int
}

func (s *passSlot) leave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting++
	if s.held {
		<-s.slots
		s.held = false
	}
}

// back takes a slot unless one is held or another step still waits.
func (s *passSlot) back(ctx context.Context) error {
	s.mu.Lock()
	if s.waiting > 0 {
		s.waiting--
	}
	need := s.waiting == 0 && !s.held
	s.mu.Unlock()
	if !need {
		return nil
	}
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held || s.waiting > 0 { // another step took one meanwhile, or waits again
		<-s.slots
		return nil
	}
	s.held = true
	return nil
}

func (s *passSlot) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held {
		<-s.slots
		s.held = false
	}
}

// markDue marks a reconcile of each resource of the source due; d.mu is
// held.
func (d *Daemon) markDue(source string, st *sourceState) {
	for _, r := range d.p.src(source).Resources {
		st.pass(r, cursor.KindReconcile).due = true
	}
}

// persistDue records a reconcile tick's due reconciles in pass_state, so
// that they outlive a restart.
func (d *Daemon) persistDue(source, kind string, log zerolog.Logger) {
	if kind != cursor.KindReconcile {
		return
	}
	src := d.p.src(source)
	if src == nil {
		return
	}
	rs := make([]string, len(src.Resources))
	for i, r := range src.Resources {
		rs[i] = string(r)
	}
	ctx, cancel := context.WithTimeout(d.ctx, 10*time.Second)
	defer cancel()
	if err := d.p.store.MarkReconcileDue(ctx, source, rs, time.Now()); err != nil {
		log.Warn().Err(err).Msg("could not record the due reconcile (it is still due in this daemon)")
	}
}

// load reads the source's pass_state once: a back-off or a due reconcile
// outlives a restart or a change of owner.
func (d *Daemon) load(source string, st *sourceState, log zerolog.Logger) {
	d.mu.Lock()
	loaded := st.loaded
	d.mu.Unlock()
	if loaded {
		return
	}
	ctx, cancel := context.WithTimeout(d.ctx, 10*time.Second)
	defer cancel()
	list, err := d.p.store.PassStates(ctx, source)
	if err != nil {
		log.Warn().Err(err).Msg("could not read the source's pass state; starting afresh")
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	st.loaded = true
	for _, ps := range list {
		p := st.pass(clients.Resource(ps.Resource), ps.Kind)
		p.failures = max(p.failures, ps.Failures)
		if ps.BackoffUntil != nil && ps.BackoffUntil.After(p.notUntil) {
			p.notUntil = *ps.BackoffUntil
		}
		p.due = p.due || ps.DueSince != nil
	}
}

// tick plans and runs the steps of one tick: the incremental of each
// resource not backing off (on incremental ticks), then each due reconcile
// not backing off.
func (d *Daemon) tick(ctx context.Context, source, kind string, st *sourceState, log zerolog.Logger) {
	src := d.p.src(source)
	now := time.Now()
	var steps []Step
	d.mu.Lock()
	for _, k := range []string{cursor.KindIncremental, cursor.KindReconcile} {
		if k == cursor.KindIncremental && kind != cursor.KindIncremental {
			continue
		}
		for _, r := range src.Resources {
			ps := st.pass(r, k)
			if k == cursor.KindReconcile && !ps.due {
				continue
			}
			if now.Before(ps.notUntil) {
				ev, msg := log.Info(), "backing off after failures; skipping this resource this tick"
				if ps.failures == 0 {
					ev, msg = log.Debug(), "resource not available from this source; skipping it until the next try"
				}
				ev.Str("resource", string(r)).Str("pass", k).Time("until", ps.notUntil).Int("failures", ps.failures).Msg(msg)
				continue
			}
			steps = append(steps, Step{Resource: r, Kind: k})
		}
	}
	d.mu.Unlock()
	if len(steps) == 0 {
		return
	}
	results, err := d.p.Steps(ctx, source, steps)
	switch {
	case errors.Is(err, ErrBusy):
		log.Info().Msg("source leased by another process or pass; skipping this tick")
		return
	case err != nil:
		// The source as a whole failed (say, its lease is unreachable):
		// every step of the tick failed with it.
		results = results[:0]
		for _, s := range steps {
			results = append(results, StepResult{Step: s, Err: err})
		}
	}
	for _, sr := range results {
		d.record(source, st, sr, log)
	}
}

// record updates a resource's back-off after a step, here and in pass_state.
func (d *Daemon) record(source string, st *sourceState, sr StepResult, base zerolog.Logger) {
	// Built only for a line to write: an idle pass writes none, and a
	// logger per pass was a tenth of an idle daemon's garbage.
	logger := func() *zerolog.Logger {
		l := base.With().Str("resource", string(sr.Resource)).Str("pass", sr.Kind).Logger()
		return &l
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(d.ctx), 10*time.Second)
	defer cancel()
	d.mu.Lock()
	ps := st.pass(sr.Resource, sr.Kind)
	switch {
	case sr.Skipped:
		// Not available from the source (a right the token lacks, a
		// feature the plan lacks): asked again after a while, not at every
		// tick, where each ask costs a request of the source's budget (a
		// Toggl Free workspace has 30 an hour).
		ps.failures, ps.notUntil, ps.due = 0, time.Now().Add(d.reconcileBackoffMax), false
		d.mu.Unlock()
	case sr.Err == nil:
		if ps.failures > 0 {
			logger().Info().Int("after_failures", ps.failures).Msg("resource recovered")
		}
		hadState := ps.failures > 0 || ps.due
		ps.failures, ps.notUntil = 0, time.Time{}
		if sr.Kind == cursor.KindReconcile {
			ps.due = false
		}
		d.mu.Unlock()
		if hadState {
			d.p.backoffMark(source, sr.Resource, sr.Kind, "", time.Time{})
			if err := d.p.store.PassOK(ctx, source, string(sr.Resource), sr.Kind); err != nil {
				logger().Warn().Err(err).Msg("could not record the recovery")
			}
		}
	case d.ctx.Err() != nil:
		// Shutting down: not a failure of the resource.
		d.mu.Unlock()
	default:
		ps.failures++
		ceil := d.backoffMax
		if sr.Kind == cursor.KindReconcile {
			ceil = d.reconcileBackoffMax
		}
		wait := min(d.backoffBase<<min(ps.failures-1, 16), ceil)
		reason := "failing"
		if errors.Is(sr.Err, clients.ErrCapped) {
			// A listing that shifted under its walks once is listed again
			// at the next tick; one that stays capped or unstable backs
			// off (each try walks it up to 3 times), up to an hour.
			reason, wait = "capped", 0
			if ps.failures > 1 {
				wait = min(d.backoffBase<<min(ps.failures-2, 16), CappedBackoffMax)
			}
		}
		ps.notUntil = time.Now().Add(wait)
		failures, until := ps.failures, ps.notUntil
		d.mu.Unlock()
		d.p.backoffMark(source, sr.Resource, sr.Kind, reason, until)
		logger().Error().Err(sr.Err).Int("failures", failures).Dur("backoff", wait).Msg("pass failed")
		if err := d.p.store.PassFailed(ctx, source, string(sr.Resource), sr.Kind, failures, until, sr.Err.Error()); err != nil {
			logger().Warn().Err(err).Msg("could not record the failure")
		}
	}
}

// cronLogger sends robfig/cron's own messages to zerolog.
type cronLogger struct{ log zerolog.Logger }

func (l cronLogger) Info(msg string, kv ...any) { l.log.Debug().Fields(kv).Msg("cron: " + msg) }
func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.Error().Err(err).Fields(kv).Msg("cron: " + msg)
}
