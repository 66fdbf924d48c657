// Package app wires a configuration into a running tidemark: the database
// pool, the metrics, each configured source built through its kind's
// registration, the poller and the daemon with its ops endpoints. The CLI in
// cmd/tidemark holds only flags and output, and calls this.
package app

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/provider"
	"github.com/tidemarkhq/tidemark/clients/simulated"
	"github.com/tidemarkhq/tidemark/cursor"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/metrics"
	"github.com/tidemarkhq/tidemark/internal/procs"
	"github.com/tidemarkhq/tidemark/poller"
	"github.com/tidemarkhq/tidemark/schema"
)

// MaxConns bounds the pool whatever the number of sources: passes wait for a
// connection rather than opening more (leases live on one more connection).
const MaxConns = 8

// UsageError marks errors that mean bad usage or configuration (the CLI's
// exit code 2).
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError.
func Usagef(format string, args ...any) error { return UsageError{fmt.Errorf(format, args...)} }

// App is a loaded configuration connected to its database.
type App struct {
	Config  *config.Config
	DBURL   string
	Pool    *pgxpool.Pool
	Log     zerolog.Logger
	Metrics *metrics.Metrics
	// Version goes into the User-Agent.
	Version string
	// Simulated holds the built-in trackers by source name (demo checks).
	Simulated map[string]*simulated.Tracker
	// Abandoned is set when passes were still running at the shutdown
	// deadline; Close then leaves the pool to the process exit.
	Abandoned bool

	// Reloads, when set, asks RunDaemon to reload the config's sources
	// (SIGHUP in `tidemark run`; reload.go).
	Reloads <-chan os.Signal

	// Fleet overrides the daemon's fleet membership (tests: several
	// replicas in one process); zero: this host and pid, 5 s heartbeats.
	Fleet poller.FleetParams

	// Procs is how the daemon governs its P count (internal/procs); zero:
	// procs.DefaultPolicy (tests make it quick).
	Procs procs.Policy

	// OpsTimeouts bound the ops listener's connections (daemon.go); zero
	// fields take DefaultOpsTimeouts' (tests make them short).
	OpsTimeouts OpsTimeouts

	// configAt is when Config was loaded (a reload sets it): of two
	// replicas with different configs for one source, the newer serves it.
	configAt time.Time

	wh      *webhookState // webhooks.go
	pacers  sync.Map      // source → *cursor.Pacer (budget.go)
	pacing  pacing        // budget.go
	closers []func()
	// share: the daemon builds a source's client only while it owns the
	// source (share.go); slots are its sources by name.
	share   bool
	slotsMu sync.Mutex // a reload changes slots while the daemon runs
	slots   map[string]*slot
	// histOn is history_sources as read once (history.go): which source's
	// resources have history on; nil until read.
	histOn map[string]bool
	histMu sync.Mutex
	// OpsListener, when set, is where ServeOps serves (the demo holds the
	// port it found free until the daemon serves on it); nil: listen.
	OpsListener net.Listener
	// cfgMu guards Config while a reload replaces it (reload.go).
	cfgMu sync.RWMutex
}

// Open connects to the database of a loaded configuration.
func Open(ctx context.Context, cfg *config.Config, dbURL, version string, log zerolog.Logger) (*App, error) {
	a := &App{Config: cfg, DBURL: dbURL, Log: log, Metrics: metrics.New(), Version: version, configAt: time.Now()}
	if err := a.connect(ctx); err != nil {
		return nil, err
	}
	return a, nil
}

// OnClose runs fn when the App closes (last added, first run).
func (a *App) OnClose(fn func()) { a.closers = append(a.closers, fn) }

func (a *App) connect(ctx context.Context) error {
	pc, err := pgxpool.ParseConfig(a.DBURL)
	if err != nil {
		return Usagef("database URL: %v", redactErr(err))
	}
	pc.MaxConns = MaxConns
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	a.Pool = pool
	a.closers = append(a.closers, pool.Close, a.releasePacers)
	return nil
}

func (a *App) Close() {
	if a.Abandoned {
		// A pass outlived the shutdown grace: closing the pool would wait for
		// its connection. Exiting drops the connections instead, and
		// Postgres rolls their open transactions back.
		return
	}
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
}

// redactErr keeps a password in a URL out of a parse error.
func redactErr(err error) string {
	s := err.Error()
	if i := strings.Index(s, "://"); i >= 0 {
		if j := strings.Index(s[i:], "@"); j >= 0 {
			return s[:i+3] + "…" + s[i+j:]
		}
	}
	return s
}

// sources builds the configured sources (all of them, or only the one named).
func (a *App) Sources(ctx context.Context, only string) ([]poller.Source, error) {
	var out []poller.Source
	for i := range a.Config.Sources {
		sc := &a.Config.Sources[i]
		if only != "" && sc.Name != only {
			continue
		}
		ps, err := a.pollerSource(ctx, sc)
		if err != nil {
			return nil, err
		}
		out = append(out, ps)
	}
	return out, nil
}

// pollerSource builds one configured source with its pass settings.
func (a *App) pollerSource(ctx context.Context, sc *config.Source) (poller.Source, error) {
	src, err := a.buildSource(ctx, sc)
	if err != nil {
		return poller.Source{}, err
	}
	var rs []clients.Resource
	for _, r := range sc.Resources {
		if t, err := schema.Parse(r); err == nil { // the config was validated
			rs = append(rs, t.Name)
		}
	}
	return poller.Source{
		Source: src, Resources: rs, Overlap: sc.Overlap.D(),
		LookbackDays: sc.Reconcile.LookbackDays, MaxTombstones: sc.Reconcile.MaxTombstones,
		WindowDays: sc.Backfill.WindowDays, Events: bool(sc.Events),
		History: historyResources(sc), HistoryKeep: sc.History.Keep.D(),
	}, nil
}

// historyResources are the resources of sc with history on.
func historyResources(sc *config.Source) []clients.Resource {
	var out []clients.Resource
	for _, r := range sc.History.Resources {
		out = append(out, clients.Resource(r))
	}
	return out
}

// buildSource builds one source through its kind's registration
// (clients/provider): no switch on the kind here. In the daemon (a.share)
// the source is a slot whose client is built while the daemon owns it
// (share.go); this first build only checks the configuration and is
// dropped, unless the kind started something of its own (the simulated
// tracker, which is the source's data): that one stays.
func (a *App) buildSource(ctx context.Context, sc *config.Source) (clients.Source, error) {
	kind, err := provider.Lookup(sc.Kind)
	if err != nil {
		return nil, Usagef("%s: source %s: %v", a.Config.Path, sc.Name, err)
	}
	newClient := kind.New // the closure keeps this, not the whole Kind: it lives as long as the slot
	build := func() (provider.Built, error) {
		// The process's logger: each client adds the source to its own (a
		// derived logger per source here would cost 500 bytes a source and
		// write the source field twice).
		waits := &waitRecorder{pool: a.Pool, source: sc.Name, log: a.Log, metrics: a.Metrics}
		env := provider.Env{
			Contact: a.Config.Contact, Version: a.Version, Logger: a.Log,
			OnResponse: func(status int, _ time.Duration) {
				a.Metrics.Request(sc.Name, status)
				waits.response(status)
			},
			OnWait: waits.wait,
		}
		if a.Pool != nil {
			// The source's budget, shared with every other process on
			// this database: a restart or a CLI run never starts afresh.
			env.Pacer = a.Pacer(sc.Name)
			// Its memos, per account: another token is another owner.
			env.Memo = cursor.New(a.Pool).Memo(sc.Name, sc.Settings().Account())
		}
		return newClient(ctx, sc.Settings(), env)
	}
	b, err := build()
	if err != nil {
		return nil, err
	}
	src := b.Source
	if b.Close != nil {
		a.closers = append(a.closers, b.Close)
	} else {
		sl := &slot{sc: sc, resources: b.Source.Resources(), build: build}
		if !a.share {
			sl.src = b.Source // a CLI command: it lists the source now
		}
		a.slotsMu.Lock()
		if a.slots == nil {
			a.slots = map[string]*slot{}
		}
		a.slots[sc.Name] = sl
		a.slotsMu.Unlock()
		src = sl
	}
	a.noteSource(sc.Name, src, b.Source) // webhooks.go
	if s, ok := clients.As[*simulated.Source](b.Source); ok {
		if a.Simulated == nil {
			a.Simulated = map[string]*simulated.Tracker{}
		}
		a.Simulated[sc.Name] = s.Tracker
	}
	return src, nil
}

// waitRecorder records in the database when a source makes us wait long
// (Toggl's 402 quota, a long Retry-After), so that `tidemark cursors` in
// another process can say "waiting for quota until …"; the record goes when
// the source answers again.
type waitRecorder struct {
	pool    *pgxpool.Pool
	source  string
	log     zerolog.Logger
	metrics *metrics.Metrics

	mu      sync.Mutex
	waiting bool
}

// longWait is the shortest wait worth showing to an operator.
const longWait = 30 * time.Second

func (w *waitRecorder) wait(reason string, d time.Duration) {
	if w.pool == nil || (reason != "quota" && (reason != "retry_after" || d < longWait)) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	until := time.Now().Add(d)
	if err := cursor.SetWait(ctx, w.pool, cursor.Wait{Source: w.source, Until: until, Reason: reason}); err != nil {
		w.log.Warn().Str("source", w.source).Err(err).Msg("could not record the wait")
		return
	}
	w.waiting = true
	w.metrics.Wait(w.source, reason, until)
	w.log.Warn().Str("source", w.source).Str("reason", reason).Time("until", until).Msg("source asked us to wait")
}

func (w *waitRecorder) response(status int) {
	if status < 200 || status >= 300 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.waiting {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := cursor.ClearWait(ctx, w.pool, w.source); err == nil {
		w.waiting = false
		w.metrics.Resumed(w.source)
		w.log.Info().Str("source", w.source).Msg("source answers again; resumed")
	}
}

func (a *App) Poller(ctx context.Context, only string) (*poller.Poller, error) {
	srcs, err := a.Sources(ctx, only)
	if err != nil {
		return nil, err
	}
	a.prepareHistories(ctx, srcs) // history.go
	p, err := poller.New(poller.Params{Pool: a.Pool, Sources: srcs, Logger: a.Log, Observer: a.Metrics})
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, p.Close)
	a.pacing.owns.Store(&p)
	return p, nil
}
