package harvest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/harvest"
	"github.com/tidemarkhq/tidemark/clients/internal/sourcetest"
	"github.com/tidemarkhq/tidemark/clients/provider"
	"github.com/tidemarkhq/tidemark/internal/conformance"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
	"github.com/tidemarkhq/tidemark/internal/fakeapi/harvestfake"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/poller"
	"github.com/tidemarkhq/tidemark/schema"
)

// accountEnv is a fake, a source serving rs and a poller over a fresh
// database.
type accountEnv struct {
	f    *harvestfake.Server
	clk  *fakeapi.Clock
	pool *pgxpool.Pool
	p    *poller.Poller
}

func newAccountEnv(t *testing.T, rs ...clients.Resource) *accountEnv {
	t.Helper()
	clk := conformance.NewClock()
	f := newFake(t, harvestfake.Options{NoRateLimit: true, Clock: clk.Now})
	c, err := harvest.New(harvest.Params{Name: "acme", BaseURL: f.URL(), AccountID: f.AccountID(), Token: f.Token(),
		Contact: "ops@example.com", Resources: rs, Logger: zerolog.New(zerolog.NewTestWriter(t))})
	if err != nil {
		t.Fatal(err)
	}
	pool := pgtest.DB(t)
	p, err := poller.New(poller.Params{Pool: pool, Sources: []poller.Source{{Source: c, Resources: rs, Overlap: time.Minute}},
		Logger: zerolog.New(zerolog.NewTestWriter(t))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return &accountEnv{f: f, clk: clk, pool: pool, p: p}
}

func (e *accountEnv) pass(t *testing.T, r clients.Resource) poller.Result {
	t.Helper()
	e.clk.Advance(time.Second)
	res, err := e.p.Incremental(t.Context(), "acme", r)
	if err != nil {
		t.Fatalf("incremental %s: %v", r, err)
	}
	return res[0]
}

// lines returns invoice 1's lines as "id:amount", and their row versions
// (xmin), in line order.
func (e *accountEnv) lines(t *testing.T) (got []string, xmins []string) {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT l.id || ':' || l.amount::text, l.xmin::text, l.parent_hash = i.content_hash
		FROM invoice_line_items l JOIN invoices i ON i.source = l.source AND i.id = l.invoice_id
		WHERE l.source = 'acme' AND l.invoice_id = '1' ORDER BY l.id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s, x string
		var current bool
		if err := rows.Scan(&s, &x, &current); err != nil {
			t.Fatal(err)
		}
		if !current {
			t.Errorf("line %s was not taken from the invoice's current content", s)
		}
		got, xmins = append(got, s), append(xmins, x)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got, xmins
}

func invoice(day clients.Date, amounts ...string) harvestfake.Doc {
	d := harvestfake.Doc{ID: 1, Values: harvestfake.Sample(schema.Invoices, "note", "notes", day)}
	for i, a := range amounts {
		v := harvestfake.SampleLine(schema.Invoices.Children[0], day)
		v["amount"] = clients.Decimal(a)
		d.Lines = append(d.Lines, harvestfake.Line{ID: int64(11 + i), Values: v})
	}
	return d
}

// TestInvoiceLinesFollowTheirInvoice: an invoice's lines are written with
// it, untouched when it is delivered again, replaced as a whole when its
// content changes, refused (with the invoice) when one is malformed, and
// gone when reconcile finds the invoice deleted.
func TestInvoiceLinesFollowTheirInvoice(t *testing.T) {
	t.Parallel()
	e := newAccountEnv(t, schema.Invoices.Name)
	day := clients.DateOf(e.clk.Now())
	e.f.PutDoc(schema.Invoices.Name, invoice(day, "100.00", "25.50"))
	e.pass(t, schema.Invoices.Name)
	got, x1 := e.lines(t)
	if strings.Join(got, " ") != "11:100.00 12:25.50" {
		t.Fatalf("lines %v", got)
	}

	if c := e.pass(t, schema.Invoices.Name).Counts; c.Unchanged != 1 {
		t.Errorf("re-delivery counts %+v", c)
	}
	if _, x2 := e.lines(t); strings.Join(x2, " ") != strings.Join(x1, " ") {
		t.Errorf("re-delivery rewrote the lines: xmin %v → %v", x1, x2)
	}

	e.clk.Advance(2 * time.Minute)
	e.f.PutDoc(schema.Invoices.Name, invoice(day, "80.00"))
	e.pass(t, schema.Invoices.Name)
	if got, _ := e.lines(t); strings.Join(got, " ") != "11:80.00" {
		t.Fatalf("lines after the edit %v, want 11:80.00 alone", got)
	}

	e.clk.Advance(2 * time.Minute)
	bad := invoice(day, "1.00")
	bad.Lines[0].Values["amount"] = "lots"
	e.f.PutDoc(schema.Invoices.Name, bad)
	e.clk.Advance(time.Second)
	_, err := e.p.Incremental(t.Context(), "acme", schema.Invoices.Name)
	if err == nil || !strings.Contains(err.Error(), "invoices[0].line_items[0].amount") {
		t.Fatalf("a malformed line: %v, want an error naming invoices[0].line_items[0].amount", err)
	}
	if got, _ := e.lines(t); strings.Join(got, " ") != "11:80.00" {
		t.Fatalf("lines after a refused page %v", got)
	}

	e.f.Delete(schema.Invoices.Name, 1)
	e.clk.Advance(2 * time.Minute)
	if _, err := e.p.Reconcile(t.Context(), "acme", schema.Invoices.Name); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.lines(t); len(got) != 0 {
		t.Errorf("lines of a deleted invoice: %v", got)
	}
}

// TestCompany: the company is one row per source, keyed by the account id,
// versioned by the page's Date; an unchanged company writes nothing, a
// changed one is updated, a malformed answer changes nothing.
func TestCompany(t *testing.T) {
	t.Parallel()
	e := newAccountEnv(t, schema.Company.Name)
	day := clients.DateOf(e.clk.Now())
	co := harvestfake.Doc{ID: 1, Values: harvestfake.Sample(schema.Company, "Acme Agency", "name", day)}
	e.f.PutDoc(schema.Company.Name, co)
	if c := e.pass(t, schema.Company.Name).Counts; c.Inserted != 1 {
		t.Fatalf("first pass %+v", c)
	}
	if c := e.pass(t, schema.Company.Name).Counts; c.Unchanged != 1 {
		t.Errorf("unchanged company: %+v", c)
	}
	co.Values["name"], co.Values["approval_feature"] = "Acme & Co", true
	e.f.PutDoc(schema.Company.Name, co)
	if c := e.pass(t, schema.Company.Name).Counts; c.Updated != 1 {
		t.Errorf("changed company: %+v", c)
	}
	var id, name string
	var approvals bool
	if err := e.pool.QueryRow(context.Background(), `SELECT id, name, approval_feature FROM company WHERE source = 'acme'`).Scan(&id, &name, &approvals); err != nil {
		t.Fatal(err)
	}
	if id != e.f.AccountID() || name != "Acme & Co" || !approvals {
		t.Errorf("company row %s %q %v", id, name, approvals)
	}
	for _, m := range []fakeapi.Malformation{fakeapi.HTMLPage, fakeapi.BadJSON} {
		e.f.MalformResource(schema.Company.Name, m)
		e.clk.Advance(time.Second)
		if _, err := e.p.Incremental(t.Context(), "acme", schema.Company.Name); err == nil || !strings.Contains(err.Error(), "company") {
			t.Errorf("%v: %v, want a decode error naming company", m, err)
		}
	}
}

// TestPassCostMatchesRequests holds the planner's model (PassCost) to the
// fake's request log: one request per resource in a pass after the first,
// and under every parent in a reconcile.
func TestPassCostMatchesRequests(t *testing.T) {
	t.Parallel()
	f := newFake(t, harvestfake.Options{NoRateLimit: true})
	seed(f, 3)
	// One parent each, as the planner assumes for invoices and estimates.
	for _, r := range []clients.Resource{schema.Invoices.Name, schema.Estimates.Name} {
		f.Delete(r, f.IDs(r)[0])
	}
	c := newClient(t, f)
	shape := provider.PassShape{Users: 1}
	since := func(clients.Resource) clients.Window { return clients.Window{UpdatedSince: base.Add(time.Hour)} }
	sourcetest.CheckPassCost(t, c, f, harvest.Resources, since,
		func(r clients.Resource) provider.Cost { return harvest.PassCost(r, shape, provider.Settings{}) })
	shape.Reconcile, shape.Days = true, 97
	sourcetest.CheckPassCost(t, c, f, harvest.Resources, sourcetest.ReconcileWindow(clients.DateOf(base), 90),
		func(r clients.Resource) provider.Cost { return harvest.PassCost(r, shape, provider.Settings{}) })
}
