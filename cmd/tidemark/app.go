package main

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	tmapp "github.com/tidemarkhq/tidemark/internal/app"
	"github.com/tidemarkhq/tidemark/internal/config"
)

// app is what every command that works on a config needs: the wiring
// (internal/app) and the command's globals.
type app struct {
	*tmapp.App
	g *globals
}

type appFlags struct {
	db     dbFlags
	source string
	// sourceRequired makes appCommand refuse to run without --source.
	sourceRequired bool
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
		// Any writer with a terminal's Fd: the bar's termGate too.
		if isTerminal(g.stderr) {
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

// appCommand completes c as a command that works on a config and its
// database: --config, --database-url and --source, and a RunE that opens the
// app, runs run with it and closes it. Checks that need no database go in
// c.PreRunE (after the one of f.sourceRequired), so that bad usage opens
// nothing.
func appCommand(g *globals, f *appFlags, c *cobra.Command, run func(context.Context, *app) error) *cobra.Command {
	f.register(c, true)
	if f.sourceRequired {
		check := c.PreRunE
		c.PreRunE = func(cmd *cobra.Command, args []string) error {
			if f.source == "" {
				return usagef("--source is required")
			}
			if check == nil {
				return nil
			}
			return check(cmd, args)
		}
	}
	return withOpened(c, func(ctx context.Context) (*app, error) { return newApp(ctx, g, f) }, run)
}

// withOpened sets c's RunE: open what the command works on, run, close it.
func withOpened[T interface{ Close() }](c *cobra.Command, open func(context.Context) (T, error), run func(context.Context, T) error) *cobra.Command {
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		v, err := open(cmd.Context())
		if err != nil {
			return err
		}
		defer v.Close()
		return run(cmd.Context(), v)
	}
	return c
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
	ta, err := tmapp.Open(ctx, cfg, u, version, log)
	if err != nil {
		return nil, err
	}
	return &app{App: ta, g: g}, nil
}
