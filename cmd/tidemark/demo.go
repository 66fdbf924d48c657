package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidemarkhq/tidemark/configs"
	tmapp "github.com/tidemarkhq/tidemark/internal/app"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/pgcluster"
	"github.com/tidemarkhq/tidemark/internal/verify"
	"github.com/tidemarkhq/tidemark/migrations"
	"github.com/tidemarkhq/tidemark/poller"
	"github.com/tidemarkhq/tidemark/schema"
)

func newDemoCmd(g *globals) *cobra.Command {
	var every time.Duration
	c := &cobra.Command{
		Use:   "demo",
		Short: "Run the whole system on this machine: a simulated tracker, a real Postgres, the daemon",
		Long: `demo starts the built-in simulated tracker (Harvest dialect, with a stream of
creates, edits and deletes), uses DATABASE_URL or else starts a throwaway
PostgreSQL from the local server binaries, migrates it, and runs the daemon
with configs/simulated.yaml. Every few seconds it prints the cursors, the row
counts and a mirror-versus-source check. Ctrl-C stops it and removes the
throwaway database.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, sigs, stop := ownSignals(cmd.Context())
			defer stop()
			// The status printed every few seconds is what a newcomer should
			// read; the daemon's info lines would bury it (--log-level info
			// brings them back).
			if !cmd.Flags().Changed("log-level") {
				g.logLevel = "warn"
			}
			return runDemo(ctx, g, every, sigs)
		},
	}
	c.Flags().DurationVar(&every, "every", 5*time.Second, "how often to print the status")
	return c
}

func runDemo(ctx context.Context, g *globals, every time.Duration, sigs <-chan os.Signal) error {
	log, err := g.logger()
	if err != nil {
		return err
	}
	dbURL := os.Getenv("DATABASE_URL")
	if dbURL == "" {
		fmt.Fprintln(g.stdout, "Starting a throwaway PostgreSQL (set DATABASE_URL to use yours)...")
		cl, err := pgcluster.Start(ctx, pgcluster.Options{})
		if err != nil {
			return fmt.Errorf("start PostgreSQL: %w", err)
		}
		defer func() {
			if err := cl.Stop(); err != nil {
				log.Warn().Err(err).Msg("stop PostgreSQL")
			}
		}()
		dbURL = cl.URL("postgres")
		fmt.Fprintf(g.stdout, "PostgreSQL is at %s (removed when the demo ends)\n", dbURL)
	}
	if _, err := migrations.Up(ctx, dbURL); err != nil {
		return err
	}
	cfg, err := config.Parse("configs/simulated.yaml", configs.Simulated, func(k string) (string, bool) {
		if k == "DATABASE_URL" {
			return dbURL, true
		}
		return os.LookupEnv(k)
	})
	if err != nil {
		return err
	}
	ta, err := tmapp.Open(ctx, cfg, dbURL, version, log)
	if err != nil {
		return err
	}
	a := &app{App: ta, g: g}
	defer a.Close()
	listen := cfg.Listen
	if l, err := net.Listen("tcp", listen); err != nil {
		listen = "" // taken (another demo?): run without the ops endpoints
	} else {
		l.Close()
		fmt.Fprintf(g.stdout, "Metrics: http://%s/metrics\n", listen)
	}
	fmt.Fprintf(g.stdout, "Running the daemon with configs/simulated.yaml. Ctrl-C to stop.\n\n")

	return a.RunDaemon(ctx, listen, sigs, exitFailed, func(p *poller.Poller) {
		go func() {
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					printDemoStatus(ctx, g, a)
				}
			}
		}()
	})
}

func printDemoStatus(ctx context.Context, g *globals, a *app) {
	var b strings.Builder
	fmt.Fprintf(&b, "── %s ──\n", time.Now().Format(time.TimeOnly))
	rows, err := cursorRows(ctx, a, "", time.Now())
	if err != nil {
		fmt.Fprintf(g.stdout, "status: %v\n", err)
		return
	}
	writeCursorTable(&b, rows)
	hw := map[string]time.Time{}
	for _, r := range rows {
		if r.HighWater != nil {
			hw[r.Source+"/"+r.Resource] = *r.HighWater
		}
	}
	for name, tr := range a.Simulated {
		truth := tr.Truth()
		for _, r := range schema.Resources() {
			key := name + "/" + string(r)
			asOf, ok := hw[key]
			if !ok {
				fmt.Fprintf(&b, "%-24s waiting for the first pass\n", key)
				continue
			}
			rep, err := verify.Compare(ctx, a.Pool, name, r, truth.Versions(r), asOf)
			if err != nil {
				fmt.Fprintf(&b, "%-24s %v\n", key, err)
				continue
			}
			state := "in sync"
			if rep.Missing+rep.Stale+rep.Ahead > 0 {
				state = "NOT in sync"
			}
			fmt.Fprintf(&b, "%-24s %s: %d live, %d missing, %d stale; %d changed since the cursor (next pass), %d deleted at the source awaiting reconcile\n",
				key, state, rep.Live, rep.Missing, rep.Stale+rep.Ahead, rep.Pending, rep.Undeleted)
		}
	}
	fmt.Fprintln(g.stdout, b.String())
}
