// Command tidemark keeps a PostgreSQL mirror of a time tracker current by
// polling it. See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	tmapp "github.com/tidemarkhq/tidemark/internal/app"
	"github.com/tidemarkhq/tidemark/internal/config"
)

// Set by the linker: -ldflags "-X main.version=v1.2.3".
var version = "dev"

// Exit codes (DESIGN.md): 0 ok, 1 the work failed, 2 bad usage or configuration.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

// usageError marks errors that mean "bad usage or configuration" (exit 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "tidemark:", err)
	return exitCode(err)
}

func exitCode(err error) int {
	var ue usageError
	var ae tmapp.UsageError
	var ce *config.Error
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue), errors.As(err, &ae), errors.As(err, &ce):
		return exitUsage
	case strings.HasPrefix(err.Error(), "unknown command "):
		// cobra's, for a command that does not exist: bad usage.
		return exitUsage
	default:
		return exitFailed
	}
}

type globals struct {
	stdout, stderr io.Writer
	logLevel       string
	logFormat      string
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "tidemark",
		Short:         "Keep a PostgreSQL mirror of a time tracker current by polling it",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", "auto", "log format: auto (console on a terminal, JSON otherwise), console, json")
	// Flag parse errors are usage errors (exit 2).
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w (see tidemark %s --help)", err, c.Name())}
	})
	root.AddCommand(
		newVersionCmd(g),
		newMigrateCmd(g),
		newRunCmd(g),
		newSyncCmd(g),
		newBackfillCmd(g),
		newCursorsCmd(g),
		newCursorCmd(g),
		newRunsCmd(g),
		newDoctorCmd(g),
		newDemoCmd(g),
		newEventsCmd(g),
		newHealthCmd(g), newSimulateCmd(g), // ops.go
		newWebhooksCmd(g), // webhooks.go
		newHistoryCmd(g),  // history.go
	)
	var wrap func(c *cobra.Command)
	wrap = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			sub.Args = wrapArgs(sub.Args)
			wrap(sub)
		}
	}
	wrap(root)
	return root
}

// group is a command that only holds subcommands.
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short}
	c.AddCommand(subs...)
	return c
}

// wrapArgs turns positional-argument errors into usage errors.
func wrapArgs(a cobra.PositionalArgs) cobra.PositionalArgs {
	if a == nil {
		a = cobra.NoArgs
	}
	return func(cmd *cobra.Command, args []string) error {
		if err := a(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(g.stdout, versionLine()) // ops.go
			return nil
		},
	}
}
