package webhooks

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// clock is a settable clock for the key store.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func hashOf(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }

func newTestStore(t *testing.T, pool *pgxpool.Pool) (*Store, *clock) {
	t.Helper()
	c := &clock{t: t0}
	return &Store{Pool: pool, Keep: 96 * time.Hour, Now: c.Now}, c
}

type snapshot struct {
	Events    int
	FirstSeen time.Time
	Hash      string
	Outcome   string
	Seq       int64
	Triggers  int
	Conflicts int
}

func snap(t *testing.T, pool *pgxpool.Pool, source, key string) snapshot {
	t.Helper()
	ctx := context.Background()
	var s snapshot
	var h []byte
	err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook_events),
		coalesce((SELECT first_seen_at FROM webhook_events WHERE source=$1 AND key=$2), 'epoch'),
		coalesce((SELECT payload_hash FROM webhook_events WHERE source=$1 AND key=$2), ''::bytea),
		coalesce((SELECT outcome FROM webhook_events WHERE source=$1 AND key=$2), ''),
		coalesce((SELECT sum(seq) FROM webhook_triggers), 0)::bigint,
		(SELECT count(*) FROM webhook_triggers), (SELECT count(*) FROM webhook_conflicts)`, source, key).
		Scan(&s.Events, &s.FirstSeen, &h, &s.Outcome, &s.Seq, &s.Triggers, &s.Conflicts)
	if err != nil {
		t.Fatal(err)
	}
	s.Hash = fmt.Sprintf("%x", h)
	return s
}

// The three rules of the key store, and expiry a second either side.
func TestClaimRules(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	st, clk := newTestStore(t, pool)
	ctx := context.Background()
	d := Delivery{Source: "tg", Key: "toggl:1", Resource: clients.TimeEntries, Hash: hashOf("a")}
	claim := func(d Delivery, want Outcome) {
		t.Helper()
		got, err := st.Claim(ctx, d)
		if err != nil || got != want {
			t.Fatalf("claim %s at %s: %v, %v; want %v", d.Key, clk.Now().Format(time.RFC3339), got, err, want)
		}
	}
	claim(d, Accepted)
	first := snap(t, pool, "tg", "toggl:1")
	if first.Events != 1 || first.Triggers != 1 || first.Seq != 1 || !first.FirstSeen.Equal(t0) || first.Outcome != "accepted" {
		t.Fatalf("after the first delivery: %+v", first)
	}

	// Same payload again, later: 200 and nothing new; first-seen kept.
	clk.Set(t0.Add(time.Hour))
	claim(d, Duplicate)
	if got := snap(t, pool, "tg", "toggl:1"); got != first {
		t.Fatalf("a duplicate changed the store:\n got %+v\nwant %+v", got, first)
	}

	// Another payload under the key: a conflict, never processed, nothing
	// overwritten.
	other := d
	other.Hash = hashOf("b")
	claim(other, Conflict)
	got := snap(t, pool, "tg", "toggl:1")
	if got.Conflicts != 1 || got.Hash != first.Hash || got.Seq != first.Seq || !got.FirstSeen.Equal(t0) {
		t.Fatalf("a conflict must be recorded and change nothing else: %+v", got)
	}
	cs, err := st.Conflicts(ctx, "tg", 10)
	if err != nil || len(cs) != 1 || cs[0].Key != "toggl:1" || fmt.Sprintf("%x", cs[0].StoredHash) != first.Hash {
		t.Fatalf("conflicts: %+v, %v", cs, err)
	}

	// One second before expiry: still a duplicate.
	clk.Set(t0.Add(96*time.Hour - time.Second))
	claim(d, Duplicate)
	if got := snap(t, pool, "tg", "toggl:1"); got.Seq != 1 || !got.FirstSeen.Equal(t0) {
		t.Fatalf("a repeat a second before expiry: %+v", got)
	}
	// One second after: the key is forgotten; the replay triggers a pass
	// again (harmless: the pass's versioned write).
	clk.Set(t0.Add(96*time.Hour + time.Second))
	claim(d, ExpiredReplay)
	if got := snap(t, pool, "tg", "toggl:1"); got.Seq != 2 || got.Outcome != "expired_replay" || got.Events != 1 {
		t.Fatalf("a replay a second after expiry: %+v", got)
	}

	// An event about something not mirrored is remembered, not triggered.
	claim(Delivery{Source: "tg", Key: "toggl:2", Hash: hashOf("c")}, Ignored)
	if got := snap(t, pool, "tg", "toggl:2"); got.Seq != 2 || got.Outcome != "ignored" {
		t.Fatalf("ignored: %+v", got)
	}
}

// A burst of events for one source and resource is one trigger row, and
// a pass clears it only if no event came meanwhile.
func TestTriggersCoalesce(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	st, clk := newTestStore(t, pool)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for i := range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := st.Claim(ctx, Delivery{Source: "tg", Key: fmt.Sprint("toggl:", i), Resource: clients.TimeEntries, Hash: hashOf(fmt.Sprint(i))})
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ts, err := st.Pending(ctx)
	if err != nil || len(ts) != 1 || ts[0].Events != 1000 || ts[0].Seq != 1000 || !ts[0].FirstEventAt.Equal(t0) {
		t.Fatalf("pending after 1,000 events: %+v, %v", ts, err)
	}
	// An event during the pass: the trigger stays for the next one.
	clk.Set(t0.Add(time.Second))
	if _, err := st.Claim(ctx, Delivery{Source: "tg", Key: "toggl:late", Resource: clients.TimeEntries, Hash: hashOf("x")}); err != nil {
		t.Fatal(err)
	}
	if gone, err := st.Done(ctx, ts[0]); err != nil || gone {
		t.Fatalf("Done with an event since: gone=%v, %v", gone, err)
	}
	ts2, _ := st.Pending(ctx)
	if gone, err := st.Done(ctx, ts2[0]); err != nil || !gone {
		t.Fatalf("Done: gone=%v, %v", gone, err)
	}
}

// kill -9 between the claim and the trigger: both are one transaction, so
// the killed process leaves neither; the provider's resend is then the
// first delivery and triggers exactly one pass.
func TestKillBetweenClaimAndTrigger(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestClaimChild$", "-test.v")
	cmd.Env = append(os.Environ(), "WEBHOOKS_CLAIM_CHILD_DB="+url)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	ready := false
	for sc.Scan() {
		if strings.Contains(sc.Text(), "CLAIMED-NOT-COMMITTED") {
			ready = true
			break
		}
	}
	if !ready {
		cmd.Wait()
		t.Fatal("the child never reached the point between claim and commit")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// The server notices the dropped connection and rolls back; wait for
	// the row lock to go with it.
	st, _ := newTestStore(t, pool)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if got := snap(t, pool, "tg", "toggl:77"); got.Events == 0 && got.Triggers == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a killed claim left rows: %+v", snap(t, pool, "tg", "toggl:77"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 2 { // the resend, and a duplicate of it
		if _, err := st.Claim(ctx, childDelivery); err != nil {
			t.Fatal(err)
		}
	}
	if got := snap(t, pool, "tg", "toggl:77"); got.Events != 1 || got.Triggers != 1 || got.Seq != 1 {
		t.Fatalf("after the resend: %+v (want one key, one trigger)", got)
	}
}

var childDelivery = Delivery{Source: "tg", Key: "toggl:77", Resource: clients.TimeEntries, Hash: hashOf("77")}

// TestClaimChild is the process TestKillBetweenClaimAndTrigger kills: it
// claims, says so, and waits inside the transaction.
func TestClaimChild(t *testing.T) {
	url := os.Getenv("WEBHOOKS_CLAIM_CHILD_DB")
	if url == "" {
		return // only as the child
	}
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := newTestStore(t, pool)
	st.beforeCommit = func(context.Context) {
		fmt.Println("CLAIMED-NOT-COMMITTED")
		time.Sleep(time.Minute)
	}
	st.Claim(context.Background(), childDelivery)
}

// Keys are kept past their expiry for another keep (so a replay is still
// seen as one), then purged.
func TestPurge(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	st, clk := newTestStore(t, pool)
	ctx := context.Background()
	for i, at := range []time.Time{t0, t0.Add(time.Hour)} {
		clk.Set(at)
		if _, err := st.Claim(ctx, Delivery{Source: "tg", Key: fmt.Sprint("k", i), Resource: clients.TimeEntries, Hash: hashOf("x")}); err != nil {
			t.Fatal(err)
		}
	}
	clk.Set(t0.Add(2*st.Keep + time.Minute)) // k0 expired more than keep ago, k1 not yet
	if n, err := st.Purge(ctx, st.Keep); err != nil || n != 1 {
		t.Fatalf("purged %d, %v; want 1", n, err)
	}
	if got := snap(t, pool, "tg", "k1"); got.Events != 1 || got.Outcome != "accepted" {
		t.Fatalf("after the purge: %+v", got)
	}
}
