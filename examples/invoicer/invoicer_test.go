package invoicer_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/events"
	"github.com/tidemarkhq/tidemark/events/eventstest"
	"github.com/tidemarkhq/tidemark/examples/invoicer"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/upsert"
)

func TestMain(m *testing.M) {
	if os.Getenv(childDB) != "" {
		os.Exit(child()) // a consumer process of TestSIGKILLedInvoicer
	}
	pgtest.Main(m)
}

var (
	mon = clients.Date{Year: 2026, Month: 3, Day: 2} // ISO week 2026-W10
	wed = clients.Date{Year: 2026, Month: 3, Day: 4}
	nxt = clients.Date{Year: 2026, Month: 3, Day: 9} // 2026-W11
)

func setup(t *testing.T) (*pgxpool.Pool, *invoicer.Accounting, string) {
	t.Helper()
	pool := pgtest.DB(t)
	if err := invoicer.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	api := invoicer.NewAccounting()
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return pool, api, srv.URL
}

// approveWeek applies, as one page, approved entries of client 5 in weeks
// 10 and 11 and one not yet approved.
func approveWeek(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	v := eventstest.T0
	eventstest.Apply(t, pool, "acme", clients.TimeEntries,
		eventstest.Entry("1", v, "5", mon, "2.5", true),
		eventstest.Entry("2", v, "5", wed, "1.25", true),
		eventstest.Entry("3", v, "5", wed, "4", false),
		eventstest.Entry("4", v, "5", nxt, "3", true),
	)
}

func drain(t *testing.T, pool *pgxpool.Pool, v *invoicer.Invoicer, name string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := events.Drain(ctx, pool, name, v.Handle, 0, events.Backoff(10*time.Millisecond, 100*time.Millisecond))
	return err
}

func weeks(api *invoicer.Accounting) map[string]int {
	m := map[string]int{}
	for _, inv := range api.Invoices() {
		m[inv.ClientID+"/"+inv.Week]++
	}
	return m
}

func checkOnePerWeek(t *testing.T, api *invoicer.Accounting) {
	t.Helper()
	w := weeks(api)
	if len(w) != 2 || w["5/2026-W10"] != 1 || w["5/2026-W11"] != 1 {
		t.Fatalf("invoices per client-week: %v, want one for each of 2026-W10 and 2026-W11", w)
	}
}

// TestKillBetweenCreateAndRecord: the process ends after the API created
// the invoice and before the outcome was recorded; the restarted consumer
// gets the same event again, sends the same Idempotency-Key and records the
// invoice the first attempt created: one invoice.
func TestKillBetweenCreateAndRecord(t *testing.T) {
	t.Parallel()
	pool, api, url := setup(t)
	approveWeek(t, pool)
	errKilled := errors.New("killed")
	ctx, kill := context.WithCancel(context.Background())
	crashing := &invoicer.Invoicer{Pool: pool, URL: url, AfterCreate: func() error { kill(); return errKilled }}
	_, err := events.Drain(ctx, pool, "inv", crashing.Handle, 0)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("first process: %v", err)
	}
	if got := len(api.Invoices()); got != 1 {
		t.Fatalf("%d invoices after the first create", got)
	}
	var status string
	if err := pool.QueryRow(context.Background(), `SELECT status FROM invoicer_outcomes`).Scan(&status); err != nil || status != "in_progress" {
		t.Fatalf("outcome after the kill: %q, %v", status, err)
	}
	restarted := &invoicer.Invoicer{Pool: pool, URL: url}
	if err := drain(t, pool, restarted, "inv"); err != nil {
		t.Fatal(err)
	}
	checkOnePerWeek(t, api)
	var ext string
	if err := pool.QueryRow(context.Background(), `SELECT external_id FROM invoicer_outcomes WHERE key = 'acme/5/2026-W10' AND status = 'succeeded'`).Scan(&ext); err != nil || ext != "inv_1" {
		t.Fatalf("recorded invoice %q, %v; want inv_1, the one the killed attempt created", ext, err)
	}
}

// TestResendAndReplay: an API that fails at first, events resent (the
// source re-delivers, the consumer's position moved back) and the whole
// week replayed by a second consumer: still one invoice per client-week.
func TestResendAndReplay(t *testing.T) {
	t.Parallel()
	pool, api, url := setup(t)
	api.FailNext(2)
	approveWeek(t, pool)
	approveWeek(t, pool) // re-delivery: no events
	v := &invoicer.Invoicer{Pool: pool, URL: url}
	if err := drain(t, pool, v, "inv"); err != nil {
		t.Fatal(err)
	}
	checkOnePerWeek(t, api)
	// Resend: the position back to the start, every event again.
	if _, err := pool.Exec(context.Background(), `UPDATE event_consumers SET position = 0 WHERE name = 'inv'`); err != nil {
		t.Fatal(err)
	}
	if err := drain(t, pool, v, "inv"); err != nil {
		t.Fatal(err)
	}
	// Replay the week: a new consumer reads the whole feed.
	if err := drain(t, pool, v, "inv-replay"); err != nil {
		t.Fatal(err)
	}
	checkOnePerWeek(t, api)
}

// TestChangedRequestGoesToAPerson: time approved for a week already
// invoiced changes the request under a live key: the outcome goes to review
// with a note, and no second invoice is made.
func TestChangedRequestGoesToAPerson(t *testing.T) {
	t.Parallel()
	pool, api, url := setup(t)
	approveWeek(t, pool)
	v := &invoicer.Invoicer{Pool: pool, URL: url}
	if err := drain(t, pool, v, "inv"); err != nil {
		t.Fatal(err)
	}
	eventstest.Apply(t, pool, "acme", clients.TimeEntries, eventstest.Entry("3", eventstest.T0.Add(time.Hour), "5", wed, "4", true))
	if err := drain(t, pool, v, "inv"); err != nil {
		t.Fatal(err)
	}
	checkOnePerWeek(t, api)
	var status, note string
	err := pool.QueryRow(context.Background(), `SELECT status, note FROM invoicer_outcomes WHERE key = 'acme/5/2026-W10'`).Scan(&status, &note)
	if err != nil || status != "review" || note == "" {
		t.Fatalf("outcome %q %q, %v; want review with a note", status, note, err)
	}
}

// TestInFlightKeyIsAskedAgain: a create held open past the request timeout
// is an unknown outcome, and the 409 the next attempt gets while the key is
// in flight is too: the key stays in progress, and the attempt after the
// create finished learns the invoice's id (issue 23, item 8).
func TestInFlightKeyIsAskedAgain(t *testing.T) {
	t.Parallel()
	pool, api, url := setup(t)
	api.Delay = time.Second
	approveWeek(t, pool)
	v := &invoicer.Invoicer{Pool: pool, URL: url, HTTP: &http.Client{Timeout: 100 * time.Millisecond}}
	ctx := context.Background()
	for i, want := range []string{"timeout", "409"} {
		ev := events.Event{Source: "acme", Resource: clients.TimeEntries, RecordID: "1"}
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return v.Handle(ctx, tx, ev) }); err == nil {
			t.Fatalf("attempt %d (%s) did not fail", i+1, want)
		}
		var status string
		if err := pool.QueryRow(ctx, `SELECT status FROM invoicer_outcomes WHERE key = 'acme/5/2026-W10'`).Scan(&status); err != nil || status != "in_progress" {
			t.Fatalf("after the %s: outcome %q (%v), want in_progress", want, status, err)
		}
	}
	if api.Conflicts() != 1 {
		t.Fatalf("%d answers 409, want 1", api.Conflicts())
	}
	time.Sleep(api.Delay) // the first create ends
	v.HTTP = nil
	if err := drain(t, pool, v, "inv"); err != nil {
		t.Fatal(err)
	}
	checkOnePerWeek(t, api)
	var ext string
	if err := pool.QueryRow(ctx, `SELECT external_id FROM invoicer_outcomes WHERE key = 'acme/5/2026-W10' AND status = 'succeeded'`).Scan(&ext); err != nil || ext != "inv_1" {
		t.Fatalf("recorded invoice %q, %v; want inv_1", ext, err)
	}
}

// TestAmendedWeekShowsWhatChanged (issue 32): with tidemark's history on,
// an invoiced week whose approved time changed goes to review with the
// entries that changed since the invoice and by how much.
func TestAmendedWeekShowsWhatChanged(t *testing.T) {
	t.Parallel()
	pool, api, url := setup(t)
	ctx := context.Background()
	if err := upsert.EnsureHistory(ctx, pool, "acme", []clients.Resource{clients.TimeEntries}); err != nil {
		t.Fatal(err)
	}
	h := []upsert.Option{upsert.WithHistory(true)}
	v0 := eventstest.T0
	eventstest.ApplyWith(t, pool, "acme", clients.TimeEntries, h,
		eventstest.Entry("1", v0, "5", mon, "2.5", true),
		eventstest.Entry("2", v0, "5", wed, "1.25", true),
		eventstest.Entry("3", v0, "5", wed, "4", false))
	inv := &invoicer.Invoicer{Pool: pool, URL: url}
	if err := drain(t, pool, inv, "inv"); err != nil {
		t.Fatal(err)
	}
	// After the invoice: entry 2 edited, entry 3 approved.
	v1 := v0.Add(time.Hour)
	eventstest.ApplyWith(t, pool, "acme", clients.TimeEntries, h,
		eventstest.Entry("2", v1, "5", wed, "2", true),
		eventstest.Entry("3", v1, "5", wed, "4", true))
	if err := drain(t, pool, inv, "inv"); err != nil {
		t.Fatal(err)
	}
	if w := weeks(api); len(w) != 1 || w["5/2026-W10"] != 1 {
		t.Fatalf("invoices per client-week: %v, want one for 2026-W10", w)
	}
	var changes string
	err := pool.QueryRow(ctx, `SELECT status || ' ' || changes::text FROM invoicer_outcomes WHERE key = 'acme/5/2026-W10'`).Scan(&changes)
	want := `review [{"id": "2", "now": 2, "change": 0.75, "invoiced": 1.25}, {"id": "3", "now": 4, "change": 4, "invoiced": null}]`
	if err != nil || changes != want {
		t.Fatalf("outcome: %s (%v)\nwant     %s", changes, err, want)
	}
}
