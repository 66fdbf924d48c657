package lease_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/lease"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newLeaser is a leaser (one "process") on url, closed when the test ends.
func newLeaser(t *testing.T, url string) *lease.Leaser {
	t.Helper()
	l := lease.New(url)
	t.Cleanup(l.Close)
	return l
}

func TestBusyAcrossLeasersAndReleased(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	a, b := newLeaser(t, url), newLeaser(t, url)
	h, err := a.TryAcquire(ctx, "source:acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.TryAcquire(ctx, "source:acme"); !errors.Is(err, lease.ErrBusy) {
		t.Fatalf("same process, same lease: %v, want ErrBusy", err)
	}
	if _, err := b.TryAcquire(ctx, "source:acme"); !errors.Is(err, lease.ErrBusy) {
		t.Fatalf("other process, same lease: %v, want ErrBusy", err)
	}
	h.Release()
	h.Release() // twice is harmless
	h2, err := b.TryAcquire(ctx, "source:acme")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	h2.Release()
}

// The review's finding: after the lease session dies, a later TryAcquire
// reconnects, and a liveness ping on "the connection" is true again while
// another process owns the lease. The fence checks the session that took
// the lease, so it fails.
func TestCheckFailsAfterReconnectWhileAnotherHoldsTheLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.DB(t)
	url := pool.Config().ConnString()
	a, b := newLeaser(t, url), newLeaser(t, url)
	h, err := a.TryAcquire(ctx, "backfill:acme")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Check(ctx, pool); err != nil {
		t.Fatalf("fence while held: %v", err)
	}
	// Cut a's session, as a Postgres restart or a network cut would.
	if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`); err != nil {
		t.Fatal(err)
	}
	// pg_terminate_backend only signals: wait until the session is gone
	// and its lock with it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d advisory locks still held 10 s after their sessions were terminated", n)
		}
	}
	// Another replica takes the lease; a reconnects for some other lease.
	hb, err := b.TryAcquire(ctx, "backfill:acme")
	if err != nil {
		t.Fatalf("other replica after the cut: %v", err)
	}
	defer hb.Release()
	if _, err := a.TryAcquire(ctx, "owner:other"); err != nil {
		t.Fatalf("reconnect: %v", err)
	}
	if err := h.Check(ctx, pool); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("fence after reconnect: %v, want ErrLeaseLost", err)
	}
	if err := hb.Check(ctx, pool); err != nil {
		t.Fatalf("the new holder's fence: %v", err)
	}
	// The stale handle's release must not free anything of the new session.
	h.Release()
	if err := hb.Check(ctx, pool); err != nil {
		t.Fatalf("new holder after the stale release: %v", err)
	}
	// And a cannot take it while b holds it.
	if _, err := a.TryAcquire(ctx, "backfill:acme"); !errors.Is(err, lease.ErrBusy) {
		t.Fatalf("a after reconnect: %v, want ErrBusy", err)
	}
}

// Keys whose low or high half is above 2^31 map onto pg_locks' oid columns.
func TestCheckAcrossTheKeySpace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.DB(t)
	l := newLeaser(t, pool.Config().ConnString())
	for i := 0; i < 64; i++ {
		name := "k" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		h, err := l.TryAcquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Check(ctx, pool); err != nil {
			t.Fatalf("%s (key %d): %v", name, lease.Key(name), err)
		}
		h.Release()
		if err := h.Check(ctx, pool); !errors.Is(err, lease.ErrLeaseLost) {
			t.Fatalf("%s released: %v, want ErrLeaseLost", name, err)
		}
	}
}

func TestTryAcquireMany(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	a, b := newLeaser(t, url), newLeaser(t, url)
	if _, err := a.TryAcquire(ctx, "owner:globex"); err != nil {
		t.Fatal(err)
	}
	mine, err := b.TryAcquire(ctx, "owner:initech")
	if err != nil {
		t.Fatal(err)
	}
	// More than one statement's worth, some held elsewhere or here.
	names := []string{"owner:acme", "owner:globex", "owner:initech", "owner:acme"}
	for i := range 2500 {
		names = append(names, fmt.Sprintf("owner:s%04d", i))
	}
	got, err := b.TryAcquireMany(ctx, names)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2501 || got["owner:acme"] == nil || got["owner:s2499"] == nil {
		t.Fatalf("took %d leases, want acme and the 2,500 others", len(got))
	}
	for _, busy := range []string{"owner:globex", "owner:initech"} {
		if got[busy] != nil {
			t.Errorf("took %s, held by another process or already here", busy)
		}
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, name := range []string{"owner:acme", "owner:s0000", "owner:s2499"} {
		if err := got[name].Check(ctx, pool); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if !b.Holds(name) {
			t.Errorf("%s: the leaser does not know it holds it", name)
		}
		if _, err := a.TryAcquire(ctx, name); !errors.Is(err, lease.ErrBusy) {
			t.Errorf("%s: another process took it: %v", name, err)
		}
	}
	got["owner:acme"].Release()
	if _, err := a.TryAcquire(ctx, "owner:acme"); err != nil {
		t.Fatalf("after release: %v", err)
	}
	mine.Release()
}
