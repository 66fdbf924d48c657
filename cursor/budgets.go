package cursor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// A source's budget is the source's, not the process's: what it has spent
// lives in source_budgets, shared by every process on the database (a
// restarted daemon, the next owner, a CLI backfill).

// sqlReserve takes a block of $3 send slots of a source, each $2
// microseconds apart, from max(next_at, now), and moves next_at past the
// block. It returns how long until the block starts, on the database's
// clock.
const sqlReserve = `
INSERT INTO source_budgets AS b (source, next_at, updated_at)
VALUES ($1, clock_timestamp() + ($2::bigint * $3::bigint) * interval '1 microsecond', now())
ON CONFLICT (source) DO UPDATE
SET next_at = greatest(b.next_at, clock_timestamp()) + ($2::bigint * $3::bigint) * interval '1 microsecond', updated_at = now()
RETURNING extract(epoch FROM b.next_at - ($2::bigint * $3::bigint) * interval '1 microsecond' - clock_timestamp())::float8, b.next_at`

// sqlGiveBackSlots gives back the unused end of a block ($3 microseconds) when no
// process has taken slots after it.
const sqlGiveBackSlots = `
UPDATE source_budgets SET next_at = greatest(clock_timestamp(), next_at - $3 * interval '1 microsecond'), updated_at = now()
WHERE source = $1 AND next_at = $2`

// BlockSpan is about how much send time a process takes from the database
// at once (at least one slot, at most MaxBlock): a pass's requests then
// cost one write, not one each (issue 30, item 6: one write per request
// was most of the daemon's idle cost). Another process waits at most this
// long for slots taken and left unused.
const (
	BlockSpan = 2 * time.Second
	MaxBlock  = 32
)

// Pacer spaces a source's requests across processes (httpx.Pacer). It
// takes slots from the database a block at a time and hands them out here:
// every slot sent belongs to one process, at the block's spacing, so any
// window holds what the spacing allows whoever sends.
type Pacer struct {
	db     DB
	source string

	mu       sync.Mutex
	interval time.Duration
	// next is this process's next free slot; slots up to end-interval are
	// its own (local clock, conservative on both sides of the database's).
	next, end time.Time
	// dbEnd is the block's end on the database's clock (Release).
	dbEnd time.Time
}

// Pacer returns the source's shared pacer.
func (s *Store) Pacer(source string) *Pacer { return &Pacer{db: s.db, source: source} }

// Reserve takes the source's next send slot at spacing interval and returns
// how long to wait for it. A slot is spent even if the caller gives up:
// that errs on the safe side.
func (p *Pacer) Reserve(ctx context.Context, interval time.Duration) (time.Duration, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if interval == p.interval {
		if t := later(p.next, now); !t.Add(interval).After(p.end) {
			p.next = t.Add(interval)
			return t.Sub(now), nil
		}
	}
	if err := p.claim(ctx, interval); err != nil {
		return 0, err
	}
	now = time.Now()
	t := later(p.next, now)
	p.next = t.Add(interval)
	return t.Sub(now), nil
}

// claim takes a block of slots from the database. The block starts here
// no earlier than it does there (measured after the answer) and ends no
// later (measured before the question).
func (p *Pacer) claim(ctx context.Context, interval time.Duration) error {
	k := blockOf(interval)
	before := time.Now()
	var secs float64
	if err := p.db.QueryRow(ctx, sqlReserve, p.source, interval.Microseconds(), k).Scan(&secs, &p.dbEnd); err != nil {
		return fmt.Errorf("reserve a request slot of source %s: %w", p.source, err)
	}
	wait := max(0, time.Duration(secs*float64(time.Second)))
	p.interval = interval
	p.next = time.Now().Add(wait)
	p.end = before.Add(wait + time.Duration(k)*interval.Truncate(time.Microsecond))
	return nil
}

// Release gives back the slots of this process's block it has not used,
// unless another process has taken slots after them: the next process (a
// CLI run after this one, the next owner) need not wait for them. The
// slots given back start no earlier than this process's next one.
func (p *Pacer) Release(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	unused := p.end.Sub(later(p.next, time.Now()))
	if p.dbEnd.IsZero() || unused <= 0 {
		return nil
	}
	// The block's end here is no later than there, so the database's end
	// less what is unused here is no earlier than this process's next slot.
	_, err := p.db.Exec(ctx, sqlGiveBackSlots, p.source, p.dbEnd, unused.Microseconds())
	p.end, p.dbEnd = p.next, time.Time{}
	if err != nil {
		return fmt.Errorf("give back request slots of source %s: %w", p.source, err)
	}
	return nil
}

// blockOf is how many slots of interval a claim takes.
func blockOf(interval time.Duration) int64 {
	if interval <= 0 {
		return 1
	}
	return int64(min(MaxBlock, max(1, BlockSpan/interval)))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

const sqlQuotaRow = `
INSERT INTO source_budgets (source) VALUES ($1) ON CONFLICT (source) DO NOTHING`

// sqlTakeQuota refills the bucket to now, takes $4 when it holds them
// (gives back for $4 < 0) and returns what it held before: one statement,
// one round trip (a pass's hot path), atomic under the row lock.
const sqlTakeQuota = `
WITH cur AS (
  SELECT least($2::float8, coalesce(quota_tokens, $2::float8) +
         $3::float8 * greatest(0, extract(epoch FROM clock_timestamp() - coalesce(quota_at, clock_timestamp())))::float8) AS have
  FROM source_budgets WHERE source = $1 FOR UPDATE
), upd AS (
  UPDATE source_budgets b
  SET quota_tokens = CASE WHEN cur.have >= $4::float8 THEN least($2::float8, cur.have - $4::float8) ELSE cur.have END,
      quota_at = clock_timestamp(), updated_at = now()
  FROM cur WHERE b.source = $1
)
SELECT have FROM cur`

// QuotaParams are a token bucket's shape: Burst requests at most, refilled
// at PerSecond.
type QuotaParams struct {
	Source    string
	Burst     float64
	PerSecond float64
}

// TakeQuota takes n requests from the source's shared bucket (a new source
// starts full) and returns 0; or, when they are not there, takes nothing
// and returns how long until they are (an hour when they never will be).
// A negative n gives requests back, up to Burst.
func (s *Store) TakeQuota(ctx context.Context, p QuotaParams, n int) (time.Duration, error) {
	var have float64
	err := s.db.QueryRow(ctx, sqlTakeQuota, p.Source, p.Burst, p.PerSecond, n).Scan(&have)
	if errors.Is(err, pgx.ErrNoRows) { // the source's first take: a full bucket
		if _, err = s.db.Exec(ctx, sqlQuotaRow, p.Source); err == nil {
			err = s.db.QueryRow(ctx, sqlTakeQuota, p.Source, p.Burst, p.PerSecond, n).Scan(&have)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("take quota of source %s: %w", p.Source, err)
	}
	need := float64(n)
	switch {
	case have >= need:
		return 0, nil
	case need > p.Burst || p.PerSecond <= 0:
		return time.Hour, nil
	}
	return time.Duration((need - have) / p.PerSecond * float64(time.Second)), nil
}

// Memo keeps a source's small answers across processes (provider.Memo).
type Memo struct {
	db     DB
	source string
}

// Memo returns the source's memo.
func (s *Store) Memo(source string) *Memo { return &Memo{db: s.db, source: source} }

// Get returns the value kept under key and its age; ok false when none.
func (m *Memo) Get(ctx context.Context, key string) (value []byte, age time.Duration, ok bool, err error) {
	var secs float64
	err = m.db.QueryRow(ctx, `SELECT value, extract(epoch FROM clock_timestamp() - stored_at)::float8 FROM source_memos WHERE source = $1 AND key = $2`,
		m.source, key).Scan(&value, &secs)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, fmt.Errorf("read memo %s of source %s: %w", key, m.source, err)
	}
	return value, time.Duration(secs * float64(time.Second)), true, nil
}

// Put keeps value (JSON) under key, learnt now.
func (m *Memo) Put(ctx context.Context, key string, value []byte) error {
	_, err := m.db.Exec(ctx, `INSERT INTO source_memos (source, key, value, stored_at) VALUES ($1, $2, $3, now())
ON CONFLICT (source, key) DO UPDATE SET value = EXCLUDED.value, stored_at = EXCLUDED.stored_at`, m.source, key, value)
	if err != nil {
		return fmt.Errorf("write memo %s of source %s: %w", key, m.source, err)
	}
	return nil
}
