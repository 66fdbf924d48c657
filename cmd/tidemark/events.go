package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/tidemarkhq/tidemark/events"
)

// newEventsCmd is `tidemark events …`: the change feed (issue 13).
func newEventsCmd(g *globals) *cobra.Command {
	return group("events", "The change feed: tail it as a consumer, list consumers and webhook deliveries, redrive dead letters",
		newEventsTailCmd(g), newEventsConsumersCmd(g), newEventsResetCmd(g), newEventsDeliveriesCmd(g), newEventsRedriveCmd(g))
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
	var log zerolog.Logger
	c := f.poolCommand(&cobra.Command{
		Use:   "tail",
		Short: "Print the events after the consumer's position and acknowledge them (at least once: a crash before the acknowledgement prints them again)",
		PreRunE: func(*cobra.Command, []string) error {
			if err := requireConsumer(name); err != nil {
				return err
			}
			var err error
			log, err = g.logger()
			return err
		},
	}, func(ctx context.Context, pool *pgxpool.Pool) error {
		var tw *table
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
				tw = newTable(g.stdout, "SEQ\tRECORDED\tKIND\tSOURCE\tRESOURCE\tRECORD\tVERSION\tEVENT_ID")
			}
			tw.row(ev.Seq, ev.RecordedAt.UTC().Format(time.RFC3339), ev.Kind,
				ev.Source, ev.Resource, ev.RecordID, ev.Version.UTC().Format(time.RFC3339), ev.ID)
			if follow {
				return tw.flush()
			}
			return nil
		}
		var err error
		if follow {
			err = events.Consume(ctx, pool, name, print, events.Logger(log))
			if errors.Is(err, context.Canceled) {
				err = nil
			}
		} else {
			_, err = events.Drain(ctx, pool, name, print, 0, events.Logger(log))
		}
		if tw != nil {
			if ferr := tw.flush(); err == nil {
				err = ferr
			}
		}
		return err
	})
	c.Flags().StringVar(&name, "consumer", "", "consumer name (its position is kept in the database)")
	c.Flags().BoolVar(&follow, "follow", false, "keep printing new events as they are committed (NOTIFY, polling as fallback)")
	c.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per line")
	return c
}

// poolListCommand completes c as a command that lists rows from the
// database: a table with header and cells, or with --json a JSON array.
func poolListCommand[T any](g *globals, c *cobra.Command, list func(context.Context, *pgxpool.Pool) ([]T, error),
	header string, cells func(T) []any) *cobra.Command {
	var f dbFlags
	var asJSON bool
	f.poolCommand(c, func(ctx context.Context, pool *pgxpool.Pool) error {
		rows, err := list(ctx, pool)
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(g.stdout, rows)
		}
		return printTable(g.stdout, header, rows, cells)
	})
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func newEventsConsumersCmd(g *globals) *cobra.Command {
	return poolListCommand(g, &cobra.Command{Use: "consumers", Short: "List the consumers: position, pending events, position age, status"},
		events.Consumers, "CONSUMER\tPOSITION\tPENDING\tPOSITION_AGE\tSTATUS", func(s events.ConsumerStatus) []any {
			status := s.Status
			if s.Behind {
				status = "behind the retention horizon: resynchronize from the mirror tables, then `tidemark events reset --consumer " + s.Name + " --yes`"
			} else if s.Note != "" {
				status += ": " + s.Note
			}
			return []any{s.Name, s.Position, s.Pending, s.Age.Round(time.Second), status}
		})
}

func newEventsResetCmd(g *globals) *cobra.Command {
	var f dbFlags
	var name string
	var enable, yes bool
	c := f.poolCommand(&cobra.Command{
		Use:   "reset",
		Short: "Move a consumer to the head of the feed (after it resynchronized from the mirror tables), and/or --enable a disabled one",
		PreRunE: func(*cobra.Command, []string) error {
			if err := requireConsumer(name); err != nil {
				return err
			}
			if !yes && !enable {
				return usagef("moving %q to the head skips every event it has not seen: pass --yes (or only --enable to turn it back on)", name)
			}
			return nil
		},
	}, func(ctx context.Context, pool *pgxpool.Pool) error {
		if err := events.Reset(ctx, pool, events.ResetParams{Consumer: name, ToHead: yes, Enable: enable}); err != nil {
			return err
		}
		fmt.Fprintf(g.stdout, "consumer %s reset\n", name)
		return nil
	})
	c.Flags().StringVar(&name, "consumer", "", "consumer name")
	c.Flags().BoolVar(&enable, "enable", false, "turn a disabled consumer back on")
	c.Flags().BoolVar(&yes, "yes", false, "move the position to the newest event")
	return c
}

func newEventsDeliveriesCmd(g *globals) *cobra.Command {
	var name string
	var all bool
	var limit int
	list := func(ctx context.Context, pool *pgxpool.Pool) ([]events.Delivery, error) {
		return events.Deliveries(ctx, pool, events.DeliveriesParams{Consumer: name, DeadOnly: !all, Limit: limit})
	}
	c := poolListCommand(g, &cobra.Command{Use: "deliveries", Short: "List webhook deliveries: the dead letters (default) or all of them, newest first"},
		list, "JOB\tCONSUMER\tEVENT_ID\tSEQ\tSTATE\tATTEMPTS\tCREATED\tLAST_ERROR", func(d events.Delivery) []any {
			state := d.State
			if d.Dead() {
				state += " (dead)"
			}
			return []any{d.JobID, d.Consumer, d.EventID, d.Seq, state, d.Attempts, d.CreatedAt.UTC().Format(time.RFC3339), d.LastError}
		})
	c.Flags().StringVar(&name, "consumer", "", "only this consumer")
	c.Flags().BoolVar(&all, "all", false, "every delivery, not only the dead letters")
	c.Flags().IntVar(&limit, "limit", 100, "how many")
	return c
}

func newEventsRedriveCmd(g *globals) *cobra.Command {
	var f dbFlags
	var name, eventID string
	c := f.poolCommand(&cobra.Command{
		Use:     "redrive",
		Short:   "Send a consumer's dead-lettered deliveries again (same webhook-id, a new resend window)",
		PreRunE: func(*cobra.Command, []string) error { return requireConsumer(name) },
	}, func(ctx context.Context, pool *pgxpool.Pool) error {
		n, err := events.Redrive(ctx, pool, events.RedriveParams{Consumer: name, EventID: eventID})
		if err != nil {
			return err
		}
		fmt.Fprintf(g.stdout, "redrove %d deliveries of %s\n", n, name)
		return nil
	})
	c.Flags().StringVar(&name, "consumer", "", "the webhook consumer")
	c.Flags().StringVar(&eventID, "event", "", "only this event id (evt_…)")
	return c
}
