// Package eventstest makes real changes with events on, for the tests of
// the change feed and its consumers.
package eventstest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/schema"
	"github.com/tidemarkhq/tidemark/upsert"
)

// T0 is the version of the first state of the records built here.
var T0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// Client is a Harvest-shaped client record: name changes its content,
// version its version.
func Client(id string, version time.Time, name string) clients.Record {
	raw := fmt.Appendf(nil, `{"id":%s,"name":%q,"is_active":true,"currency":"EUR","updated_at":%q}`, id, name, version.Format(time.RFC3339))
	return clients.Record{ID: id, Version: version, FetchedAt: version.Add(time.Minute), Raw: raw,
		Row: schema.Clients.Row(schema.Values{"name": name, "currency": "EUR", "is_active": true})}
}

// Entry is a Harvest-shaped time entry of a client on a day; closed is
// "approved".
func Entry(id string, version time.Time, client string, day clients.Date, hours string, closed bool) clients.Record {
	raw := fmt.Appendf(nil, `{"id":%s,"spent_date":%q,"hours":%s,"is_closed":%t,"client":{"id":%s},"user":{"id":7},"project":{"id":9},"updated_at":%q}`,
		id, day.String(), hours, closed, client, version.Format(time.RFC3339))
	return clients.Record{ID: id, Version: version, FetchedAt: version.Add(time.Minute), Raw: raw,
		Row: schema.TimeEntries.Row(schema.Values{"spent_date": day, "hours": clients.Decimal(hours), "user_id": "7",
			"project_id": "9", "client_id": client, "billable": true, "is_closed": closed})}
}

// Apply applies recs of resource r for source in one transaction with
// events on, and returns the counts.
func Apply(t testing.TB, pool *pgxpool.Pool, source string, r clients.Resource, recs ...clients.Record) upsert.Counts {
	t.Helper()
	return ApplyWith(t, pool, source, r, nil, recs...)
}

// ApplyWith is Apply with more options (upsert.WithHistory).
func ApplyWith(t testing.TB, pool *pgxpool.Pool, source string, r clients.Resource, opts []upsert.Option, recs ...clients.Record) upsert.Counts {
	t.Helper()
	var c upsert.Counts
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		var err error
		c, err = upsert.Apply(context.Background(), tx, source, r, recs, append([]upsert.Option{upsert.WithEvents(true)}, opts...)...)
		return err
	})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return c
}

// Clients applies n new clients (ids from first) as one page and returns
// their ids.
func Clients(t testing.TB, pool *pgxpool.Pool, source string, first, n int) []string {
	t.Helper()
	var recs []clients.Record
	var ids []string
	for i := range n {
		id := fmt.Sprint(first + i)
		ids = append(ids, id)
		recs = append(recs, Client(id, T0, "Client "+id))
	}
	Apply(t, pool, source, clients.Clients, recs...)
	return ids
}
