package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

func newRunCmd(g *globals) *cobra.Command {
	var f appFlags
	var listen string
	c := &cobra.Command{Use: "run", Short: "Run the daemon: scheduled passes for every source until SIGINT/SIGTERM; SIGHUP reloads the config's sources"}
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		// SIGHUP reloads here (like Prometheus or nginx), not a stop.
		ctx, sigs, stop := ownSignals(cmd.Context(), false)
		defer stop()
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		a, err := newApp(ctx, g, &f)
		if err != nil {
			return err
		}
		defer a.Close()
		if listen == "" {
			listen = a.Config.Listen
		}
		a.Reloads = hup
		return a.RunDaemon(ctx, listen, sigs, exitFailed, nil)
	}
	f.register(c, false)
	c.Flags().StringVar(&listen, "listen", "", "serve /healthz, /readyz and /metrics on this address (default: the config's listen)")
	return c
}

// untilSignal sets c's RunE for a command that runs until a signal and
// handles the signals itself (ownSignals): run gets the detached context and
// the signals.
func untilSignal(c *cobra.Command, run func(ctx context.Context, sigs <-chan os.Signal) error) *cobra.Command {
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, sigs, stop := ownSignals(cmd.Context(), true)
		defer stop()
		return run(ctx, sigs)
	}
	return c
}

// every calls fn every d until ctx ends.
func every(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// ownSignals detaches ctx from the root's signal handling so that the
// command handles SIGINT, SIGTERM and SIGHUP itself: the first stops
// gracefully, a second exits at once. SIGHUP (the terminal or tmux pane
// closed) is a stop too, or the demo would die without removing its
// PostgreSQL; under nohup, where SIGHUP is ignored, it stays ignored.
// stop undoes it. hupStops false leaves SIGHUP to the caller (`run`
// reloads on it).
func ownSignals(parent context.Context, hupStops bool) (ctx context.Context, sigs <-chan os.Signal, stop func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	if hupStops && !signal.Ignored(syscall.SIGHUP) {
		signal.Notify(ch, syscall.SIGHUP)
	}
	return ctx, ch, func() { signal.Stop(ch); cancel() }
}
