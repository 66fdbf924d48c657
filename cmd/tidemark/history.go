package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/tidemarkhq/tidemark/history"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/schema"
)

const historyLong = `Prints every version of one record in the order the mirror applied them:
its change (created, updated, deleted, restored, first_seen), valid time (from
the provider's version until the next; "open" for the current one), recorded
time (when this mirror learned it), the run that wrote it, and the typed
columns: all but nulls for the first version, then only those that changed
(old → new). Needs the resource in the source's ` + "`history:`" + ` (config).

--json prints an array, one object per version:
  seq, prev_seq          the order applied (prev_seq: the version before)
  change, deleted        kind of change; whether the version is a deletion
  valid_from, valid_to   valid time, RFC 3339 UTC (valid_to null: open)
  recorded_from, recorded_to   recorded time (recorded_to null: current)
  run_id, updated_at, content_hash
  values                 every typed column: {column: value}
  changed                columns that differ from the version before:
                         {column: {"from": old, "to": new}} ({} for the first)
  raw_changed            true when the kept raw differs too (invoice lines)
Values are PostgreSQL's JSON of the column: numerics exact, times in UTC.`

// newHistoryCmd is `tidemark history SOURCE RESOURCE ID` and its `diff`
// (issue 32).
func newHistoryCmd(g *globals) *cobra.Command {
	var f dbFlags
	var asJSON bool
	var t *schema.Table
	c := &cobra.Command{
		Use:   "history SOURCE RESOURCE ID",
		Short: "Show every version of one record and what changed between them; `history diff` compares two instants",
		Long:  historyLong,
		Args:  cobra.ExactArgs(3),
		PreRunE: func(_ *cobra.Command, args []string) (err error) {
			t, err = parseResource(args[1])
			return err
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.withHistoryPool(cmd.Context(), args[0], func(ctx context.Context, pool *pgxpool.Pool) error {
				vs, err := history.Versions(ctx, pool, args[0], t, args[2])
				if err != nil {
					return historyErr(err)
				}
				if asJSON {
					return writeJSON(g.stdout, vs)
				}
				return writeVersions(g.stdout, args[0], t, args[2], vs)
			})
		},
	}
	f.register(c, true)
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON (an array of versions; see above)")
	c.AddCommand(newHistoryDiffCmd(g))
	return c
}

// parseResource is the RESOURCE argument (exit 2 when unknown).
func parseResource(s string) (*schema.Table, error) {
	t, err := schema.Parse(s)
	if err != nil {
		return nil, usagef("RESOURCE: %w", err)
	}
	return t, nil
}

// historyErr makes the history's "not on" and "unknown source" usage
// errors (exit 2): the config is what to fix.
func historyErr(err error) error {
	var no *history.NotOnError
	var us *history.UnknownSourceError
	if errors.As(err, &no) || errors.As(err, &us) {
		return usageError{err}
	}
	return err
}

// withHistoryPool checks SOURCE against the config when one is given, then
// connects and runs run.
func (f *dbFlags) withHistoryPool(ctx context.Context, source string, run func(context.Context, *pgxpool.Pool) error) error {
	var cfg *config.Config
	if f.config != "" {
		var err error
		if cfg, err = config.Load(f.config); err != nil {
			return err
		}
		if _, err := cfg.Source(source); err != nil {
			return usagef("SOURCE: %w", err)
		}
	}
	u, err := f.resolve(cfg)
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	defer pool.Close()
	return run(ctx, pool)
}

// parseInstant reads an instant flag: RFC 3339, or YYYY-MM-DD for
// midnight UTC.
func parseInstant(flag, s string) (time.Time, error) {
	if ts, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return ts, nil
	}
	if d, err := time.Parse(time.DateOnly, s); err == nil {
		return d, nil // time.Parse gives UTC without a zone
	}
	return time.Time{}, usagef("--%s %q: want an RFC 3339 instant (2026-12-01T09:00:00Z) or a date (2026-12-01, midnight UTC)", flag, s)
}
