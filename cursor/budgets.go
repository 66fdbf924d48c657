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
// microseconds apart, from max(next_at, now + $4 microseconds), and moves
// next_at past the block. It returns how long until the block starts, on
// the database's clock, and the block's end.
const sqlReserve = `
INSERT INTO source_budgets AS b (source, next_at, updated_at)
VALUES ($1, clock_timestamp() + ($4::bigint + $2::bigint * $3::bigint) * interval '1 microsecond', now())
ON CONFLICT (source) DO UPDATE
SET next_at = greatest(b.next_at, clock_timestamp() + $4::bigint * interval '1 microsecond') + ($2::bigint * $3::bigint) * interval '1 microsecond', updated_at = now()
RETURNING extract(epoch FROM b.next_at - ($2::bigint * $3::bigint) * interval '1 microsecond' - clock_timestamp())::float8, b.next_at`

// sqlGiveBackSlots gives back the unused end of a block ($3 microseconds)
// when no process has taken slots after it.
const sqlGiveBackSlots = `
UPDATE source_budgets SET next_at = greatest(clock_timestamp(), next_at - $3 * interval '1 microsecond'), updated_at = now()
WHERE source = $1 AND next_at = $2`

// sqlTaken lists the slots processes hold from now on, by source.
const sqlTaken = `
SELECT source, extract(epoch FROM next_at - clock_timestamp())::float8
FROM source_budgets WHERE next_at > clock_timestamp()`

// How a source's slots are shared (issue 30, item 6: a write per request
// was most of the daemon's idle cost). The process that holds the source's
// ownership lease spaces its requests here, with no write: its first slot
// is an interval after it took the lease (a previous holder sent nothing
// after losing it: its process ended, or it handed over between passes),
// and it keeps out of the slots other processes took in the database,
// which it reads for all its sources at once, at most every ViewEvery.
// A process without the lease takes a block of slots from the database
// (BlockSpan, one write), starting at least Lead and an interval from now:
// the owner reads the database at least once in that time, so it knows of
// the block an interval before it starts.
const (
	BlockSpan = 2 * time.Second
	MaxBlock  = 32
	Lead      = 3 * time.Second
	ViewEvery = 500 * time.Millisecond
	// viewSlack is the part of Lead a view does not cover: the statement
	// that took a block may have started before the view and committed
	// after it.
	viewSlack = time.Second
)

// Pacers are a process's pacers, one per source, sharing one view of the
// slots other processes hold.
type Pacers struct {
	db DB

	mu    sync.Mutex
	at    time.Time            // the view: read at (local clock, before asking)
	taken map[string]time.Time // source → end of the slots held elsewhere
}

// NewPacers returns a process's pacers on db.
func NewPacers(db DB) *Pacers { return &Pacers{db: db} }

// Pacer returns source's pacer; owns, when set, says whether this process
// holds the source's ownership lease (read at every request, so cheap).
func (ps *Pacers) Pacer(source string, owns func() bool) *Pacer {
	return &Pacer{db: ps.db, source: source, owns: owns, view: ps}
}

// heldUntil returns the end of the slots other processes hold of source and
// when the view was read, reading it again when older than ViewEvery.
func (ps *Pacers) heldUntil(ctx context.Context, source string) (time.Time, time.Time, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if time.Since(ps.at) > ViewEvery {
		at := time.Now()
		rows, err := ps.db.Query(ctx, sqlTaken)
		if err != nil {
			return time.Time{}, time.Time{}, fmt.Errorf("read the request slots taken: %w", err)
		}
		taken := map[string]time.Time{}
		var src string
		var secs float64
		_, err = pgx.ForEachRow(rows, []any{&src, &secs}, func() error {
			// Measured after the answer: the end is no earlier here.
			taken[src] = time.Now().Add(time.Duration(secs * float64(time.Second)))
			return nil
		})
		if err != nil {
			return time.Time{}, time.Time{}, fmt.Errorf("read the request slots taken: %w", err)
		}
		ps.at, ps.taken = at, taken
	}
	return ps.taken[source], ps.at, nil
}

// Pacer spaces a source's requests across processes (httpx.Pacer): every
// slot sent belongs to one process, at the spacing, so any window holds
// what the spacing allows whoever sends.
type Pacer struct {
	db     DB
	source string
	owns   func() bool
	view   *Pacers

	mu       sync.Mutex
	owner    bool // the last slot was taken as the owner
	interval time.Duration
	// next is this process's next free slot; as a non-owner, slots up to
	// end-interval are its own (local clock, conservative on both sides
	// of the database's), and dbEnd is the block's end there.
	next, end time.Time
	dbEnd     time.Time
}

// Pacer returns the source's pacer for a process that never owns it.
func (s *Store) Pacer(source string) *Pacer { return NewPacers(s.db).Pacer(source, nil) }

// Reserve takes the source's next send slot at spacing interval and returns
// how long to wait for it. A slot is spent even if the caller gives up:
// that errs on the safe side.
func (p *Pacer) Reserve(ctx context.Context, interval time.Duration) (time.Duration, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.owns != nil && p.owns() {
		return p.reserveOwned(ctx, interval)
	}
	now := time.Now()
	if p.owner { // the lease is gone: slots come from the database again
		p.owner, p.end, p.dbEnd = false, time.Time{}, time.Time{}
	}
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

// reserveOwned takes a slot as the source's owner: after the last one,
// out of the slots held elsewhere, and only a slot the view still covers
// (else it waits and reads the view again).
func (p *Pacer) reserveOwned(ctx context.Context, interval time.Duration) (time.Duration, error) {
	start := time.Now()
	if !p.owner {
		p.owner, p.next = true, later(p.next, start.Add(interval))
	}
	p.interval = interval
	for {
		held, at, err := p.view.heldUntil(ctx, p.source)
		if err != nil {
			return 0, err
		}
		now := time.Now()
		t := later(later(p.next, now), held)
		// A block taken after the view starts at least Lead-viewSlack and
		// an interval after at.
		if covered := at.Add(Lead - viewSlack); !t.After(covered) {
			p.next = t.Add(interval)
			return t.Sub(now), nil
		}
		// Far ahead (slots held elsewhere): wait until a view read then
		// covers the slot.
		wait := max(ViewEvery, t.Sub(now)-(Lead-viewSlack))
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// claim takes a block of slots from the database, at least Lead and an
// interval ahead: an owner reads the database before it starts. The block
// starts here no earlier than it does there (measured after the answer)
// and ends no later (measured before the question).
func (p *Pacer) claim(ctx context.Context, interval time.Duration) error {
	k, lead := blockOf(interval), Lead+interval
	before := time.Now()
	var secs float64
	if err := p.db.QueryRow(ctx, sqlReserve, p.source, interval.Microseconds(), k, lead.Microseconds()).Scan(&secs, &p.dbEnd); err != nil {
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
// CLI run after this one) need not wait for them. The slots given back
// start no earlier than this process's next one.
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

// Memo keeps a source's small answers across processes (provider.Memo),
// per account: another token or API root never reads them.
type Memo struct {
	db              DB
	source, account string
}

// Memo returns the memo of source for account (provider.Settings.Account:
// a hash of what the answers depend on, never a credential).
func (s *Store) Memo(source, account string) *Memo {
	return &Memo{db: s.db, source: source, account: account}
}

// Get returns the value kept under key and its age; ok false when none.
func (m *Memo) Get(ctx context.Context, key string) (value []byte, age time.Duration, ok bool, err error) {
	var secs float64
	err = m.db.QueryRow(ctx, `SELECT value, extract(epoch FROM clock_timestamp() - stored_at)::float8 FROM source_memos WHERE source = $1 AND account = $2 AND key = $3`,
		m.source, m.account, key).Scan(&value, &secs)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, fmt.Errorf("read memo %s of source %s: %w", key, m.source, err)
	}
	return value, time.Duration(secs * float64(time.Second)), true, nil
}

// Put keeps value (JSON) under key, learnt now. The answers of the
// source's other accounts go: they are a previous token's.
func (m *Memo) Put(ctx context.Context, key string, value []byte) error {
	_, err := m.db.Exec(ctx, `WITH gone AS (DELETE FROM source_memos WHERE source = $1 AND account <> $2 AND key = $3)
INSERT INTO source_memos (source, account, key, value, stored_at) VALUES ($1, $2, $3, $4, now())
ON CONFLICT (source, account, key) DO UPDATE SET value = EXCLUDED.value, stored_at = EXCLUDED.stored_at`, m.source, m.account, key, value)
	if err != nil {
		return fmt.Errorf("write memo %s of source %s: %w", key, m.source, err)
	}
	return nil
}
