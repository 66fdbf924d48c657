package poller

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrBusy means another pass of the same source holds its lease, in this
// process or another one.
var ErrBusy = errors.New("source is busy: another pass holds its lease")

// Leaser hands out one lease per key across processes. Each lease is a
// session-level Postgres advisory lock; all of a process's locks live on one
// dedicated connection (one session can hold many locks), so the number of
// database connections does not grow with the number of sources. When that
// connection drops, Postgres frees the locks and another replica can take
// over. A session's advisory locks are re-entrant, so an in-process set keeps
// two passes of this process apart too.
type Leaser struct {
	url string

	mu   sync.Mutex // guards conn and held; a pgx.Conn is not concurrency-safe
	conn *pgx.Conn
	held map[int64]bool
}

// NewLeaser returns a Leaser that connects to url when first used.
func NewLeaser(url string) *Leaser {
	return &Leaser{url: url, held: map[int64]bool{}}
}

// lockKey maps a lease name to the advisory lock key space.
func lockKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte("tidemark lease: " + name))
	return int64(h.Sum64())
}

// TryAcquire takes the lease called name without waiting. It returns ErrBusy
// when someone else holds it, and a release function otherwise.
func (l *Leaser) TryAcquire(ctx context.Context, name string) (release func(), err error) {
	key := lockKey(name)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[key] {
		return nil, ErrBusy
	}
	var ok bool
	for attempt := 0; ; attempt++ {
		if l.conn == nil || l.conn.IsClosed() {
			// A new session holds none of the old locks: forget them.
			l.held = map[int64]bool{}
			if l.conn, err = pgx.Connect(ctx, l.url); err != nil {
				l.conn = nil
				return nil, fmt.Errorf("lease connection: %w", err)
			}
		}
		err = l.conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&ok)
		if err == nil {
			break
		}
		// The connection died (e.g. a Postgres restart): reconnect once.
		l.conn.Close(context.Background())
		l.conn = nil
		if attempt == 1 || ctx.Err() != nil {
			return nil, fmt.Errorf("take lease %q: %w", name, err)
		}
	}
	if !ok {
		return nil, ErrBusy
	}
	l.held[key] = true
	conn := l.conn
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.held, key)
		if l.conn == conn && !conn.IsClosed() {
			// Bounded: a black-holed connection must not wedge the leaser
			// (if the unlock fails, the lock goes with the connection).
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", key); err != nil {
				conn.Close(context.Background())
				l.conn = nil
				l.held = map[int64]bool{}
			}
		}
	}, nil
}

// Holds reports whether this process still holds the lease called name: a
// lease is lost when its connection dropped (the locks went with it).
func (l *Leaser) Holds(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held[lockKey(name)] && l.conn != nil && !l.conn.IsClosed()
}

// ErrLeaseLost means the lease connection dropped (a Postgres restart, a
// network cut): every lease of this process went with it.
var ErrLeaseLost = errors.New("lease lost: the lease connection dropped")

// Alive checks with a round trip that the lease connection, and so every
// lease held on it, is still there. pgx only learns that a connection died
// when a query on it fails, so a long holder (a backfill) asks now and then.
func (l *Leaser) Alive(ctx context.Context) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil || l.conn.IsClosed() {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := l.conn.Ping(ctx); err != nil {
		l.conn.Close(context.Background())
		l.conn = nil
		l.held = map[int64]bool{}
		return false
	}
	return true
}

// Close drops the lease connection, freeing every lease.
func (l *Leaser) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		l.conn.Close(context.Background())
		l.conn = nil
	}
	l.held = map[int64]bool{}
}
