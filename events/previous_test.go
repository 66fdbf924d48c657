package events_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/events"
	"github.com/tidemarkhq/tidemark/events/eventstest"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/upsert"
)

// applyBoth applies recs with events and history on.
func applyBoth(t *testing.T, pool *pgxpool.Pool, recs ...clients.Record) {
	t.Helper()
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		_, err := upsert.Apply(context.Background(), tx, "acme", clients.TimeEntries, recs, upsert.WithEvents(true), upsert.WithHistory(true))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func feed(t *testing.T, pool *pgxpool.Pool) []events.Event {
	t.Helper()
	var out []events.Event
	_, err := events.Drain(context.Background(), pool, "test", func(_ context.Context, _ pgx.Tx, ev events.Event) error {
		out = append(out, ev)
		return nil
	}, 100)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestUpdatedEventCarriesPreviousValues (issue 32): with history on, an
// updated event's previous values are the history's previous version,
// field by field, and only the fields that changed; with history off the
// event is as before (none).
func TestUpdatedEventCarriesPreviousValues(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	ctx := context.Background()
	if err := upsert.EnsureHistory(ctx, pool, "acme", []clients.Resource{clients.TimeEntries}); err != nil {
		t.Fatal(err)
	}
	day := clients.Date{Year: 2026, Month: 11, Day: 30}
	t1 := eventstest.T0.Add(time.Hour)
	applyBoth(t, pool, eventstest.Entry("1", eventstest.T0, "5", day, "1.5", false))
	applyBoth(t, pool, eventstest.Entry("1", t1, "5", day, "2.25", true))
	evs := feed(t, pool)
	if len(evs) != 2 || evs[1].Kind != events.Updated {
		t.Fatalf("feed = %+v", evs)
	}
	if prev, err := evs[0].Previous(ctx, pool); err != nil || prev != nil {
		t.Fatalf("created event: previous %v, %v", prev, err)
	}
	prev, err := evs[1].Previous(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	// Field by field against the history's previous version.
	var want map[string]json.RawMessage
	err = pool.QueryRow(ctx, `SELECT jsonb_build_object('hours', hours, 'is_closed', is_closed) FROM time_entries_versions('acme', '1') WHERE seq = (SELECT min(seq) FROM time_entries_history)`).Scan(&want)
	if err != nil {
		t.Fatal(err)
	}
	if len(prev) != 2 || string(prev["hours"]) != string(want["hours"]) || string(prev["is_closed"]) != "false" {
		t.Fatalf("previous = %s, the history's previous version %s", mustJSON(prev), mustJSON(want))
	}

	// History off: the event is as before.
	eventstest.Apply(t, pool, "acme", clients.Clients, eventstest.Client("9", eventstest.T0, "A"))
	eventstest.Apply(t, pool, "acme", clients.Clients, eventstest.Client("9", t1, "B"))
	evs = feed(t, pool)
	if len(evs) != 2 {
		t.Fatalf("clients feed = %+v", evs)
	}
	if prev, err := evs[1].Previous(ctx, pool); err != nil || prev != nil {
		t.Fatalf("history off: previous %v, %v", prev, err)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
