package simulated_test

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients/harvest"
	"github.com/tidemarkhq/tidemark/clients/simulated"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/internal/verify"
	"github.com/tidemarkhq/tidemark/poller"
)

// TestWholeAccountConverges: a first sync of every resource, then, once
// the overlap has passed (a parent stamped in the listing's last second or
// overlap may still gain a child under the same stamp, so its children are
// read again once), an idle pass that costs exactly one request per
// resource (nested lists included: the parents the overlap brings back were
// read at those versions), then
// churn across every resource, after which one incremental pass and one
// reconcile leave each table equal to the tracker's truth.
func TestWholeAccountConverges(t *testing.T) {
	t.Parallel()
	tr := newTracker(t, simulated.Params{Seed: 4, Users: 6, Days: 60, NoRateLimit: true})
	c := client(t, tr)
	pool := pgtest.DB(t)
	p, err := poller.New(poller.Params{Pool: pool, Sources: []poller.Source{{Source: c, Resources: harvest.Resources, Overlap: time.Second, MaxTombstones: 100000}},
		Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	ctx := t.Context()
	if _, err := p.Incremental(ctx, "demo"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if _, err := p.Incremental(ctx, "demo"); err != nil {
		t.Fatal(err)
	}
	tr.Server().ResetRequests()
	if _, err := p.Incremental(ctx, "demo"); err != nil {
		t.Fatal(err)
	}
	if reqs := tr.Server().Requests(); len(reqs) != len(harvest.Resources) {
		for _, r := range reqs {
			t.Log(r.Path, r.Query)
		}
		t.Errorf("idle pass: %d requests for %d resources", len(reqs), len(harvest.Resources))
	}

	tr.Step(600)
	if _, err := p.Incremental(ctx, "demo"); err != nil {
		t.Fatal(err)
	}
	// Reconcile leaves alone what changed within the overlap before it
	// started (it may have been created during the listing).
	time.Sleep(2 * time.Second)
	if _, err := p.Reconcile(ctx, "demo"); err != nil {
		t.Fatal(err)
	}
	truth := tr.Truth()
	for _, r := range harvest.Resources {
		rep, err := verify.Compare(context.Background(), pool, "demo", r, truth.Versions(r), time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.InSync() || rep.Live == 0 {
			t.Errorf("%s %v", rep, rep.Examples)
		}
	}
}
