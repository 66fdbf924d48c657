package webhooks

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/cursor"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
)

// passer plays a daemon's side of RunTriggered: a non-owner returns before
// it asks admit; an owner whose pass lease is busy (a pass of the source
// runs elsewhere) asks admit and then runs nothing.
type passer struct {
	owner  bool
	during func() // while the process learns whether it owns the source
}

func (p passer) RunTriggered(_ string, rs []clients.Resource, admit func([]clients.Resource) bool) ([]clients.Resource, error) {
	if p.during != nil {
		p.during()
	}
	if p.owner && admit != nil {
		admit(rs)
	}
	return nil, nil
}

// sharedQuota is a source's spare-quota bucket in Postgres (burst 4, no
// refill to speak of) with spent requests already taken.
func sharedQuota(t *testing.T, spent int) (context.Context, func(n int) (time.Duration, error), *Quota) {
	t.Helper()
	ctx, pool := t.Context(), pgtest.DB(t)
	qp := cursor.QuotaParams{Source: "tg", Burst: 4, PerSecond: 1.0 / 3600}
	take := func(n int) (time.Duration, error) { return cursor.New(pool).TakeQuota(ctx, qp, n) }
	if d, err := take(spent); d != 0 || err != nil {
		t.Fatalf("spend %d: %s, %v", spent, d, err)
	}
	q := NewQuota(16, 2, map[clients.Resource]int{clients.TimeEntries: 2})
	q.Take = func(ctx context.Context, n int) (time.Duration, error) { return take(n) }
	return ctx, take, q
}

func runOnce(ctx context.Context, p Passer, q *Quota) {
	r := &Runner{Passer: p, Quotas: map[string]*Quota{"tg": q}, busy: map[string]bool{}, notAfter: map[string]time.Time{}}
	r.wg.Add(1)
	r.run(ctx, "tg", []Trigger{{Source: "tg", Resource: clients.TimeEntries}})
}

// A replica that does not own the source takes nothing from the shared
// spare quota (issue 30, item 11): the owner, taking the whole bucket
// meanwhile, is not refused for a pass the non-owner never runs.
func TestNonOwnerTakesNoSharedQuota(t *testing.T) {
	t.Parallel()
	ctx, take, q := sharedQuota(t, 0)
	var ownerWait atomic.Int64
	runOnce(ctx, passer{during: func() {
		d, err := take(4) // the owner's triggered pass, on another replica
		if err != nil {
			t.Error(err)
		}
		ownerWait.Store(int64(d))
	}}, q)
	if d := time.Duration(ownerWait.Load()); d != 0 {
		t.Fatalf("the owner was deferred %s: a non-owner held part of the shared quota", d)
	}
}

// When the shared bucket cannot be read, the pass is counted by the
// process's own limiter; giving it back then must not credit the shared
// bucket with requests it never gave (issue 30, item 11).
func TestGiveBackCreditsOnlyWhatWasTaken(t *testing.T) {
	t.Parallel()
	ctx, take, q := sharedQuota(t, 2) // 2 of 4 left
	shared := q.Take
	var failed atomic.Bool
	q.Take = func(ctx context.Context, n int) (time.Duration, error) {
		if n > 0 && failed.CompareAndSwap(false, true) {
			return 0, errors.New("database unreachable for a moment")
		}
		return shared(ctx, n)
	}
	runOnce(ctx, passer{owner: true}, q)
	if d, err := take(3); err != nil || d == 0 {
		t.Fatalf("3 requests taken from a bucket that held 2 (%s, %v): the give-back credited requests never taken", d, err)
	}
	if d, err := take(2); err != nil || d != 0 {
		t.Fatalf("the 2 requests left are gone: %s, %v", d, err)
	}
}
