package app

import (
	"cmp"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/procs"
	"github.com/tidemarkhq/tidemark/poller"
	"github.com/tidemarkhq/tidemark/webhooks"
)

// ShutdownGrace bounds a graceful stop (DESIGN.md: exit 0 within 30 s).
const ShutdownGrace = 25 * time.Second

// DaemonGCPercent is the daemon's GC target unless GOGC or GOMEMLIMIT is
// set. A daemon's live heap is small and its garbage comes in one burst a
// tick; at Go's default (100) the heap grows to twice the live heap between
// collections, which was most of an idle daemon's RSS (1,000 idle sources:
// 63-73 MiB). 50 kept them at 54-57 MiB but collected 23 times a minute;
// 75 keeps them near 61 MiB (under issue 15's 64) with 14 collections a
// minute, a quarter of a point of a core less (BENCHMARKS.md, issue 30).
const DaemonGCPercent = 75

// tuneGC applies DaemonGCPercent, leaving an operator's own setting alone.
func tuneGC() {
	if os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetGCPercent(DaemonGCPercent)
	}
}

// RunDaemon runs the daemon until a signal arrives on sigs; a second signal
// exits the process at once with exitNow. started, when set, is called once
// the daemon runs (the demo prints its dashboard from there).
func (a *App) RunDaemon(ctx context.Context, listen string, sigs <-chan os.Signal, exitNow int, started func(*poller.Poller)) error {
	if err := a.CheckBudgets(); err != nil {
		return err
	}
	tuneGC()
	// One P while idle (internal/procs).
	defer procs.Govern(cmp.Or(a.Procs, procs.DefaultPolicy), a.Log)()
	a.share = true // share.go: a source's client only while this replica owns it
	p, err := a.Poller(ctx, "")
	if err != nil {
		return err
	}
	var scheds []poller.Schedule
	for _, s := range a.Config.Sources {
		scheds = append(scheds, poller.Schedule{Source: s.Name, Incremental: s.Schedule, Reconcile: s.Reconcile.Schedule})
	}
	d, err := poller.NewDaemon(p, config.CronParser, scheds)
	if err != nil {
		return UsageError{err}
	}
	d.JoinFleet(a.fleetParams()) // fleet.go
	a.shareSources(d)            // share.go
	if listen != "" {
		srv, err := a.ServeOps(listen)
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	feed, err := a.StartChangeFeed(ctx)
	if err != nil {
		return err
	}
	defer feed.Stop(context.WithoutCancel(ctx))
	defer a.StartRunsRetention(ctx)()    // runs.go
	defer a.StartHistoryRetention(ctx)() // history.go
	d.Start(ctx, true)
	a.startWebhooks(d)
	a.Log.Info().Int("sources", len(scheds)).Str("version", a.Version).Msg("daemon started")
	if started != nil {
		started(p)
	}

	for stop := false; !stop; {
		select {
		case <-sigs:
			stop = true
		case <-a.Reloads:
			a.Log.Info().Str("config", a.Config.Path).Msg("SIGHUP: reloading the config")
			_ = a.reload(ctx, d) // reload.go; a refusal is logged and counted
		}
	}
	a.Log.Info().Dur("grace", ShutdownGrace).Msg("stopping: no new passes; the page in hand commits or rolls back (signal again to exit at once)")
	go func() {
		<-sigs
		a.Log.Warn().Msg("second signal: exiting at once")
		os.Exit(exitNow)
	}()
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	if err := d.Stop(sctx); err != nil {
		// DESIGN.md: SIGTERM exits 0 within 30 s. A page still in hand (e.g.
		// waiting on a lock) is rolled back when the process exits, which is
		// the "roll back" half of the promise; the next pass re-applies it.
		a.Log.Warn().Err(err).Msg("passes still running at the shutdown deadline: exiting; their open transactions roll back")
		a.Abandoned = true
		return nil
	}
	a.Log.Info().Msg("stopped")
	return nil
}

// ServeOps serves the status page (/), /healthz, /readyz and /metrics on
// listen.
func (a *App) ServeOps(listen string) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", a.statusHandler) // status.go
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := a.Pool.Ping(ctx); err != nil {
			http.Error(w, "database unreachable", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	mux.Handle("/metrics", promhttp.HandlerFor(a.Metrics.Registry, promhttp.HandlerOpts{}))
	a.webhookRoutes(mux)
	l := a.OpsListener
	if l == nil {
		var err error
		if l, err = net.Listen("tcp", listen); err != nil {
			return nil, Usagef("listen %s: %v", listen, err)
		}
	}
	to := a.opsTimeouts()
	// Every phase of a connection is bounded: this address faces the
	// internet when provider webhooks are on, and a stalled sender (a
	// trickled body, an idle keep-alive) must not hold a descriptor for
	// ever, nor take /healthz and /metrics with it.
	srv := &http.Server{Addr: l.Addr().String(), Handler: mux, ReadHeaderTimeout: to.ReadHeader,
		ReadTimeout: to.Read, WriteTimeout: to.Write, IdleTimeout: to.Idle}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.Log.Error().Err(err).Msg("ops server stopped")
		}
	}()
	a.Log.Info().Str("listen", l.Addr().String()).Msg("serving / (status), /healthz, /readyz, /metrics")
	return srv, nil
}

// OpsTimeouts bound the ops listener's connections: reading a request's
// headers, reading a whole request, writing a response, a keep-alive
// connection's idle time, and reading a webhook delivery's body.
type OpsTimeouts struct {
	ReadHeader, Read, Write, Idle, Body time.Duration
}

// DefaultOpsTimeouts are generous for a status page, /metrics and webhook
// deliveries of a few kilobytes, and short for a stalled connection.
var DefaultOpsTimeouts = OpsTimeouts{ReadHeader: 5 * time.Second, Read: 15 * time.Second, Write: 30 * time.Second,
	Idle: 60 * time.Second, Body: webhooks.DefaultBodyWithin}

// opsTimeouts is a.OpsTimeouts with DefaultOpsTimeouts for zero fields.
func (a *App) opsTimeouts() OpsTimeouts {
	t, d := a.OpsTimeouts, DefaultOpsTimeouts
	return OpsTimeouts{ReadHeader: cmp.Or(t.ReadHeader, d.ReadHeader), Read: cmp.Or(t.Read, d.Read),
		Write: cmp.Or(t.Write, d.Write), Idle: cmp.Or(t.Idle, d.Idle), Body: cmp.Or(t.Body, d.Body)}
}
