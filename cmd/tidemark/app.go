package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/provider"
	"github.com/tidemarkhq/tidemark/clients/simulated"
	"github.com/tidemarkhq/tidemark/cursor"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/metrics"
	"github.com/tidemarkhq/tidemark/poller"
	"github.com/tidemarkhq/tidemark/schema"
)

// maxConns bounds the pool whatever the number of sources: passes wait for a
// connection rather than opening more (leases live on one more connection).
const maxConns = 8

// app is what every command that works on a config needs.
type app struct {
	g       *globals
	cfg     *config.Config
	dbURL   string
	pool    *pgxpool.Pool
	log     zerolog.Logger
	metrics *metrics.Metrics
	closers []func()
	// simulated holds the built-in trackers by source name (demo checks).
	simulated map[string]*simulated.Tracker
	// abandoned is set when passes were still running at the shutdown
	// deadline; Close then leaves the pool to the process exit.
	abandoned bool
}

type appFlags struct {
	db     dbFlags
	source string
}

func (f *appFlags) register(c *cobra.Command, withSource bool) {
	f.db.register(c, true)
	if withSource {
		c.Flags().StringVar(&f.source, "source", "", "source name (sources[].name in the config)")
	}
}

func (g *globals) logger() (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(strings.ToLower(g.logLevel))
	if err != nil || g.logLevel == "" {
		return zerolog.Nop(), usagef("--log-level %q: want debug, info, warn or error", g.logLevel)
	}
	var w io.Writer = g.stderr
	format := g.logFormat
	if format == "auto" {
		format = "json"
		if f, ok := g.stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			format = "console"
		}
	}
	switch format {
	case "console":
		w = zerolog.ConsoleWriter{Out: g.stderr, TimeFormat: time.TimeOnly}
	case "json":
	default:
		return zerolog.Nop(), usagef("--log-format %q: want auto, console or json", g.logFormat)
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

// newApp loads the config (required) and connects to the database.
func newApp(ctx context.Context, g *globals, f *appFlags) (*app, error) {
	if f.db.config == "" {
		return nil, usagef("--config FILE is required")
	}
	cfg, err := config.Load(f.db.config)
	if err != nil {
		return nil, err
	}
	if f.source != "" {
		if _, err := cfg.Source(f.source); err != nil {
			return nil, usageError{err}
		}
	}
	log, err := g.logger()
	if err != nil {
		return nil, err
	}
	u, err := f.db.resolve(cfg)
	if err != nil {
		return nil, err
	}
	a := &app{g: g, cfg: cfg, dbURL: u, log: log, metrics: metrics.New()}
	if err := a.connect(ctx); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *app) connect(ctx context.Context) error {
	pc, err := pgxpool.ParseConfig(a.dbURL)
	if err != nil {
		return usagef("database URL: %v", redactErr(err))
	}
	pc.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	a.pool = pool
	a.closers = append(a.closers, pool.Close)
	return nil
}

func (a *app) Close() {
	if a.abandoned {
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
func (a *app) sources(ctx context.Context, only string) ([]poller.Source, error) {
	var out []poller.Source
	for i := range a.cfg.Sources {
		sc := &a.cfg.Sources[i]
		if only != "" && sc.Name != only {
			continue
		}
		src, err := a.buildSource(ctx, sc)
		if err != nil {
			return nil, err
		}
		var rs []clients.Resource
		for _, r := range sc.Resources {
			if t, err := schema.Parse(r); err == nil { // the config was validated
				rs = append(rs, t.Name)
			}
		}
		out = append(out, poller.Source{
			Source: src, Resources: rs, Overlap: sc.Overlap.D(),
			LookbackDays: sc.Reconcile.LookbackDays, MaxTombstones: sc.Reconcile.MaxTombstones,
			WindowDays: sc.Backfill.WindowDays,
		})
	}
	return out, nil
}

// buildSource builds one source through its kind's registration
// (clients/provider): no switch on the kind here.
func (a *app) buildSource(ctx context.Context, sc *config.Source) (clients.Source, error) {
	kind, err := provider.Lookup(sc.Kind)
	if err != nil {
		return nil, usagef("%s: source %s: %v", a.cfg.Path, sc.Name, err)
	}
	log := a.log.With().Str("source", sc.Name).Logger()
	waits := &waitRecorder{pool: a.pool, source: sc.Name, log: log}
	env := provider.Env{
		Contact: a.cfg.Contact, Version: version, Logger: log,
		OnResponse: func(status int, _ time.Duration) {
			a.metrics.Request(sc.Name, status)
			waits.response(status)
		},
		OnWait: waits.wait,
	}
	b, err := kind.New(ctx, sc.Settings(), env)
	if err != nil {
		return nil, err
	}
	if b.Close != nil {
		a.closers = append(a.closers, b.Close)
	}
	if s, ok := b.Source.(*simulated.Source); ok {
		if a.simulated == nil {
			a.simulated = map[string]*simulated.Tracker{}
		}
		a.simulated[sc.Name] = s.Tracker
	}
	return b.Source, nil
}

// waitRecorder records in the database when a source makes us wait long
// (Toggl's 402 quota, a long Retry-After), so that `tidemark cursors` in
// another process can say "waiting for quota until …"; the record goes when
// the source answers again.
type waitRecorder struct {
	pool   *pgxpool.Pool
	source string
	log    zerolog.Logger

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
		w.log.Warn().Err(err).Msg("could not record the wait")
		return
	}
	w.waiting = true
	w.log.Warn().Str("reason", reason).Time("until", until).Msg("source asked us to wait")
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
		w.log.Info().Msg("source answers again; resumed")
	}
}

func (a *app) poller(ctx context.Context, only string) (*poller.Poller, error) {
	srcs, err := a.sources(ctx, only)
	if err != nil {
		return nil, err
	}
	p, err := poller.New(poller.Params{Pool: a.pool, Sources: srcs, Logger: a.log, Observer: a.metrics})
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, p.Close)
	return p, nil
}
