package poller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/rs/zerolog"
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
	running  bool
	failures int
	notUntil time.Time
}

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

// job returns the cron job of one kind of pass of one source. A tick is
// skipped while the source's previous pass runs, or while it backs off after
// failures; the skip is logged.
func (d *Daemon) job(source, kind string) func() {
	return func() {
		log := d.log.With().Str("source", source).Str("kind", kind).Logger()
		d.mu.Lock()
		st := d.state[source]
		if d.ctx.Err() != nil {
			d.mu.Unlock()
			return
		}
		if st.running {
			d.mu.Unlock()
			log.Warn().Msg("previous pass of this source still running; skipping this tick")
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
		if kind == "reconcile" {
			_, err = d.p.Reconcile(d.ctx, source)
		} else {
			_, err = d.p.Incremental(d.ctx, source)
		}

		d.mu.Lock()
		defer d.mu.Unlock()
		st.running = false
		switch {
		case err == nil:
			if st.failures > 0 {
				log.Info().Int("after_failures", st.failures).Msg("source recovered")
			}
			st.failures, st.notUntil = 0, time.Time{}
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
	}
}

// cronLogger sends robfig/cron's own messages to zerolog.
type cronLogger struct{ log zerolog.Logger }

func (l cronLogger) Info(msg string, kv ...any) { l.log.Debug().Fields(kv).Msg("cron: " + msg) }
func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.Error().Err(err).Fields(kv).Msg("cron: " + msg)
}
