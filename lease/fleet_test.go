package lease_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidemarkhq/tidemark/internal/pgtest"

	"github.com/tidemarkhq/tidemark/lease"
)

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("source-%04d", i)
	}
	return out
}

func loads(a map[string]string) map[string]int {
	out := map[string]int{}
	for _, m := range a {
		out[m]++
	}
	return out
}

func moved(a, b map[string]string) int {
	n := 0
	for k, v := range a {
		if b[k] != v {
			n++
		}
	}
	return n
}

// The bound of the issue: each of R members holds at most ⌈N/R⌉+1 of N
// sources, and a member joining or leaving moves about its share.
func TestAssignBoundedAndStable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ n, r int }{{300, 3}, {1000, 3}, {10, 3}, {7, 4}, {1, 2}, {10000, 7}} {
		srcs := names(tc.n)
		var members []string
		for i := range tc.r {
			members = append(members, fmt.Sprintf("host-%d/%d", i, 1000+i))
		}
		full := lease.Assign(srcs, members)
		if len(full) != tc.n {
			t.Fatalf("%d sources, %d assigned", tc.n, len(full))
		}
		limit := (tc.n+tc.r-1)/tc.r + 1
		for m, l := range loads(full) {
			if l > limit {
				t.Fatalf("N=%d R=%d: %s holds %d > %d", tc.n, tc.r, m, l, limit)
			}
		}
		if again := lease.Assign(srcs, []string{members[len(members)-1]}); len(loads(again)) != 1 {
			t.Fatal("one member must hold everything")
		}
		if tc.r < 2 || tc.n < 30 {
			continue
		}
		// One member leaves: its share moves, and little else.
		less := lease.Assign(srcs, members[1:])
		share := loads(full)[members[0]]
		if m := moved(full, less); m > share+tc.n/(5*tc.r) {
			t.Errorf("N=%d R=%d: a member with %d sources left and %d moved", tc.n, tc.r, share, m)
		}
		for m, l := range loads(less) {
			if l > (tc.n+tc.r-2)/(tc.r-1)+1 {
				t.Fatalf("after a leave %s holds %d", m, l)
			}
		}
		// It comes back: the same assignment as before.
		if back := lease.Assign(srcs, members); moved(full, back) != 0 {
			t.Fatal("the assignment depends on history")
		}
		t.Logf("N=%d R=%d: loads %v; a leave moved %d (its share %d)", tc.n, tc.r, loads(full), moved(full, less), share)
	}
	if len(lease.Assign(names(3), nil)) != 0 {
		t.Fatal("no members, no owners")
	}
}

// Membership on real Postgres: a member is live while its session is; a
// lease's holder is named by its member id (what `cursors` shows as OWNER).
func TestHeartbeatMembersAndHolders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	a, b, cli := newLeaser(t, url), newLeaser(t, url), newLeaser(t, url)
	ma, mb := lease.Member{ID: "host-a/1", Host: "host-a", PID: 1}, lease.Member{ID: "host-b/2", Host: "host-b", PID: 2}
	if live, err := a.Heartbeat(ctx, ma, time.Minute); err != nil || !slices.Equal(live, []string{"host-a/1"}) {
		t.Fatalf("first member: %v %v", live, err)
	}
	if live, err := b.Heartbeat(ctx, mb, time.Minute); err != nil || !slices.Equal(live, []string{"host-a/1", "host-b/2"}) {
		t.Fatalf("two members: %v %v", live, err)
	}
	if _, err := a.TryAcquire(ctx, "owner:acme"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.TryAcquire(ctx, "owner:globex"); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	holders, err := lease.Holders(ctx, pool, []string{"owner:acme", "owner:globex", "owner:initech"})
	if err != nil {
		t.Fatal(err)
	}
	if holders["owner:acme"] != "host-a/1" || !strings.Contains(holders["owner:globex"], "not a fleet member") || len(holders) != 2 {
		t.Fatalf("holders: %v", holders)
	}
	// a dies: its session goes, and with it its membership, at once.
	// (The backend exits a moment after the client hangs up.)
	a.Close()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		live, err := b.Heartbeat(ctx, mb, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(live, []string{"host-b/2"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a died: %v", live)
		}
	}
}

// A database not migrated to the fleet's table says what to run.
func TestHeartbeatOnAnOldSchemaSaysMigrate(t *testing.T) {
	t.Parallel()
	l := newLeaser(t, pgtest.EmptyURL(t))
	_, err := l.Heartbeat(context.Background(), lease.Member{ID: "h/1", Host: "h", PID: 1}, time.Minute)
	if err == nil || !strings.Contains(err.Error(), "run `tidemark migrate`") {
		t.Fatalf("heartbeat without fleet_members: %v", err)
	}
}

// A heartbeat that times out (here: blocked on its member row) is
// cancelled on the server, and the session goes on with every lock it
// holds: by default pgx would close the connection, and the process would
// lose all its sources at once.
func TestTimedOutStatementKeepsTheLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	a, other := newLeaser(t, url), newLeaser(t, url)
	m := lease.Member{ID: "host-a/1", Host: "host-a", PID: 1}
	if _, err := a.Heartbeat(ctx, m, time.Minute); err != nil {
		t.Fatal(err)
	}
	h, err := a.TryAcquire(ctx, "owner:acme")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM fleet_members WHERE id = $1 FOR UPDATE`, m.ID); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := a.Heartbeat(short, m, time.Minute); err == nil {
		t.Fatal("a heartbeat blocked on its row succeeded")
	}
	_ = tx.Rollback(ctx)
	if !a.Holds("owner:acme") {
		t.Fatal("the leaser forgot its lease after a cancelled statement")
	}
	if err := h.Check(ctx, pool); err != nil {
		t.Fatalf("the lease went with a cancelled statement: %v", err)
	}
	if _, err := other.TryAcquire(ctx, "owner:acme"); !errors.Is(err, lease.ErrBusy) {
		t.Fatalf("another process took the lease: %v", err)
	}
	if live, err := a.Heartbeat(ctx, m, time.Minute); err != nil || !slices.Equal(live, []string{m.ID}) {
		t.Fatalf("the next heartbeat: %v %v", live, err)
	}
}

// Holders maps pg_locks' two oid halves back to the key: names whose key
// has its low or high half above 2^31 are found too, and a lock on a key
// nobody asked about is left out.
func TestHoldersAcrossTheKeySpace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.DB(t)
	l := newLeaser(t, pool.Config().ConnString())
	var names []string
	for i := 0; i < 64; i++ {
		name := fmt.Sprintf("owner:k%02d", i)
		if _, err := l.TryAcquire(ctx, name); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			names = append(names, name) // the odd ones are held, not asked about
		}
	}
	holders, err := lease.Holders(ctx, pool, append(names, "owner:free"))
	if err != nil {
		t.Fatal(err)
	}
	if len(holders) != len(names) {
		t.Fatalf("holders of %d held names (and one free): %d: %v", len(names), len(holders), holders)
	}
	for _, n := range names {
		if !strings.Contains(holders[n], "not a fleet member") {
			t.Fatalf("%s (key %d): %q", n, lease.Key(n), holders[n])
		}
	}
}
