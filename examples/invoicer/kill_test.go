package invoicer_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/events"
	"github.com/tidemarkhq/tidemark/events/eventstest"
	"github.com/tidemarkhq/tidemark/examples/invoicer"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
)

// The child process's settings: the database and the accounting API.
const (
	childDB  = "INVOICER_TEST_CHILD_DB"
	childAPI = "INVOICER_TEST_CHILD_API"
)

// child runs the invoicer as its own process until SIGTERM (or SIGKILL).
func child() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv(childDB))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	v := &invoicer.Invoicer{Pool: pool, URL: os.Getenv(childAPI)}
	err = events.Consume(ctx, pool, "inv", v.Handle, events.Backoff(20*time.Millisecond, 200*time.Millisecond))
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestSIGKILLedInvoicer kills the invoicer's process for real, at random
// and right after the accounting API answered a create, against an API that
// takes a while to create (and finishes after its client died), answers
// 409 while a key is in flight and replays a finished key's answer. The
// approved time changes meanwhile (a request changed under a live key).
// In the end: one invoice per client and week, and every invoice's id in
// the outcome store (issue 23, item 8).
func TestSIGKILLedInvoicer(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := invoicer.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	api := invoicer.NewAccounting()
	// Longer than a restart: a new process asks while the key is in flight.
	api.Delay = 400 * time.Millisecond
	created := make(chan struct{}, 1)
	api.OnCreated = func(invoicer.Invoice) {
		select {
		case created <- struct{}{}:
		default:
		}
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)

	// Three clients, three weeks each, approved; entry ids are unique.
	var recs []clients.Record
	id := 0
	entry := func(v time.Time, client string, day clients.Date, hours string) clients.Record {
		id++
		return eventstest.Entry(fmt.Sprint(id), v, client, day, hours, true)
	}
	for _, c := range []string{"5", "6", "7"} {
		for w := range 3 {
			recs = append(recs, entry(eventstest.T0, c, mon.AddDays(7*w), "2.5"), entry(eventstest.T0, c, wed.AddDays(7*w), "1.25"))
		}
	}
	eventstest.Apply(t, pool, "acme", clients.TimeEntries, recs...)

	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childDB+"="+url, childAPI+"="+srv.URL)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	rng := rand.New(rand.NewPCG(23, 8))
	const kills = 16
	for i := range kills {
		cmd := start()
		if i%2 == 0 {
			select { // right after a create was answered
			case <-created:
			case <-time.After(2 * time.Second): // nothing left to create
			}
		} else {
			time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if i == kills/2 {
			// Right after a create was answered and the process killed:
			// more time approved for every week, one of them just invoiced
			// with its outcome not recorded: changed requests.
			var more []clients.Record
			for _, c := range []string{"5", "6", "7"} {
				for w := range 3 {
					more = append(more, entry(eventstest.T0.Add(time.Hour), c, wed.AddDays(7*w), "4"))
				}
			}
			eventstest.Apply(t, pool, "acme", clients.TimeEntries, more...)
		}
	}
	// The last process runs until every event is handled and no outcome is
	// unknown.
	cmd := start()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var pending int
		err := pool.QueryRow(context.Background(), `SELECT
  (SELECT count(*) FROM invoicer_outcomes WHERE status = 'in_progress') +
  (SELECT count(*) FROM events e WHERE e.seq > coalesce((SELECT position FROM event_consumers WHERE name = 'inv'), 0))`).Scan(&pending)
		if err == nil && pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the invoicer never finished: %d pending, %v", pending, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	time.Sleep(api.Delay) // a create a killed process left in flight has ended

	perWeek := map[string]int{}
	for _, inv := range api.Invoices() {
		perWeek[inv.Idem]++
		var ext *string
		var status string
		err := pool.QueryRow(context.Background(), `SELECT external_id, status FROM invoicer_outcomes WHERE key = $1`, inv.Idem).Scan(&ext, &status)
		if err != nil || ext == nil || *ext != inv.ID {
			t.Errorf("invoice %s of %s: outcome %s with external id %v (%v)", inv.ID, inv.Idem, status, deref(ext), err)
		}
	}
	if len(perWeek) != 9 {
		t.Errorf("%d client-weeks invoiced, want 9: %v", len(perWeek), perWeek)
	}
	for k, n := range perWeek {
		if n != 1 {
			t.Errorf("%s: %d invoices", k, n)
		}
	}
	var reviews int
	err = pool.QueryRow(context.Background(), `SELECT count(*) FROM invoicer_outcomes WHERE status = 'review' AND note LIKE '%invoice inv_% exists%'`).Scan(&reviews)
	t.Logf("%d POSTs, %d answered 409, %d outcomes in review naming their invoice (%v)", api.Posts(), api.Conflicts(), reviews, err)
}

func deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}
