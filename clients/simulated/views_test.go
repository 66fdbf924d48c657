package simulated_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/harvest"
	"github.com/tidemarkhq/tidemark/clients/simulated"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/poller"
	"github.com/tidemarkhq/tidemark/schema"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// cents reads exact decimal text ("12.5", "100.0011") as hundredths,
// truncated: the views' sums are compared at that precision.
func cents(s string) int64 {
	neg := strings.HasPrefix(s, "-")
	whole, frac, _ := strings.Cut(strings.TrimPrefix(s, "-"), ".")
	w, _ := strconv.ParseInt(whole, 10, 64)
	f, _ := strconv.ParseInt((frac + "00")[:2], 10, 64)
	if neg {
		return -(w*100 + f)
	}
	return w*100 + f
}

// TestViewsAnswerFromTheMirror mirrors a churned simulated account and
// holds each downstream view to the tracker's ground truth, computed here
// from the truth's records: uninvoiced billable hours and amount per client
// and project, approved vs submitted hours per user and ISO week, invoiced
// vs paid per client. Every view and column carries a COMMENT.
func TestViewsAnswerFromTheMirror(t *testing.T) {
	t.Parallel()
	tr := newTracker(t, simulated.Params{Seed: 12, Users: 8, Days: 120, Anchor: anchor, NoRateLimit: true})
	tr.Step(400)
	c := client(t, tr)
	pool := pgtest.DB(t)
	p, err := poller.New(poller.Params{Pool: pool, Sources: []poller.Source{{Source: c, Resources: harvest.Resources, Overlap: time.Minute}},
		Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if _, err := p.Incremental(t.Context(), "demo"); err != nil {
		t.Fatal(err)
	}
	truth := tr.Truth()
	ctx := context.Background()
	query := func(q string) map[string]string {
		t.Helper()
		rows, err := pool.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]string{}
		for rows.Next() {
			var k, v string
			if err := rows.Scan(&k, &v); err != nil {
				t.Fatal(err)
			}
			out[k] = v
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	compare := func(view string, got, want map[string]string) {
		t.Helper()
		if len(want) == 0 {
			t.Fatalf("%s: the truth has no rows to compare", view)
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("%s %s: %q, truth %q", view, k, got[k], w)
			}
		}
		for k, g := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("%s %s: %q, not in the truth", view, k, g)
			}
		}
	}
	id := func(n int64) string {
		if n == 0 {
			return ""
		}
		return strconv.FormatInt(n, 10)
	}

	// Uninvoiced billable: hours × 100 (harvestfake renders billable_rate 100.0).
	type sums struct{ n, a, b int64 }
	un := map[string]*sums{}
	weeks := map[string]*[3]int64{}
	for _, e := range truth.TimeEntries {
		h := cents(e.Hours)
		if e.Billable && !e.IsBilled && e.InvoiceID == 0 {
			k := id(e.ClientID) + "/" + id(e.ProjectID)
			if un[k] == nil {
				un[k] = &sums{}
			}
			un[k].n++
			un[k].a += h
			un[k].b += h * 100
		}
		y, w := e.SpentDate.Time().ISOWeek()
		k := fmt.Sprintf("%d/%d-W%02d", e.UserID, y, w)
		if weeks[k] == nil {
			weeks[k] = &[3]int64{}
		}
		weeks[k][map[string]int{"approved": 0, "submitted": 1, "unsubmitted": 2}[e.ApprovalStatus()]] += h
	}
	want := map[string]string{}
	for k, s := range un {
		want[k] = fmt.Sprintf("%d %d %d", s.n, s.a, s.b)
	}
	compare("uninvoiced_billable", query(`SELECT coalesce(client_id, '') || '/' || project_id,
		entries || ' ' || (hours * 100)::bigint || ' ' || (amount * 100)::bigint FROM uninvoiced_billable WHERE source = 'demo'`), want)

	want = map[string]string{}
	for k, s := range weeks {
		want[k] = fmt.Sprintf("%d %d %d", s[0], s[1], s[2])
	}
	compare("approval_hours_weekly", query(`SELECT user_id || '/' || iso_week,
		(approved_hours * 100)::bigint || ' ' || (submitted_hours * 100)::bigint || ' ' || (unsubmitted_hours * 100)::bigint
		FROM approval_hours_weekly WHERE source = 'demo'`), want)

	// Invoiced vs paid per client and currency.
	paid := map[int64]int64{}
	for _, pay := range truth.Docs[schema.InvoicePayments.Name] {
		paid[pay.Parent] += cents(string(pay.Values["amount"].(clients.Decimal)))
	}
	inv := map[string]*[4]int64{}
	for _, d := range truth.Docs[schema.Invoices.Name] {
		if d.Values["state"] == "draft" {
			continue
		}
		k := d.Values["client_id"].(string) + "/" + d.Values["currency"].(string)
		if inv[k] == nil {
			inv[k] = &[4]int64{}
		}
		inv[k][0]++
		inv[k][1] += cents(string(d.Values["amount"].(clients.Decimal)))
		inv[k][2] += paid[d.ID]
		inv[k][3] += cents(string(d.Values["due_amount"].(clients.Decimal)))
	}
	want = map[string]string{}
	for k, s := range inv {
		want[k] = fmt.Sprintf("%d %d %d %d", s[0], s[1], s[2], s[3])
	}
	compare("client_invoiced_paid", query(`SELECT client_id || '/' || currency,
		invoices || ' ' || (invoiced * 100)::bigint || ' ' || (paid * 100)::bigint || ' ' || (due * 100)::bigint
		FROM client_invoiced_paid WHERE source = 'demo'`), want)

	// \d+ documents each view and each of its columns.
	undocumented := query(`SELECT c.relname || '.' || coalesce(a.attname, ''), 'undocumented'
		FROM pg_class c LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
		WHERE c.relkind = 'v' AND c.relnamespace = 'public'::regnamespace
		  AND c.relname IN ('uninvoiced_billable', 'approval_hours_weekly', 'client_invoiced_paid')
		  AND (obj_description(c.oid, 'pg_class') IS NULL OR col_description(c.oid, a.attnum) IS NULL)`)
	for k := range undocumented {
		t.Errorf("%s has no COMMENT", k)
	}
}
