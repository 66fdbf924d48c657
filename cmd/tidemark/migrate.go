package main

import (
	"cmp"
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/migrations"
)

// dbFlags resolves the database URL: --database-url, else DATABASE_URL, else
// the config file's database_url (DESIGN.md).
type dbFlags struct {
	url    string
	config string
}

func (f *dbFlags) register(c *cobra.Command, withConfig bool) {
	c.Flags().StringVar(&f.url, "database-url", "", "PostgreSQL URL (default: $DATABASE_URL, then the config's database_url)")
	if withConfig {
		c.Flags().StringVar(&f.config, "config", "", "configuration file (YAML)")
	}
}

func (f *dbFlags) resolve(cfg *config.Config) (string, error) {
	u := cmp.Or(f.url, os.Getenv("DATABASE_URL"))
	if u == "" && cfg != nil {
		u = cfg.DatabaseURL
	}
	if u == "" {
		return "", usagef("no database: pass --database-url, set DATABASE_URL, or set database_url in the config")
	}
	return u, nil
}

// databaseURL resolves the URL for a command whose --config is optional:
// the config is loaded only when given.
func (f *dbFlags) databaseURL() (string, error) {
	var cfg *config.Config
	if f.config != "" {
		var err error
		if cfg, err = config.Load(f.config); err != nil {
			return "", err
		}
	}
	return f.resolve(cfg)
}

// poolCommand completes c as a command that works on the database alone:
// --database-url and --config (optional), and a RunE that connects, runs run
// with the pool and closes it. Checks that need no database go in c.PreRunE.
func (f *dbFlags) poolCommand(c *cobra.Command, run func(context.Context, *pgxpool.Pool) error) *cobra.Command {
	f.register(c, true)
	return withOpened(c, f.pool, run)
}

func (f *dbFlags) pool(ctx context.Context) (*pgxpool.Pool, error) {
	u, err := f.databaseURL()
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	return pool, nil
}

func newMigrateCmd(g *globals) *cobra.Command {
	var f dbFlags
	c := &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade the database schema (safe to run concurrently)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			u, err := f.databaseURL()
			if err != nil {
				return err
			}
			res, err := migrations.Up(cmd.Context(), u)
			if err != nil {
				return err
			}
			if len(res.Applied) == 0 {
				fmt.Fprintf(g.stdout, "schema is up to date (version %d)\n", res.Version)
			} else {
				fmt.Fprintf(g.stdout, "applied %d migration(s); schema version %d\n", len(res.Applied), res.Version)
			}
			return nil
		},
	}
	f.register(c, true)
	return c
}
