package cursor_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
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

// A memo kept by one process is read by the next, with its age, for the
// same account only; another account's answer replaces it.
func TestMemoOutlivesTheProcess(t *testing.T) {
	ctx, pool, _ := setup(t)
	defer func() {
		if _, _, ok, err := cursor.New(pool).Memo("tg", "b").Get(ctx, "me"); ok || err != nil {
			t.Fatalf("account b reads account a's memo: %v, %v", ok, err)
		}
		if err := cursor.New(pool).Memo("tg", "b").Put(ctx, "me", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		if _, _, ok, err := cursor.New(pool).Memo("tg", "a").Get(ctx, "me"); ok || err != nil {
			t.Fatalf("account a's memo outlived account b's: %v, %v", ok, err)
		}
	}()
	if _, _, ok, err := cursor.New(pool).Memo("tg", "a").Get(ctx, "me"); ok || err != nil {
		t.Fatalf("an empty memo: %v, %v", ok, err)
	}
	if err := cursor.New(pool).Memo("tg", "a").Put(ctx, "me", []byte(`{"timezone":"Europe/Berlin"}`)); err != nil {
		t.Fatal(err)
	}
	v, age, ok, err := cursor.New(pool).Memo("tg", "a").Get(ctx, "me")
	if err != nil || !ok || !strings.Contains(string(v), "Europe/Berlin") || age < 0 || age > time.Minute {
		t.Fatalf("memo %s, age %s, %v, %v", v, age, ok, err)
	}
}

// countingDB counts the statements sent to a real database.
type countingDB struct {
	cursor.DB
	n, reads atomic.Int64
}

func (c *countingDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.n.Add(1)
	return c.DB.QueryRow(ctx, sql, args...)
}

func (c *countingDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.reads.Add(1)
	return c.DB.Query(ctx, sql, args...)
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
	if d >= cursor.Lead+cursor.BlockSpan/2 {
		t.Fatalf("the next process waits %s: the unused block was not given back", d)
	}
	if first := time.Now().Add(d); first.Sub(last) < interval {
		t.Fatalf("the next process's first slot is %s after the last one used (spacing %s)", first.Sub(last), interval)
	}
}

// The process that holds the source's ownership lease spaces its requests
// with no write at all: it only reads, for all its sources at once, the
// slots other processes took (issue 30, item 6).
func TestPacerOwnerSendsWithoutWrites(t *testing.T) {
	ctx, pool, _ := setup(t)
	db := &countingDB{DB: pool}
	ps := cursor.NewPacers(db)
	owns := func() bool { return true }
	interval := 5 * time.Millisecond
	for _, src := range []string{"a", "b", "c"} {
		p := ps.Pacer(src, owns)
		for range 10 {
			if _, err := p.Reserve(ctx, interval); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n, reads := db.n.Load(), db.reads.Load(); n != 0 || reads < 1 {
		t.Fatalf("30 slots of 3 sources: %d writes, %d reads of the slots taken elsewhere", n, reads)
	}
}

// An owner sending without pause and a process without the lease taking
// slots meanwhile never send closer than the spacing: the owner keeps out
// of the block the other took.
func TestPacerOwnerKeepsOutOfAnotherProcesssBlock(t *testing.T) {
	ctx, pool, _ := setup(t)
	interval := 20 * time.Millisecond
	owner := cursor.NewPacers(pool).Pacer("acme", func() bool { return true })
	var mu sync.Mutex
	var slots []time.Time
	add := func(at time.Time) {
		mu.Lock()
		slots = append(slots, at)
		mu.Unlock()
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			d, err := owner.Reserve(ctx, interval)
			if err != nil {
				t.Error(err)
				return
			}
			add(time.Now().Add(d))
			time.Sleep(d)
		}
	}()
	other := cursor.New(pool).Pacer("acme")
	var last time.Time
	for range 5 {
		d, err := other.Reserve(ctx, interval)
		if err != nil {
			t.Fatal(err)
		}
		last = time.Now().Add(d)
		add(last)
		time.Sleep(d)
	}
	// Until the owner has sent past the other's block.
	for {
		mu.Lock()
		n := len(slots)
		past := n > 0 && slots[n-1].After(last.Add(time.Second))
		mu.Unlock()
		if past {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	<-done
	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(slots, time.Time.Compare)
	for i := 1; i < len(slots); i++ {
		if gap := slots[i].Sub(slots[i-1]); gap < interval-time.Millisecond {
			t.Fatalf("slots %d and %d are %s apart (spacing %s)", i-1, i, gap, interval)
		}
	}
}
