// Command invoicer runs the example invoicer (package invoicer) as a
// consumer of tidemark's change feed:
//
//	invoicer --database-url URL --accounting-url http://accounting.internal [--consumer invoicer]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/events"
	"github.com/tidemarkhq/tidemark/examples/invoicer"
)

func main() {
	dbURL := flag.String("database-url", os.Getenv("DATABASE_URL"), "the mirror's PostgreSQL URL")
	apiURL := flag.String("accounting-url", "", "the accounting API")
	name := flag.String("consumer", "invoicer", "consumer name")
	flag.Parse()
	if *dbURL == "" || *apiURL == "" {
		fmt.Fprintln(os.Stderr, "invoicer: --database-url and --accounting-url are required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := zerolog.New(os.Stderr).With().Timestamp().Logger()
	pool, err := pgxpool.New(ctx, *dbURL)
	if err == nil {
		err = invoicer.Migrate(ctx, pool)
	}
	if err == nil {
		v := &invoicer.Invoicer{Pool: pool, URL: *apiURL}
		err = events.Consume(ctx, pool, *name, v.Handle, events.Logger(log))
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Error().Err(err).Msg("invoicer stopped")
		os.Exit(1)
	}
}
