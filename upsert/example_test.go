package upsert_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/schema"
	"github.com/tidemarkhq/tidemark/upsert"
)

// Apply writes a page in the caller's transaction; the poller commits it
// together with its cursor. Delivering the same page again writes nothing.
// (Not run: it needs a migrated database at DATABASE_URL.)
func ExampleApply() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()

	v := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	page := []clients.Record{{
		ID: "2", Version: v, FetchedAt: time.Now(),
		Raw: []byte(`{"id":2,"name":"Graphic Design","is_active":true,"updated_at":"2026-03-01T09:00:00Z"}`),
		Row: schema.Tasks.Row(schema.Values{"name": "Graphic Design", "is_active": true}),
	}}
	for range 2 {
		var c upsert.Counts
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			c, err = upsert.Apply(ctx, tx, "acme", clients.Tasks, page)
			return err
		})
		if err != nil {
			panic(err)
		}
		fmt.Printf("inserted %d, updated %d, unchanged %d\n", c.Inserted, c.Updated, c.Unchanged)
	}
	// Prints, against an empty table:
	// inserted 1, updated 0, unchanged 0
	// inserted 0, updated 0, unchanged 1
}
