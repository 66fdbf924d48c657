package poller_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/poller"
)

// owned is syncedToday with the source's ownership lease held, as a daemon
// holds it, and a second incremental pass run: the overlap's re-delivery,
// which wrote nothing and is remembered.
func owned(t *testing.T, notes ...string) (*fakeSource, *poller.Poller, *pgxpool.Pool, func()) {
	t.Helper()
	src, p, pool, release := ownedSynced(t, notes...)
	if c := incremental(t, p)[0].Counts; c.Unchanged != int64(len(notes)) {
		t.Fatalf("the re-delivery: %+v, want all unchanged", c)
	}
	return src, p, pool, release
}

// ownedSynced is a source owned as a daemon owns it, after its first
// incremental pass (which inserted its records).
func ownedSynced(t *testing.T, notes ...string) (*fakeSource, *poller.Poller, *pgxpool.Pool, func()) {
	t.Helper()
	src := onDay(today(), notes...)
	p, pool := setup(t, src)
	release, err := p.TakeOwnership(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	if c := incremental(t, p)[0].Counts; c.Inserted != int64(len(notes)) {
		t.Fatalf("first pass: %+v, want %d inserted", c, len(notes))
	}
	return src, p, pool, release
}

// rememberedWithout checks that a pass took a remembered page of the 2
// records x and y: both unchanged, and the row deleted by hand not back.
func rememberedWithout(t *testing.T, p *poller.Poller, pool *pgxpool.Pool, deleted string) {
	t.Helper()
	res := incremental(t, p)[0]
	if res.Counts.Unchanged != 2 || res.Counts.Fetched != 2 || res.Counts.Inserted != 0 {
		t.Fatalf("remembered page: %+v, want its 2 records unchanged", res.Counts)
	}
	if _, ok := mirror(t, pool, "acme")[deleted]; ok {
		t.Fatal("the remembered page was looked up and written again")
	}
}

// deleteRow removes a mirrored row behind Tidemark's back: only a lookup
// of its page brings it back.
func deleteRow(t *testing.T, pool *pgxpool.Pool, id string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `DELETE FROM time_entries WHERE source = 'acme' AND id = $1`, id); err != nil {
		t.Fatal(err)
	}
}

func TestIdleRedeliveryRememberedWhileOwned(t *testing.T) {
	t.Parallel()
	_, p, pool, _ := owned(t, "x", "y")
	deleteRow(t, pool, "1")
	rememberedWithout(t, p, pool, "1")
}

func TestRememberedPagesForgottenWithOwnership(t *testing.T) {
	t.Parallel()
	src, p, pool, release := owned(t, "x", "y")
	deleteRow(t, pool, "1")
	release()
	incremental(t, p)
	assertConverged(t, pool, src)

	// Owned again: what was remembered while it was held before is not
	// trusted (another owner may have written in between).
	take := func() func() {
		t.Helper()
		release, err := p.TakeOwnership(context.Background(), "acme")
		if err != nil {
			t.Fatal(err)
		}
		return release
	}
	release = take()
	incremental(t, p) // remembered
	release()
	release = take()
	defer release()
	deleteRow(t, pool, "2")
	incremental(t, p)
	assertConverged(t, pool, src)
}

// The reconcile's tombstones make a stored row older than the overlap's
// re-delivery: the next incremental page is looked up, and the false
// tombstone heals, as it does without the memo
// (TestFalseTombstoneHealsAtTheNextListing).
func TestReconcileForgetsRememberedPages(t *testing.T) {
	t.Parallel()
	src, p, pool, _ := owned(t, "x", "y")
	falselyTombstone(t, src, p, pool, "2")
	incremental(t, p)
	assertConverged(t, pool, src)
}

// An incremental pass's own same-version tombstones (Toggl's workspace
// scope: entries absent from a complete listing) make a stored row differ
// from a remembered page just as a reconcile's do: the next re-delivery is
// looked up, and the false tombstone heals.
func TestTombstoningPageForgetsRememberedPages(t *testing.T) {
	t.Parallel()
	src, p, pool, _ := owned(t, "x", "y")
	src.mu.Lock()
	src.tombstoneOnce = map[string]bool{"2": true}
	src.mu.Unlock()
	incremental(t, p)
	if !mirror(t, pool, "acme")["2"].deleted {
		t.Fatal("the absent entry was not tombstoned (test setup)")
	}
	incremental(t, p)
	assertConverged(t, pool, src)
}

// A webhook-triggered pass confirms what the intake wrote beside the owner
// (webhooks.apply): it looks every page up, remembered or not.
func TestTriggeredPassLooksEveryPageUp(t *testing.T) {
	t.Parallel()
	src, p, pool, _ := owned(t, "x", "y")
	deleteRow(t, pool, "1")
	if _, err := p.Incremental(poller.LookUpEveryPage(context.Background()), "acme"); err != nil {
		t.Fatal(err)
	}
	assertConverged(t, pool, src)
}

// Every listing tells the source how late a change may show (its
// overlap), the first pass and a reconcile too: Harvest's nested lists
// trust a parent's version only once it is older than that.
func TestWindowsCarryTheOverlap(t *testing.T) {
	t.Parallel()
	src := onDay(today(), "x")
	var mu sync.Mutex
	var got []time.Duration
	src.onPage = func(w clients.Window, _ int) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, w.Overlap)
	}
	p, _ := setup(t, src)
	incremental(t, p) // the first pass: no cursor yet
	incremental(t, p)
	reconcile(t, p)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("%d listings, want 3", len(got))
	}
	for i, o := range got {
		if o != 2*time.Minute {
			t.Errorf("listing %d: overlap %s, want the source's 2m", i+1, o)
		}
	}
}

// A page that wrote is remembered too once committed: the first idle pass
// after a change (here, the first sync) re-delivers the same bytes and
// needs no lookup; they count as unchanged, as a lookup would count them.
func TestWrittenPageRememberedWhileOwned(t *testing.T) {
	t.Parallel()
	_, p, pool, _ := ownedSynced(t, "x", "y")
	deleteRow(t, pool, "1")
	rememberedWithout(t, p, pool, "1")
}
