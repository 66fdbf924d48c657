package poller_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/cursor"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/poller"
)

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestDaemonSkipsTicksWhilePassRunsAndStopsPromptly(t *testing.T) {
	t.Parallel()
	src := newFakeSource("acme", t0)
	src.put(1, day, "a")
	block := make(chan struct{})
	var blocked sync.Once
	src.onPage = func(clients.Window, int) {
		blocked.Do(func() { <-block })
	}
	var logs syncBuffer
	pool := pgtest.DB(t)
	p, err := poller.New(poller.Params{Pool: pool, Sources: []poller.Source{{Source: src}}, Logger: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	d, err := poller.NewDaemon(p, config.CronParser, []poller.Schedule{{Source: "acme", Incremental: "@every 1s"}})
	if err != nil {
		t.Fatal(err)
	}
	d.Start(context.Background(), true)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "still running; skipping") {
		if time.Now().After(deadline) {
			t.Fatalf("no skipped tick logged:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(block)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("stop took %v", took)
	}
	if !strings.Contains(logs.String(), `"source":"acme"`) {
		t.Fatal("log lines lack the source")
	}
}

func TestDaemonBacksOffAfterFailureAndRecovers(t *testing.T) {
	t.Parallel()
	src := newFakeSource("acme", t0)
	src.put(1, day, "a")
	src.failPage = 1
	var logs syncBuffer
	pool := pgtest.DB(t)
	p, err := poller.New(poller.Params{Pool: pool, Sources: []poller.Source{{Source: src}}, Logger: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	d, err := poller.NewDaemon(p, config.CronParser, []poller.Schedule{{Source: "acme", Incremental: "@every 1s"}})
	if err != nil {
		t.Fatal(err)
	}
	d.Start(context.Background(), true)
	defer d.Stop(context.Background())
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "backing off after failures") {
		if time.Now().After(deadline) {
			t.Fatalf("no back-off logged:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), `"level":"error"`) || !strings.Contains(logs.String(), "pass failed") {
		t.Fatalf("failure not reported:\n%s", logs.String())
	}
}

func TestDaemonOwnsItsSourcesAndRunsQueuedBackfills(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := newFakeSource("acme", t0)
	from := clients.Date{Year: 2026, Month: 1, Day: 1}
	for i := 0; i < 9; i++ {
		src.put(i+1, from.AddDays(i), "x")
	}
	pool := pgtest.DB(t)
	var logs syncBuffer
	p, err := poller.New(poller.Params{Pool: pool, Sources: []poller.Source{{Source: src, WindowDays: 3}}, Logger: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	d, err := poller.NewDaemon(p, config.CronParser, []poller.Schedule{{Source: "acme", Incremental: "@every 1h"}})
	if err != nil {
		t.Fatal(err)
	}
	d.Start(ctx, true)
	defer d.Stop(ctx)

	// Another process (the CLI) sees the source owned, and queues instead.
	other, err := poller.New(poller.Params{Pool: pool, Sources: []poller.Source{{Source: src}}, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	waitFor(t, 10*time.Second, func() bool { return strings.Contains(logs.String(), "this daemon now owns the source") }, "the daemon to own the source")
	if _, err := other.TakeOwnership(ctx, "acme"); !errors.Is(err, poller.ErrBusy) {
		t.Fatalf("another process took the owned source: %v", err)
	}
	q, err := other.Store().QueueBackfill(ctx, cursor.BackfillParams{Source: "acme", Resource: "time_entries",
		From: from, To: from.AddDays(8), WindowDays: 3})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, func() bool {
		b, err := other.Store().Backfill(ctx, q.ID)
		return err == nil && b.Status == cursor.BackfillDone && b.WindowsDone == 3
	}, "the daemon to run the queued backfill")
}

// A reconcile tick that comes while an incremental pass runs is not
// dropped: it runs right after (daily reconciles coincide with ticks).
func TestDaemonRunsACoincidingReconcileAfterThePass(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := newFakeSource("acme", t0)
	src.put(1, clients.DateOf(time.Now().UTC()), "a")
	block := make(chan struct{})
	var once sync.Once
	src.onPage = func(w clients.Window, _ int) {
		if !w.ByDate() {
			once.Do(func() { <-block })
		}
	}
	pool := pgtest.DB(t)
	var logs syncBuffer
	p, err := poller.New(poller.Params{Pool: pool, Sources: []poller.Source{{Source: src}}, Logger: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	d, err := poller.NewDaemon(p, config.CronParser, []poller.Schedule{{Source: "acme", Incremental: "@every 1h", Reconcile: "@every 1s"}})
	if err != nil {
		t.Fatal(err)
	}
	d.Start(ctx, true)
	defer d.Stop(ctx)
	waitFor(t, 10*time.Second, func() bool { return strings.Contains(logs.String(), "the reconcile follows it") }, "a reconcile tick during the pass")
	close(block)
	waitFor(t, 10*time.Second, func() bool {
		var n int
		_ = pool.QueryRow(ctx, `SELECT count(*) FROM sync_runs WHERE kind = 'reconcile' AND status = 'ok'`).Scan(&n)
		return n > 0
	}, "the reconcile to run after the pass")
}

// A backfill stops when its leases are gone (the lease connection dropped):
// a new owner elsewhere must not share the source's budget with it.
func TestBackfillStopsWhenItsLeaseIsLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := newFakeSource("acme", t0)
	from := clients.Date{Year: 2026, Month: 1, Day: 1}
	for i := 0; i < 9; i++ {
		src.put(i+1, from.AddDays(i), "x")
	}
	pool := pgtest.DB(t)
	p, err := poller.New(poller.Params{Pool: pool, Sources: []poller.Source{{Source: src, WindowDays: 3}}, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var windows int
	src.onPage = func(w clients.Window, page int) {
		if page == 1 {
			windows++
			if windows == 1 {
				// Cut the session holding the advisory locks, as a
				// Postgres restart or a network cut would.
				_, _ = pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`)
			}
		}
	}
	_, err = p.Backfill(ctx, poller.BackfillParams{Source: "acme", Resource: clients.TimeEntries, From: from, To: from.AddDays(8)})
	if !errors.Is(err, poller.ErrLeaseLost) {
		t.Fatalf("backfill after the lease connection dropped: %v, want ErrLeaseLost", err)
	}
	if windows != 1 {
		t.Fatalf("%d windows listed after the lease was lost", windows-1)
	}
}
