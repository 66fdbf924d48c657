package events_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/events"
)

// An event id depends only on the change: the same change applied again,
// by another replica or by a backfill, has the same id.
func ExampleChange_ID() {
	c := events.Change{Source: "acme", Resource: clients.TimeEntries, RecordID: "636709355",
		Version: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
	copy(c.Hash[:], "the row's content hash, 32 bytes")
	again := c
	again.Kind = events.Updated // the kind is what upsert saw, not part of the change's identity
	fmt.Println(events.FormatID(c.ID()) == events.FormatID(again.ID()))
	c.Version = c.Version.Add(time.Second)
	fmt.Println(events.FormatID(c.ID()) == events.FormatID(again.ID()))
	// Output:
	// true
	// false
}

// Consume runs the effect and moves the position in one transaction: an
// effect written through tx happens exactly once.
// (Not run: it needs a migrated database at DATABASE_URL.)
func ExampleConsume() {
	ctx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	err = events.Consume(ctx, pool, "hours-per-day", func(ctx context.Context, tx pgx.Tx, ev events.Event) error {
		if ev.Resource != clients.TimeEntries {
			return nil
		}
		_, err := tx.Exec(ctx, `INSERT INTO changed_entries (source, id, version) VALUES ($1, $2, $3)`, ev.Source, ev.RecordID, ev.Version)
		return err
	})
	fmt.Println(err)
}
