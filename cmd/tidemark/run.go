package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

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
				listen = a.Config.Listen
			}
			return a.RunDaemon(ctx, listen, sigs, exitFailed, nil)
		},
	}
	f.register(c, false)
	c.Flags().StringVar(&listen, "listen", "", "serve /healthz, /readyz and /metrics on this address (default: the config's listen)")
	return c
}
