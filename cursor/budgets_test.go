package cursor_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/cursor"
)

// Back-to-back processes, each with a fresh HTTP client and so an empty
// limiter of its own, never put more than the budget into any window: the
// spacing is the source's, kept in the database (issue 23, item 6: 14
// backfill runs put 101 requests into 15 s and drew a 429).
func TestPacerKeepsTheWindowAcrossProcesses(t *testing.T) {
	ctx, pool, _ := setup(t)
	var mu sync.Mutex
	var at []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		w.Write([]byte("{}")) //nolint:errcheck
	}))
	defer srv.Close()
	rl := httpx.RateLimit{Requests: 5, Per: 500 * time.Millisecond}
	for range 8 { // eight "processes" one after the other, 3 requests each
		pacer := cursor.New(pool).Pacer("acme")
		c := httpx.New(httpx.Config{Source: "acme", RateLimit: rl, Pacer: pacer})
		for range 3 {
			if _, err := c.Do(ctx, httpx.Request{URL: srv.URL, Resource: "clients", Page: 1}); err != nil {
				t.Fatal(err)
			}
		}
		if err := pacer.Release(ctx); err != nil { // as the process exits
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range at {
		n := 0
		for j := i; j < len(at) && at[j].Sub(at[i]) < rl.Per; j++ {
			n++
		}
		if n > rl.Requests {
			t.Fatalf("%d requests within %s from request %d (budget %d): %v", n, rl.Per, i, rl.Requests, at)
		}
	}
}

// The spare-quota bucket of triggered passes is the source's: a restarted
// process (a fresh Store) does not get a new full allowance, and what a
// non-owner gave back is there again.
func TestTakeQuotaSurvivesARestart(t *testing.T) {
	ctx, pool, _ := setup(t)
	p := cursor.QuotaParams{Source: "tg", Burst: 4, PerSecond: 1.0 / 3600}
	take := func(n int) time.Duration {
		t.Helper()
		d, err := cursor.New(pool).TakeQuota(ctx, p, n) // a new process each time
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if take(2) != 0 || take(2) != 0 {
		t.Fatal("a full bucket refused its burst")
	}
	if d := take(2); d < 30*time.Minute {
		t.Fatalf("a restarted process got %s: a new allowance", d)
	}
	take(-2) // a non-owner's pass that did not run
	if take(2) != 0 {
		t.Fatal("requests given back were not there again")
	}
	if d := take(5); d != time.Hour {
		t.Fatalf("more than the burst: wait %s, want an hour", d)
	}
}

// A memo kept by one process is read by the next, with its age.
func TestMemoOutlivesTheProcess(t *testing.T) {
	ctx, pool, _ := setup(t)
	if _, _, ok, err := cursor.New(pool).Memo("tg").Get(ctx, "me"); ok || err != nil {
		t.Fatalf("an empty memo: %v, %v", ok, err)
	}
	if err := cursor.New(pool).Memo("tg").Put(ctx, "me", []byte(`{"timezone":"Europe/Berlin"}`)); err != nil {
		t.Fatal(err)
	}
	v, age, ok, err := cursor.New(pool).Memo("tg").Get(ctx, "me")
	if err != nil || !ok || !strings.Contains(string(v), "Europe/Berlin") || age < 0 || age > time.Minute {
		t.Fatalf("memo %s, age %s, %v, %v", v, age, ok, err)
	}
}

// countingDB counts the statements sent to a real database.
type countingDB struct {
	cursor.DB
	n atomic.Int64
}

func (c *countingDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.n.Add(1)
	return c.DB.QueryRow(ctx, sql, args...)
}

func (c *countingDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c.n.Add(1)
	return c.DB.Exec(ctx, sql, args...)
}

// A pass's requests cost one statement, not one each: the slots are taken
// from the database a block at a time (issue 30, item 6: a write per
// request made the idle daemon's database cost four times what it was).
// Another process still never gets a slot of the block.
func TestPacerTakesSlotsABlockAtATime(t *testing.T) {
	ctx, pool, _ := setup(t)
	db := &countingDB{DB: pool}
	interval := 20 * time.Millisecond
	a, b := cursor.New(db).Pacer("acme"), cursor.New(pool).Pacer("acme")
	var sends []time.Time
	for range 10 {
		d, err := a.Reserve(ctx, interval)
		if err != nil {
			t.Fatal(err)
		}
		sends = append(sends, time.Now().Add(d))
	}
	if n := db.n.Load(); n > 2 {
		t.Fatalf("10 slots took %d statements", n)
	}
	// Another process's first slot comes after the block's end.
	d, err := b.Reserve(ctx, interval)
	if err != nil {
		t.Fatal(err)
	}
	if other := time.Now().Add(d); other.Sub(sends[len(sends)-1]) < interval {
		t.Fatalf("another process got a slot %s after this one's last", other.Sub(sends[len(sends)-1]))
	}
}

// The slots of a block a process does not use are given back as it exits:
// the next process starts after the last one used, not after the block.
func TestPacerReleaseGivesBackTheUnusedSlots(t *testing.T) {
	ctx, pool, _ := setup(t)
	interval := 10 * time.Millisecond
	a, b := cursor.New(pool).Pacer("acme"), cursor.New(pool).Pacer("acme")
	d, err := a.Reserve(ctx, interval)
	if err != nil {
		t.Fatal(err)
	}
	last := time.Now().Add(d)
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	d, err = b.Reserve(ctx, interval)
	if err != nil {
		t.Fatal(err)
	}
	if d >= cursor.BlockSpan/2 {
		t.Fatalf("the next process waits %s: the unused block was not given back", d)
	}
	if first := time.Now().Add(d); first.Sub(last) < interval {
		t.Fatalf("the next process's first slot is %s after the last one used (spacing %s)", first.Sub(last), interval)
	}
}
