package app_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/harvest"
	"github.com/tidemarkhq/tidemark/internal/app"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
	"github.com/tidemarkhq/tidemark/internal/fakeapi/harvestfake"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
)

// TestRepeatedPageEndsCappedThroughTheProgram (issue 30, items 2 and 3):
// behind a base_url that ignores `page` and whose links.next does not
// move, a full page of Harvest time entries was listed for ever (the
// review stopped at 1,001 requests). Through app.Open, a reconcile and an incremental pass now end
// capped within a few requests, tombstone nothing (an entry deleted
// meanwhile stays live: DESIGN guarantee 9) and the run is recorded as
// failed with why, which the back-off, status page and metric show.
func TestRepeatedPageEndsCappedThroughTheProgram(t *testing.T) {
	t.Parallel()
	f := harvestfake.New(harvestfake.Options{NoRateLimit: true})
	t.Cleanup(f.Close)
	today := clients.DateOf(f.Now().UTC())
	// A page is full (Harvest's 2,000) once entry 1 is deleted: a short
	// page would re-anchor by itself.
	const entries = harvest.MaxPerPage + 1
	for id := int64(1); id <= entries; id++ {
		notes := "entry"
		f.PutTimeEntry(harvestfake.TimeEntry{ID: id, SpentDate: today, Hours: "1.0", Notes: &notes, UserID: 7, ProjectID: 8})
	}
	u := pgtest.URL(t)
	cfg, err := config.Parse("walks.yaml", []byte(`
database_url: ${DATABASE_URL}
sources:
  - name: acme
    kind: harvest
    base_url: `+f.URL()+`
    account_id: "`+f.AccountID()+`"
    token: `+f.Token()+`
    schedule: "@every 1h"
    resources: [time_entries]
    reconcile: {schedule: "@every 1h", lookback_days: 30}
`), func(k string) (string, bool) { return u, k == "DATABASE_URL" })
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	a, err := app.Open(ctx, cfg, u, "v0.0.0-test", zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	p, err := a.Poller(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if _, err := p.Reconcile(ctx, "acme", clients.TimeEntries); err != nil {
		t.Fatal(err)
	}
	f.Delete(clients.TimeEntries, 1)
	f.Repeat(fakeapi.StuckNext)
	for _, pass := range []string{"reconcile", "incremental"} {
		before := f.RequestCount()
		err := repeatedPass(ctx, f, func(ctx context.Context) error {
			if pass == "reconcile" {
				_, err := p.Reconcile(ctx, "acme", clients.TimeEntries)
				return err
			}
			_, err := p.Incremental(ctx, "acme", clients.TimeEntries)
			return err
		})
		n := f.RequestCount() - before
		t.Logf("%s pass: %d requests: %v", pass, n, err)
		if !errors.Is(err, clients.ErrCapped) {
			t.Fatalf("%s pass after %d requests: %v, want ErrCapped", pass, n, err)
		}
		if n > 40 {
			t.Errorf("%s pass capped after %d requests of a one-page listing, want at most 40", pass, n)
		}
		rows, err := a.CursorRows(ctx, "acme", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || rows[0].LastRunStatus != "failed" || !strings.Contains(rows[0].LastRunError, clients.ErrCapped.Error()) {
			t.Errorf("%s pass: cursors rows %+v, want the run failed with why", pass, rows)
		}
	}
	var live int
	if err := a.Pool.QueryRow(ctx, `SELECT count(*) FROM time_entries WHERE source = 'acme' AND deleted_at IS NULL`).Scan(&live); err != nil {
		t.Fatal(err)
	}
	if live != entries {
		t.Errorf("%d live entries after capped passes, want %d (nothing tombstoned from a capped listing)", live, entries)
	}
}

// repeatedPass runs pass, cancelling it once the fake has answered 1,000
// requests since (a walk that never ends).
func repeatedPass(ctx context.Context, f *harvestfake.Server, pass func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	limit := f.RequestCount() + 1000
	done := make(chan error, 1)
	go func() { done <- pass(ctx) }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			if f.RequestCount() > limit {
				cancel()
			}
		}
	}
}
