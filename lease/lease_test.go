package lease_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// pair is two leasers (two "processes") on one fresh database, and a pool
// on it.
func pair(t *testing.T) (a, b *lease.Leaser, pool *pgxpool.Pool) {
	t.Helper()
	pool = pgtest.DB(t)
	url := pool.Config().ConnString()
	return newLeaser(t, url), newLeaser(t, url), pool
}

func TestBusyAcrossLeasersAndReleased(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b, _ := pair(t)
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
	a, b, pool := pair(t)
	h, err := a.TryAcquire(ctx, "backfill:acme")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Check(ctx, pool); err != nil {
		t.Fatalf("fence while held: %v", err)
	}
	// Cut a's session, as a Postgres restart or a network cut would.
	terminate(t, pool)
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

// A release whose unlock is cancelled (a statement timeout under load)
// leaves the session and its other leases alone: the unlock is owed, and
// paid before the key is taken again, so a later hold of the key is not
// undone by it.
func TestCancelledUnlockKeepsTheOtherLeases(t *testing.T) {
	t.Parallel()
	for _, done := range []bool{false, true} {
		t.Run(fmt.Sprintf("unlocked=%v", done), func(t *testing.T) {
			t.Parallel()
			cancelledUnlock(t, done)
		})
	}
}

func cancelledUnlock(t *testing.T, done bool) {
	ctx := context.Background()
	a, b, pool := pair(t)
	ha, err := a.TryAcquire(ctx, "owner:a")
	if err != nil {
		t.Fatal(err)
	}
	hb, err := a.TryAcquire(ctx, "owner:b")
	if err != nil {
		t.Fatal(err)
	}
	restore := lease.SlowUnlocks(a, 300*time.Millisecond, done)
	ha.Release() // cancelled after 300 ms
	restore()
	if err := hb.Check(ctx, pool); err != nil {
		t.Fatalf("the other lease went with a cancelled unlock: %v", err)
	}
	if !a.Holds("owner:b") || a.Holds("owner:a") {
		t.Fatalf("holds a=%v b=%v, want false true", a.Holds("owner:a"), a.Holds("owner:b"))
	}
	// Taken again, then released: the owed unlock was paid first, so the
	// key is free afterwards, not held once more by a leftover count.
	ha2, err := a.TryAcquire(ctx, "owner:a")
	if err != nil {
		t.Fatal(err)
	}
	if err := ha2.Check(ctx, pool); err != nil {
		t.Fatalf("retaken lease: %v", err)
	}
	if _, err := b.TryAcquire(ctx, "owner:a"); !errors.Is(err, lease.ErrBusy) {
		t.Fatalf("another process took a held lease: %v", err)
	}
	ha2.Release()
	hb2, err := b.TryAcquire(ctx, "owner:a")
	if err != nil {
		t.Fatalf("after the release another process cannot take it: %v", err)
	}
	hb2.Release()
	hb.Release()
}

// A heartbeat pays the unlocks owed, so a source released here reaches
// the replica assigned it even when this one takes nothing more.
func TestHeartbeatPaysOwedUnlocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b, _ := pair(t)
	h, err := a.TryAcquire(ctx, "owner:a")
	if err != nil {
		t.Fatal(err)
	}
	restore := lease.SlowUnlocks(a, 300*time.Millisecond, false)
	h.Release() // cancelled before it unlocked: the session still holds it
	restore()
	if _, err := b.TryAcquire(ctx, "owner:a"); !errors.Is(err, lease.ErrBusy) {
		t.Fatalf("before the debt is paid: %v, want ErrBusy (test setup)", err)
	}
	if _, err := a.Heartbeat(ctx, lease.Member{ID: "host-a/1", Host: "host-a", PID: 1}, time.Minute); err != nil {
		t.Fatal(err)
	}
	hb, err := b.TryAcquire(ctx, "owner:a")
	if err != nil {
		t.Fatalf("after a heartbeat the released lease is still held: %v", err)
	}
	hb.Release()
}

// An unlock owed when the session dies: the next heartbeat and the next
// batch take report or reconnect; they never use the dropped connection.
func TestOwedUnlockThenTheSessionDies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.DB(t)
	url := pool.Config().ConnString()
	for _, call := range []string{"heartbeat", "many"} {
		t.Run(call, func(t *testing.T) {
			a := newLeaser(t, url)
			h, err := a.TryAcquire(ctx, "owner:"+call)
			if err != nil {
				t.Fatal(err)
			}
			restore := lease.SlowUnlocks(a, 300*time.Millisecond, false)
			h.Release() // owed
			restore()
			terminate(t, pool)
			use := func() error {
				if call == "heartbeat" {
					_, err := a.Heartbeat(ctx, lease.Member{ID: "host-a/1", Host: "host-a", PID: 1}, time.Minute)
					return err
				}
				_, err := a.TryAcquireMany(ctx, []string{"owner:" + call})
				return err
			}
			_ = use() // may report the dropped session
			if err := use(); err != nil {
				t.Fatalf("after the session died, a second %s: %v", call, err)
			}
		})
	}
}

// terminate ends every session holding an advisory lock in pool's
// database, as a Postgres restart would, and waits until they are gone.
func terminate(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	const holders = `FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`
	if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend(pid) `+holders); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) `+holders).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d advisory locks still held 10 s after their sessions were terminated", n)
		}
	}
}

// ReleaseSoon's unlock rides on the process's next lease statement, or
// goes within a second on its own; taking the same lease again first pays
// it, so the lock count at the server stays one.
func TestReleaseSoon(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b, _ := pair(t)
	busy := func(name string) bool {
		t.Helper()
		h, err := b.TryAcquire(ctx, name)
		if errors.Is(err, lease.ErrBusy) {
			return true
		}
		if err != nil {
			t.Fatal(err)
		}
		h.Release()
		return false
	}

	// Paid by the next statement.
	h, err := a.TryAcquire(ctx, "source:one")
	if err != nil {
		t.Fatal(err)
	}
	h.ReleaseSoon()
	if a.Holds("source:one") {
		t.Fatal("released, still held here")
	}
	if !busy("source:one") {
		t.Fatal("unlocked before any statement (test setup: want it deferred)")
	}
	other, err := a.TryAcquire(ctx, "source:two")
	if err != nil {
		t.Fatal(err)
	}
	if busy("source:one") {
		t.Fatal("the next lease statement did not carry the unlock")
	}
	other.Release()

	// Paid on its own within a second.
	h, err = a.TryAcquire(ctx, "source:three")
	if err != nil {
		t.Fatal(err)
	}
	h.ReleaseSoon()
	waitFree := time.Now().Add(5 * time.Second)
	for busy("source:three") {
		if time.Now().After(waitFree) {
			t.Fatal("a lease released soon was still held 5 s later")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Taken again before the unlock went: paid first, held once.
	h, err = a.TryAcquire(ctx, "source:four")
	if err != nil {
		t.Fatal(err)
	}
	h.ReleaseSoon()
	h, err = a.TryAcquire(ctx, "source:four")
	if err != nil {
		t.Fatal(err)
	}
	h.Release()
	if busy("source:four") {
		t.Fatal("released after a re-take, still held: the lock was counted twice")
	}
}

// A pass reads its cursors in the lease statement's round trip: the read
// runs only once the lock is granted, a busy lease reads nothing, and a
// read that fails gives the lease back (nobody is left holding it).
func TestTryAcquireThenReadsAfterTheLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b, pool := pair(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE marks (n int); INSERT INTO marks VALUES (1), (2), (3)`); err != nil {
		t.Fatal(err)
	}
	var got []int
	read := &lease.Read{SQL: `SELECT n FROM marks WHERE n >= $1 ORDER BY n`, Args: []any{2}, Scan: func(rows pgx.Rows) error {
		var err error
		got, err = pgx.CollectRows(rows, pgx.RowTo[int])
		return err
	}}
	h, err := a.TryAcquireThen(ctx, "pass:acme", read)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[2 3]" {
		t.Fatalf("read after the lock: %v, want [2 3]", got)
	}
	got = nil
	if _, err := b.TryAcquireThen(ctx, "pass:acme", read); !errors.Is(err, lease.ErrBusy) || got != nil {
		t.Fatalf("busy: %v, read %v; want ErrBusy and nothing read", err, got)
	}
	h.Release()
	// One read fails before anything runs (it cannot be prepared), one
	// after the lock was granted (at run time).
	for _, sql := range []string{`SELECT n FROM no_such_table`, `SELECT 1 / (n - n) FROM marks`} {
		bad := &lease.Read{SQL: sql, Scan: func(rows pgx.Rows) error {
			for rows.Next() {
			}
			return rows.Err()
		}}
		if _, err := b.TryAcquireThen(ctx, "pass:acme", bad); err == nil || !strings.Contains(err.Error(), "pass:acme") {
			t.Fatalf("failed read %q: %v, want the read's error", sql, err)
		}
		ha, err := a.TryAcquire(ctx, "pass:acme")
		if err != nil {
			t.Fatalf("after %q failed on b, a: %v (b kept the lease)", sql, err)
		}
		ha.Release()
	}
	// b was granted the lock before its read failed: it gave it back, and
	// its leaser still works.
	h2, err := a.TryAcquireThen(ctx, "pass:acme", read)
	if err != nil {
		t.Fatalf("after a failed read elsewhere: %v", err)
	}
	h2.Release()
	if h3, err := b.TryAcquire(ctx, "pass:acme"); err != nil {
		t.Fatalf("b after its failed read: %v", err)
	} else {
		h3.Release()
	}
}
