package events_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/events"
	"github.com/tidemarkhq/tidemark/events/eventstest"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// effectsDB returns a test database with a table, effects, that the
// consumers of these tests write their effect to, in the transaction that
// moves their position.
func effectsDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := pgtest.DB(t)
	if _, err := pool.Exec(context.Background(), `CREATE TABLE effects (event_id text PRIMARY KEY, record_id text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return pool
}

func recordEffect(ctx context.Context, tx pgx.Tx, ev events.Event) error {
	// No ON CONFLICT: a second effect for one event fails the test.
	_, err := tx.Exec(ctx, `INSERT INTO effects (event_id, record_id) VALUES ($1, $2)`, ev.ID, ev.RecordID)
	return err
}

func count(t *testing.T, pool *pgxpool.Pool, q string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestDrainExactlyOnceEffect(t *testing.T) {
	t.Parallel()
	pool := effectsDB(t)
	ctx := context.Background()
	eventstest.Clients(t, pool, "acme", 1, 5)
	eventstest.Clients(t, pool, "acme", 1, 5) // re-delivery: no events
	n, err := events.Drain(ctx, pool, "fx", recordEffect, 0)
	if err != nil || n != 5 {
		t.Fatalf("drain: %d, %v", n, err)
	}
	// Caught up: nothing more, and a second drain changes nothing.
	if n, err := events.Drain(ctx, pool, "fx", recordEffect, 0); err != nil || n != 0 {
		t.Fatalf("second drain: %d, %v", n, err)
	}
	eventstest.Apply(t, pool, "acme", clients.Clients, eventstest.Client("3", eventstest.T0.Add(time.Hour), "Renamed"))
	if n, err := events.Drain(ctx, pool, "fx", recordEffect, 0); err != nil || n != 1 {
		t.Fatalf("drain after an edit: %d, %v", n, err)
	}
	if got := count(t, pool, `SELECT count(*) FROM effects`); got != 6 {
		t.Fatalf("%d effects, want 6", got)
	}
}

// TestHandlerErrorKeepsPosition: an fn error rolls back its effect and
// leaves the position; the event is retried with back-off until fn succeeds.
func TestHandlerErrorKeepsPosition(t *testing.T) {
	t.Parallel()
	pool := effectsDB(t)
	eventstest.Clients(t, pool, "acme", 1, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var calls atomic.Int32
	var stamps []time.Time
	fn := func(ctx context.Context, tx pgx.Tx, ev events.Event) error {
		stamps = append(stamps, time.Now())
		if err := recordEffect(ctx, tx, ev); err != nil {
			return err
		}
		if ev.RecordID == "1" && calls.Add(1) <= 3 {
			return errors.New("accounting API down") // after the effect: it must roll back
		}
		return nil
	}
	n, err := events.Drain(ctx, pool, "flaky", fn, 0, events.Backoff(20*time.Millisecond, time.Second),
		events.Logger(zerolog.New(zerolog.NewTestWriter(t))))
	if err != nil || n != 2 {
		t.Fatalf("drain: %d, %v", n, err)
	}
	if calls.Load() != 4 || count(t, pool, `SELECT count(*) FROM effects`) != 2 {
		t.Fatalf("%d calls for record 1, %d effects", calls.Load(), count(t, pool, `SELECT count(*) FROM effects`))
	}
	// Back-off grows: the third wait is longer than the first's minimum.
	if gap := stamps[3].Sub(stamps[2]); gap < 40*time.Millisecond {
		t.Fatalf("third retry after %s: no back-off", gap)
	}
}

// TestOneProcessPerName: while one Consume holds a name, Drain under it is
// refused and a second Consume waits; the standby takes over when the first
// stops, from the position the first left.
func TestOneProcessPerName(t *testing.T) {
	t.Parallel()
	pool := effectsDB(t)
	eventstest.Clients(t, pool, "acme", 1, 3)
	ctx1, stop1 := context.WithCancel(context.Background())
	done1 := make(chan error, 1)
	var first, second atomic.Int32
	go func() {
		done1 <- events.Consume(ctx1, pool, "solo", func(ctx context.Context, tx pgx.Tx, ev events.Event) error {
			first.Add(1)
			return recordEffect(ctx, tx, ev)
		}, events.PollEvery(50*time.Millisecond))
	}()
	waitFor(t, func() bool { return first.Load() == 3 })
	if _, err := events.Drain(context.Background(), pool, "solo", recordEffect, 0); !errors.Is(err, events.ErrBusy) {
		t.Fatalf("drain while held: %v, want ErrBusy", err)
	}
	ctx2, stop2 := context.WithCancel(context.Background())
	defer stop2()
	done2 := make(chan error, 1)
	go func() {
		done2 <- events.Consume(ctx2, pool, "solo", func(ctx context.Context, tx pgx.Tx, ev events.Event) error {
			second.Add(1)
			return recordEffect(ctx, tx, ev)
		}, events.PollEvery(50*time.Millisecond))
	}()
	eventstest.Clients(t, pool, "acme", 10, 2)
	// Committed, not only handed to fn: a stop between fn and the commit
	// rolls the event back and the standby handles it again.
	waitFor(t, func() bool { return count(t, pool, `SELECT count(*) FROM effects`) == 5 })
	if second.Load() != 0 {
		t.Fatalf("the standby handled %d events while the first held the name", second.Load())
	}
	stop1()
	if err := <-done1; !errors.Is(err, context.Canceled) {
		t.Fatalf("first consumer: %v", err)
	}
	eventstest.Clients(t, pool, "acme", 20, 2)
	// One effect per event: the standby committed the last two.
	waitFor(t, func() bool { return count(t, pool, `SELECT count(*) FROM effects`) == 7 })
	stop2()
	<-done2
	if second.Load() != 2 {
		t.Fatalf("the standby handled %d events, want 2", second.Load())
	}
}

// TestNotifyWakesConsumer: with polling every hour, an event still reaches
// fn: the commit's NOTIFY wakes the consumer.
func TestNotifyWakesConsumer(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan events.Event, 10)
	go events.Consume(ctx, pool, "listener", func(ctx context.Context, tx pgx.Tx, ev events.Event) error {
		got <- ev
		return nil
	}, events.PollEvery(time.Hour))
	time.Sleep(200 * time.Millisecond) // let it reach its wait
	eventstest.Clients(t, pool, "acme", 1, 1)
	select {
	case ev := <-got:
		if ev.Kind != events.Created || ev.RecordID != "1" || ev.Resource != clients.Clients || !strings.HasPrefix(ev.ID, "evt_") {
			t.Fatalf("event %+v", ev)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no event: NOTIFY did not wake the consumer")
	}
}

// TestBehindHorizon: retention deleting events a consumer has not seen
// makes it fail with an error that says to resynchronize; reset moves it
// to the head.
func TestBehindHorizon(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	ctx := context.Background()
	eventstest.Clients(t, pool, "acme", 1, 1)
	nop := func(context.Context, pgx.Tx, events.Event) error { return nil }
	if _, err := events.Drain(ctx, pool, "slow", nop, 0); err != nil {
		t.Fatal(err)
	}
	eventstest.Clients(t, pool, "acme", 2, 2)
	time.Sleep(10 * time.Millisecond)
	if n, err := events.Prune(ctx, pool, time.Millisecond); err != nil || n != 3 {
		t.Fatalf("prune: %d, %v", n, err)
	}
	_, err := events.Drain(ctx, pool, "slow", nop, 0)
	var be *events.BehindHorizonError
	if !errors.As(err, &be) || !strings.Contains(err.Error(), "resynchronize it from the mirror tables") {
		t.Fatalf("drain behind the horizon: %v", err)
	}
	err = events.Consume(ctx, pool, "slow", nop)
	if !errors.As(err, &be) {
		t.Fatalf("consume behind the horizon: %v", err)
	}
	cs, err := events.Consumers(ctx, pool)
	if err != nil || len(cs) != 1 || !cs[0].Behind {
		t.Fatalf("consumers: %+v, %v", cs, err)
	}
	if err := events.Reset(ctx, pool, events.ResetParams{Consumer: "slow", ToHead: true}); err != nil {
		t.Fatal(err)
	}
	eventstest.Clients(t, pool, "acme", 5, 1)
	if n, err := events.Drain(ctx, pool, "slow", nop, 0); err != nil || n != 1 {
		t.Fatalf("after reset: %d, %v", n, err)
	}
	if err := events.Reset(ctx, pool, events.ResetParams{Consumer: "nobody", ToHead: true}); err == nil {
		t.Fatal("reset of an unknown consumer succeeded")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPruneInBatches: retention past one batch deletes every expired event
// and moves the horizon to the last one; a consumer that had seen them all
// is not behind.
func TestPruneInBatches(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	ctx := context.Background()
	for i := range 5 {
		eventstest.Clients(t, pool, "acme", 1+i*5000, 5000)
	}
	var head int64
	if err := pool.QueryRow(ctx, `SELECT max(seq) FROM events`).Scan(&head); err != nil {
		t.Fatal(err)
	}
	nop := func(context.Context, pgx.Tx, events.Event) error { return nil }
	if _, err := events.Drain(ctx, pool, "seen-all", nop, 1); err != nil {
		t.Fatal(err)
	}
	if err := events.Reset(ctx, pool, events.ResetParams{Consumer: "seen-all", ToHead: true}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if n, err := events.Prune(ctx, pool, time.Millisecond); err != nil || n != 25000 {
		t.Fatalf("prune: %d, %v", n, err)
	}
	var left, through int64
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM events), pruned_through FROM event_horizon`).Scan(&left, &through); err != nil {
		t.Fatal(err)
	}
	if states := count(t, pool, `SELECT count(*) FROM event_states`); states != 25000 {
		t.Fatalf("%d event_states rows, want one per record pruned (25000)", states)
	}
	if left != 0 || through != head {
		t.Fatalf("%d events left, horizon %d, want 0 and %d", left, through, head)
	}
	if _, err := events.Drain(ctx, pool, "seen-all", nop, 0); err != nil {
		t.Fatalf("a consumer at the head after pruning: %v", err)
	}
}

// TestPruneWaitsForAnOpenAppend: retention takes the append lock, so that an
// append counts a record's earlier occurrences either all in the feed or
// with those retention moved to event_states, never while they move (an
// occurrence counted in neither would give its id again).
func TestPruneWaitsForAnOpenAppend(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	ctx := context.Background()
	eventstest.Clients(t, pool, "acme", 1, 1)
	if _, err := pool.Exec(ctx, `UPDATE events SET recorded_at = recorded_at - interval '1 day'`); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	change := events.Change{Source: "acme", Resource: clients.Clients, RecordID: "2", Kind: events.Created, Version: eventstest.T0}
	if _, err := events.Append(ctx, tx, []events.Change{change}); err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := events.Prune(ctx, pool, time.Hour)
		done <- result{n, err}
	}()
	waitFor(t, func() bool {
		select {
		case r := <-done:
			t.Fatalf("prune finished (%d, %v) while an append was open", r.n, r.err)
		default:
		}
		return count(t, pool, `SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database WHERE d.datname = current_database() AND l.locktype = 'advisory' AND NOT l.granted`) > 0
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || r.n != 1 {
		t.Fatalf("prune after the append: %d, %v", r.n, r.err)
	}
}
