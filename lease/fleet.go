package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The fleet: daemons sharing one database register as members on their
// lease connection and heartbeat there. A member is live while its lease
// session exists (a killed process's connection drops at once, and with it
// its locks) and its heartbeat is younger than the TTL (a member cut off
// behind a half-open connection). Every member computes the same Assign
// over the same live list, so they agree on who should own what without
// talking; the advisory locks still make sure no source has two owners
// while the members' views differ for a moment.

const sqlHeartbeat = `
INSERT INTO fleet_members (id, host, pid, lease_pid, lease_started)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (id) DO UPDATE
SET lease_pid = EXCLUDED.lease_pid, lease_started = EXCLUDED.lease_started, heartbeat_at = now()`

// sqlLive lists the live members; the dead ones whose session is gone are
// removed on the way (a member that dies leaves nothing behind for long).
const sqlLive = `
WITH gone AS (
    DELETE FROM fleet_members m
    WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = m.lease_pid AND a.backend_start = m.lease_started)
      AND m.heartbeat_at < now() - $1::interval
)
SELECT m.id FROM fleet_members m
JOIN pg_stat_activity a ON a.pid = m.lease_pid AND a.backend_start = m.lease_started
WHERE m.heartbeat_at > now() - $1::interval
ORDER BY m.id`

// Member names this process in the fleet.
type Member struct {
	ID   string // unique in the fleet: host/pid
	Host string
	PID  int
}

// Heartbeat records that m is alive on this Leaser's session (registering
// it on first use, and again after a reconnect) and returns the live
// members' ids, sorted, m included.
func (l *Leaser) Heartbeat(ctx context.Context, m Member, ttl time.Duration) ([]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.connect(ctx); err != nil {
		return nil, err
	}
	// An owed unlock keeps a source nobody here owns from the replica
	// assigned it: the heartbeat pays it even when nothing is taken.
	if l.payOwed(ctx); l.conn == nil {
		return nil, errors.New("fleet heartbeat: the lease connection dropped")
	}
	ctx, cancel := l.statement(ctx)
	defer cancel()
	if _, err := l.conn.Exec(ctx, sqlHeartbeat, m.ID, m.Host, m.PID, int64(l.sess.pid), l.sess.started); err != nil {
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "42P01" {
			return nil, fmt.Errorf("fleet heartbeat: table fleet_members is missing: run `tidemark migrate`: %w", err)
		}
		l.failed()
		return nil, fmt.Errorf("fleet heartbeat of %s: %w", m.ID, err)
	}
	rows, err := l.conn.Query(ctx, sqlLive, ttl.String())
	if err != nil {
		l.failed()
		return nil, fmt.Errorf("fleet members: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		l.failed()
		return nil, fmt.Errorf("fleet members: %w", err)
	}
	return ids, nil
}

// Leave removes m from the fleet at once (a clean stop), so that the others
// take its share at their next heartbeat rather than after the TTL.
func (l *Leaser) Leave(ctx context.Context, m Member) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil || l.conn.IsClosed() {
		return nil
	}
	if _, err := l.conn.Exec(ctx, `DELETE FROM fleet_members WHERE id = $1`, m.ID); err != nil {
		l.failed()
		return fmt.Errorf("leave the fleet: %w", err)
	}
	return nil
}

// Assign spreads names (sources) over members by rendezvous hashing with
// bounded loads: each name goes to the member that scores highest for it
// among those holding fewer than ⌈N/R⌉+1 names, names taken in the order of
// their own hash. The same inputs give the same answer in every process;
// a member joining or leaving moves about its share (N/R names) and little
// else. Members with no names get none; no members, an empty map.
func Assign(names, members []string) map[string]string {
	out := make(map[string]string, len(names))
	if len(members) == 0 {
		return out
	}
	ms := slices.Clone(members)
	slices.Sort(ms)
	ms = slices.Compact(ms)
	ns := slices.Clone(names)
	slices.SortFunc(ns, func(a, b string) int {
		return cmp.Or(cmp.Compare(score("", a), score("", b)), cmp.Compare(a, b))
	})
	limit := (len(ns)+len(ms)-1)/len(ms) + 1
	load := make(map[string]int, len(ms))
	for _, n := range ns {
		best, bestScore := "", uint64(0)
		for _, m := range ms {
			if load[m] >= limit {
				continue
			}
			if s := score(m, n); best == "" || s > bestScore {
				best, bestScore = m, s
			}
		}
		out[n] = best
		load[best]++
	}
	return out
}

func score(member, name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(member))
	h.Write([]byte{0})
	h.Write([]byte(name))
	// fnv's low bits mix poorly for similar inputs: finish with a
	// splitmix64 round so that scores of "src-1", "src-2"… are independent.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// sqlHolders finds, for each lease key, the session holding it and the
// fleet member on that session.
const sqlHolders = `
SELECT k.name, COALESCE(m.id, 'pid ' || l.pid::text || ' (not a fleet member)')
FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS k(name, hi, lo)
JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND l.classid = k.hi::oid AND l.objid = k.lo::oid
JOIN pg_stat_activity a ON a.pid = l.pid
LEFT JOIN fleet_members m ON m.lease_pid = l.pid AND m.lease_started = a.backend_start`

// Queryer is what Holders needs: a pool, a connection or a transaction.
type Queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Holders returns, for the leases named that someone holds, who: the fleet
// member's id, or the backend pid of a process that is no member (a CLI
// backfill). Leases nobody holds are absent.
func Holders(ctx context.Context, q Queryer, names []string) (map[string]string, error) {
	his, los := make([]int64, len(names)), make([]int64, len(names))
	for i, n := range names {
		u := uint64(Key(n))
		his[i], los[i] = int64(u>>32), int64(u&0xffffffff)
	}
	rows, err := q.Query(ctx, sqlHolders, names, his, los)
	if err != nil {
		return nil, fmt.Errorf("lease holders: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name, who string
		if err := rows.Scan(&name, &who); err != nil {
			return nil, fmt.Errorf("lease holders: %w", err)
		}
		out[name] = who
	}
	return out, rows.Err()
}
