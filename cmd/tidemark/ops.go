package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidemarkhq/tidemark/clients/simulated"
)

// Stamped by the release build (see README, "Run it like production"):
//
//	-ldflags "-X main.version=v1.2.3 -X main.commit=$(git rev-parse HEAD) -X main.date=…"
var (
	commit = "unknown"
	date   = "unknown"
)

// versionLine is what `tidemark version` prints.
func versionLine() string {
	return fmt.Sprintf("tidemark %s (commit %s, built %s, %s %s/%s)", version, commit, date, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// newHealthCmd is the container's HEALTHCHECK: the image has no shell or
// curl (static, distroless), so the binary asks its own /healthz.
func newHealthCmd(g *globals) *cobra.Command {
	var addr string
	c := &cobra.Command{
		Use:   "health",
		Short: "Exit 0 when the daemon's /healthz answers 200 (for container health checks)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 3*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr, nil)
			if err != nil {
				return usagef("--url %q: %v", addr, err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return fmt.Errorf("health: %w", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("health: %s answered %d", addr, resp.StatusCode)
			}
			fmt.Fprintln(g.stdout, "ok")
			return nil
		},
	}
	c.Flags().StringVar(&addr, "url", "http://127.0.0.1:9464/healthz", "the health endpoint to ask")
	return c
}

// newSimulateCmd serves the built-in simulated tracker on an address, so
// that several replicas (compose, Kubernetes) poll one shared tracker as
// `kind: harvest` sources instead of each running its own.
func newSimulateCmd(g *globals) *cobra.Command {
	var listen string
	var p simulated.Params
	var every time.Duration
	var perTick int
	c := untilSignal(&cobra.Command{Use: "simulate", Short: "Serve the simulated tracker (Harvest dialect) on an address, for a fleet to poll"},
		func(ctx context.Context, sigs <-chan os.Signal) error {
			tr, err := simulated.New(p)
			if err != nil {
				return usageError{err}
			}
			defer tr.Close()
			go tr.Run(ctx, every, perTick)
			target, err := url.Parse(tr.URL())
			if err != nil {
				return err
			}
			l, err := net.Listen("tcp", listen)
			if err != nil {
				return usagef("--listen %s: %v", listen, err)
			}
			// The tracker serves on loopback; this proxies the address to it.
			srv := &http.Server{Handler: httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host}),
				ReadHeaderTimeout: 5 * time.Second}
			go srv.Serve(l)
			defer srv.Close()
			fmt.Fprintf(g.stdout, "simulated tracker on http://%s/v2 (account_id %s, token %s)\n", l.Addr(), tr.AccountID(), tr.Token())
			<-sigs
			return nil
		})
	c.Flags().StringVar(&listen, "listen", "127.0.0.1:8080", "address to serve the tracker on")
	c.Flags().Int64Var(&p.Seed, "seed", 42, "same seed, same agency")
	c.Flags().IntVar(&p.Users, "users", 20, "users of the agency")
	c.Flags().IntVar(&p.Days, "days", 365, "days of history")
	c.Flags().BoolVar(&p.NoRateLimit, "no-rate-limit", false, "do not enforce Harvest's 100 requests per 15 s")
	c.Flags().DurationVar(&every, "every", time.Second, "how often the tracker changes its data")
	c.Flags().IntVar(&perTick, "mutations-per-tick", 20, "creates, edits and deletes per change")
	return c
}
