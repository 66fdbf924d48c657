package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/tidemarkhq/tidemark/events"
	"github.com/tidemarkhq/tidemark/internal/config"
)

// newEventsCmd is `tidemark events …`: the change feed (issue 13).
func newEventsCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "events",
		Short: "The change feed: tail it as a consumer, list consumers and webhook deliveries, redrive dead letters",
	}
	c.AddCommand(newEventsTailCmd(g), newEventsConsumersCmd(g), newEventsResetCmd(g),
		newEventsDeliveriesCmd(g), newEventsRedriveCmd(g))
	return c
}

// withFeed connects for an events command (--database-url, DATABASE_URL,
// or the config's database_url) and runs fn with the pool.
func withFeed(ctx context.Context, f *dbFlags, fn func(*pgxpool.Pool) error) error {
	pool, err := feedPool(ctx, f)
	if err != nil {
		return err
	}
	defer pool.Close()
	return fn(pool)
}

func feedPool(ctx context.Context, f *dbFlags) (*pgxpool.Pool, error) {
	var cfg *config.Config
	if f.config != "" {
		var err error
		if cfg, err = config.Load(f.config); err != nil {
			return nil, err
		}
	}
	u, err := f.resolve(cfg)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	return pool, nil
}

func requireConsumer(name string) error {
	if name == "" {
		return usagef("--consumer NAME is required")
	}
	return nil
}

func newEventsTailCmd(g *globals) *cobra.Command {
	var f dbFlags
	var name string
	var follow, asJSON bool
	c := &cobra.Command{
		Use:   "tail",
		Short: "Print the events after the consumer's position and acknowledge them (at least once: a crash before the acknowledgement prints them again)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireConsumer(name); err != nil {
				return err
			}
			log, err := g.logger()
			if err != nil {
				return err
			}
			pool, err := feedPool(cmd.Context(), &f)
			if err != nil {
				return err
			}
			defer pool.Close()
			var tw *tabwriter.Writer
			print := func(_ context.Context, _ pgx.Tx, ev events.Event) error {
				if asJSON {
					b, err := json.Marshal(ev)
					if err != nil {
						return err
					}
					_, err = fmt.Fprintf(g.stdout, "%s\n", b)
					return err
				}
				if tw == nil {
					tw = tabwriter.NewWriter(g.stdout, 0, 0, 2, ' ', 0)
					fmt.Fprintln(tw, "SEQ\tRECORDED\tKIND\tSOURCE\tRESOURCE\tRECORD\tVERSION\tEVENT_ID")
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ev.Seq, ev.RecordedAt.UTC().Format(time.RFC3339), ev.Kind,
					ev.Source, ev.Resource, ev.RecordID, ev.Version.UTC().Format(time.RFC3339), ev.ID)
				if follow {
					return tw.Flush()
				}
				return nil
			}
			if follow {
				err = events.Consume(cmd.Context(), pool, name, print, events.Logger(log))
				if errors.Is(err, context.Canceled) {
					err = nil
				}
			} else {
				_, err = events.Drain(cmd.Context(), pool, name, print, 0, events.Logger(log))
			}
			if tw != nil {
				if ferr := tw.Flush(); err == nil {
					err = ferr
				}
			}
			return err
		},
	}
	f.register(c, true)
	c.Flags().StringVar(&name, "consumer", "", "consumer name (its position is kept in the database)")
	c.Flags().BoolVar(&follow, "follow", false, "keep printing new events as they are committed (NOTIFY, polling as fallback)")
	c.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per line")
	return c
}

func newEventsConsumersCmd(g *globals) *cobra.Command {
	var f dbFlags
	var asJSON bool
	c := &cobra.Command{
		Use:   "consumers",
		Short: "List the consumers: position, pending events, position age, status",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withFeed(cmd.Context(), &f, func(pool *pgxpool.Pool) error {
				cs, err := events.Consumers(cmd.Context(), pool)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(g.stdout, cs)
				}
				tw := tabwriter.NewWriter(g.stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "CONSUMER\tPOSITION\tPENDING\tPOSITION_AGE\tSTATUS")
				for _, s := range cs {
					status := s.Status
					if s.Behind {
						status = "behind the retention horizon: resynchronize from the mirror tables, then `tidemark events reset --consumer " + s.Name + " --yes`"
					} else if s.Note != "" {
						status += ": " + s.Note
					}
					fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", s.Name, s.Position, s.Pending, s.Age.Round(time.Second), status)
				}
				return tw.Flush()
			})
		},
	}
	f.register(c, true)
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func newEventsResetCmd(g *globals) *cobra.Command {
	var f dbFlags
	var name string
	var enable, yes bool
	c := &cobra.Command{
		Use:   "reset",
		Short: "Move a consumer to the head of the feed (after it resynchronized from the mirror tables), and/or --enable a disabled one",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireConsumer(name); err != nil {
				return err
			}
			if !yes && !enable {
				return usagef("moving %q to the head skips every event it has not seen: pass --yes (or only --enable to turn it back on)", name)
			}
			return withFeed(cmd.Context(), &f, func(pool *pgxpool.Pool) error {
				if err := events.Reset(cmd.Context(), pool, events.ResetParams{Consumer: name, ToHead: yes, Enable: enable}); err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "consumer %s reset\n", name)
				return nil
			})
		},
	}
	f.register(c, true)
	c.Flags().StringVar(&name, "consumer", "", "consumer name")
	c.Flags().BoolVar(&enable, "enable", false, "turn a disabled consumer back on")
	c.Flags().BoolVar(&yes, "yes", false, "move the position to the newest event")
	return c
}

func newEventsDeliveriesCmd(g *globals) *cobra.Command {
	var f dbFlags
	var name string
	var all, asJSON bool
	var limit int
	c := &cobra.Command{
		Use:   "deliveries",
		Short: "List webhook deliveries: the dead letters (default) or all of them, newest first",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withFeed(cmd.Context(), &f, func(pool *pgxpool.Pool) error {
				ds, err := events.Deliveries(cmd.Context(), pool, events.DeliveriesParams{Consumer: name, DeadOnly: !all, Limit: limit})
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(g.stdout, ds)
				}
				tw := tabwriter.NewWriter(g.stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "JOB\tCONSUMER\tEVENT_ID\tSEQ\tSTATE\tATTEMPTS\tCREATED\tLAST_ERROR")
				for _, d := range ds {
					state := d.State
					if d.Dead() {
						state += " (dead)"
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%d\t%s\t%s\n", d.JobID, d.Consumer, d.EventID, d.Seq, state, d.Attempts,
						d.CreatedAt.UTC().Format(time.RFC3339), d.LastError)
				}
				return tw.Flush()
			})
		},
	}
	f.register(c, true)
	c.Flags().StringVar(&name, "consumer", "", "only this consumer")
	c.Flags().BoolVar(&all, "all", false, "every delivery, not only the dead letters")
	c.Flags().IntVar(&limit, "limit", 100, "how many")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func newEventsRedriveCmd(g *globals) *cobra.Command {
	var f dbFlags
	var name, eventID string
	c := &cobra.Command{
		Use:   "redrive",
		Short: "Send a consumer's dead-lettered deliveries again (same webhook-id, a new resend window)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireConsumer(name); err != nil {
				return err
			}
			return withFeed(cmd.Context(), &f, func(pool *pgxpool.Pool) error {
				n, err := events.Redrive(cmd.Context(), pool, events.RedriveParams{Consumer: name, EventID: eventID})
				if err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "redrove %d deliveries of %s\n", n, name)
				return nil
			})
		},
	}
	f.register(c, true)
	c.Flags().StringVar(&name, "consumer", "", "the webhook consumer")
	c.Flags().StringVar(&eventID, "event", "", "only this event id (evt_…)")
	return c
}
