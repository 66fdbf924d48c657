package cursor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// A source's budget is the source's, not the process's: what it has spent
// lives in source_budgets, shared by every process on the database (a
// restarted daemon, the next owner, a CLI backfill).

// sqlReserve takes the next send slot of a source: max(next_at, now), and
// moves next_at on by the spacing. It returns how long to wait until the
// slot, on the database's clock.
const sqlReserve = `
INSERT INTO source_budgets AS b (source, next_at, updated_at)
VALUES ($1, clock_timestamp() + $2 * interval '1 microsecond', now())
ON CONFLICT (source) DO UPDATE
SET next_at = greatest(b.next_at, clock_timestamp()) + $2 * interval '1 microsecond', updated_at = now()
RETURNING extract(epoch FROM b.next_at - $2 * interval '1 microsecond' - clock_timestamp())::float8`

// Pacer spaces a source's requests across processes (httpx.Pacer).
type Pacer struct {
	db     DB
	source string
}

// Pacer returns the source's shared pacer.
func (s *Store) Pacer(source string) *Pacer { return &Pacer{db: s.db, source: source} }

// Reserve takes the source's next send slot at spacing interval and returns
// how long to wait for it. A slot is spent even if the caller gives up:
// that errs on the safe side.
func (p *Pacer) Reserve(ctx context.Context, interval time.Duration) (time.Duration, error) {
	var secs float64
	if err := p.db.QueryRow(ctx, sqlReserve, p.source, interval.Microseconds()).Scan(&secs); err != nil {
		return 0, fmt.Errorf("reserve a request slot of source %s: %w", p.source, err)
	}
	return max(0, time.Duration(secs*float64(time.Second))), nil
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
