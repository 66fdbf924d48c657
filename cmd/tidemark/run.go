package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/poller"
)

// shutdownGrace bounds a graceful stop (DESIGN.md: exit 0 within 30 s).
const shutdownGrace = 25 * time.Second

func newRunCmd(g *globals) *cobra.Command {
	var f appFlags
	var listen string
	c := &cobra.Command{
		Use:   "run",
		Short: "Run the daemon: scheduled passes for every source until SIGINT/SIGTERM",
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Our own signal handling: the first signal stops gracefully, a
			// second one exits at once.
			ctx, cancel := context.WithCancel(context.WithoutCancel(cmd.Context()))
			defer cancel()
			sigs := make(chan os.Signal, 2)
			signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(sigs)

			a, err := newApp(ctx, g, &f)
			if err != nil {
				return err
			}
			defer a.Close()
			if listen == "" {
				listen = a.cfg.Listen
			}
			return runDaemon(ctx, a, listen, sigs, nil)
		},
	}
	f.register(c, false)
	c.Flags().StringVar(&listen, "listen", "", "serve /healthz, /readyz and /metrics on this address (default: the config's listen)")
	return c
}

// runDaemon runs the daemon until a signal arrives. started, when set, is
// called once the daemon runs (the demo prints its dashboard from there).
func runDaemon(ctx context.Context, a *app, listen string, sigs <-chan os.Signal, started func(*poller.Poller)) error {
	p, err := a.poller(ctx, "")
	if err != nil {
		return err
	}
	var scheds []poller.Schedule
	for _, s := range a.cfg.Sources {
		scheds = append(scheds, poller.Schedule{Source: s.Name, Incremental: s.Schedule, Reconcile: s.Reconcile.Schedule})
	}
	d, err := poller.NewDaemon(p, config.CronParser, scheds)
	if err != nil {
		return usageError{err}
	}
	if listen != "" {
		srv, err := serveOps(a, listen)
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	d.Start(ctx, true)
	a.log.Info().Int("sources", len(scheds)).Str("version", version).Msg("daemon started")
	if started != nil {
		started(p)
	}

	<-sigs
	a.log.Info().Dur("grace", shutdownGrace).Msg("stopping: no new passes; the page in hand commits or rolls back (signal again to exit at once)")
	go func() {
		<-sigs
		a.log.Warn().Msg("second signal: exiting at once")
		os.Exit(exitFailed)
	}()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := d.Stop(sctx); err != nil {
		// DESIGN.md: SIGTERM exits 0 within 30 s. A page still in hand (e.g.
		// waiting on a lock) is rolled back when the process exits, which is
		// the "roll back" half of the promise; the next pass re-applies it.
		a.log.Warn().Err(err).Msg("passes still running at the shutdown deadline: exiting; their open transactions roll back")
		a.abandoned = true
		return nil
	}
	a.log.Info().Msg("stopped")
	return nil
}

func serveOps(a *app, listen string) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := a.pool.Ping(ctx); err != nil {
			http.Error(w, "database unreachable", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	mux.Handle("/metrics", promhttp.HandlerFor(a.metrics.Registry, promhttp.HandlerOpts{}))
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, usagef("listen %s: %v", listen, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error().Err(err).Msg("ops server stopped")
		}
	}()
	a.log.Info().Str("listen", l.Addr().String()).Msg("serving /healthz, /readyz, /metrics")
	return srv, nil
}
