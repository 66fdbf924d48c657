// Package lease owns the leases that keep one owner, one pass and one
// backfill per source across processes: Postgres advisory locks held on one
// dedicated connection per process, and the fence that lets work which
// commits prove, inside its own transaction, that its lease is still held.
package lease

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
)

// ErrBusy means someone else holds the lease, in this process or another.
var ErrBusy = errors.New("source is busy: another pass holds its lease")

// ErrLeaseLost means a lease's session is gone (a Postgres restart, a
// network cut): its locks went with it, and another process may hold them
// now. Work that was done under the lease must not commit.
var ErrLeaseLost = errors.New("lease lost: the lease connection dropped")

// Leaser hands out one lease per key across processes. Each lease is a
// session-level Postgres advisory lock; all of a process's locks live on one
// dedicated connection (one session can hold many locks), so the number of
// database connections does not grow with the number of sources. When that
// connection drops, Postgres frees the locks and another replica can take
// over. A session's advisory locks are re-entrant, so an in-process set keeps
// two holders of this process apart too.
type Leaser struct {
	url string

	mu   sync.Mutex // guards conn, sess, held, prev and owed; a pgx.Conn is not concurrency-safe
	conn *pgx.Conn
	sess session
	held map[int64]bool
	// prev are the sessions of connections dropped while they may still
	// be alive on the server (a network cut the server has not noticed):
	// each keeps its locks until ended, so the next connect ends them.
	prev []session
	// owed are unlocks that failed on a live session (a statement timeout
	// under load): the lock may still be held, so the key is given back
	// before it is taken again, instead of dropping the connection and
	// every other lock with it.
	owed map[int64]bool
	// paying: a flush of owed is scheduled (ReleaseSoon).
	paying bool

	timeout   time.Duration // statementTimeout; tests shorten it
	unlockSQL string        // sqlUnlockAll; tests slow it down

	peers peerCache // the fleet members' sources, read again when they change (fleet.go)
}

// session identifies one lease connection: a backend pid is reused by
// Postgres, (pid, backend start) is not.
type session struct {
	pid     uint32
	started time.Time
}

// New returns a Leaser that connects to url when first used.
func New(url string) *Leaser {
	return &Leaser{url: url, held: map[int64]bool{}, owed: map[int64]bool{}, timeout: statementTimeout, unlockSQL: sqlUnlockAll}
}

// Lease is one held lease. It remembers the session that took it, so that
// after a reconnect (a new session that does not hold it) Check fails even
// though the Leaser is connected again.
type Lease struct {
	Name string
	key  int64
	sess session
	l    *Leaser
	once sync.Once
	// released: given up by this process (Check fails from then on, even
	// before the unlock reaches the server).
	released atomic.Bool
}

// Key maps a lease name to the advisory lock key space.
func Key(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte("tidemark lease: " + name))
	return int64(h.Sum64())
}

// connect (re)opens the lease connection; l.mu is held.
func (l *Leaser) connect(ctx context.Context) error {
	if l.conn != nil && !l.conn.IsClosed() {
		return nil
	}
	if l.conn != nil {
		l.drop() // closed under us: remember its session
	}
	// A new session holds none of the old locks: forget them.
	l.held = map[int64]bool{}
	l.owed = map[int64]bool{}
	cfg, err := pgx.ParseConfig(l.url)
	if err != nil {
		return fmt.Errorf("lease connection: %w", err)
	}
	// A statement whose context ends is cancelled on the server, and the
	// session goes on: by default pgx closes the connection instead, and
	// every lock of the process would go with it (one slow heartbeat
	// under load took a replica's every source away).
	// A server that does not answer the cancel within cancelWait is gone
	// (or black-holed): then the connection closes after all.
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: cancelWait}
	}
	// A server that accepts and never answers (black-holed) must not hold
	// the leaser's lock, and every caller behind it, for the kernel's
	// connect timeout over and over.
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = l.timeout
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		l.conn = nil
		return fmt.Errorf("lease connection: %w", err)
	}
	qctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	var s session
	if err := conn.QueryRow(qctx, `SELECT pg_backend_pid(), backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()`).
		Scan(&s.pid, &s.started); err != nil {
		conn.Close(context.Background())
		return fmt.Errorf("lease connection: identify session: %w", err)
	}
	// The server notices a peer gone silent (a cut cable, a crashed host)
	// by TCP keepalive: its default, two hours, is how long the dead
	// session's locks would keep every replica off its sources. Set per
	// session (a pooler may refuse them as startup parameters), one by
	// one (a server that refuses one keeps the others); no-ops on a Unix
	// socket, and a refusal only leaves the server's default.
	for _, set := range sqlKeepalives {
		_, _ = conn.Exec(qctx, set)
	}
	l.conn, l.sess = conn, s
	l.endPrevious(ctx)
	return nil
}

// sqlKeepalives: the server probes an idle lease session after 30 s and
// ends it after 3 unanswered probes 10 s apart, or after 60 s of unacked
// data.
var sqlKeepalives = []string{`SET tcp_keepalives_idle = 30`, `SET tcp_keepalives_interval = 10`,
	`SET tcp_keepalives_count = 3`, `SET tcp_user_timeout = 60000`}

// maxPrevious bounds the sessions remembered for endPrevious.
const maxPrevious = 8

// endPrevious ends the sessions of the connections dropped before this one
// that the server still runs, and waits (briefly) until they are gone with
// their locks: this process's own sources are then free for it to take
// again at once. A session is forgotten once gone; one that could not be
// ended (a role that may not signal it, no time left) is tried again at
// the next connect, and meanwhile left to the keepalives. l.mu is held.
func (l *Leaser) endPrevious(ctx context.Context) {
	if len(l.prev) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelWait)
	defer cancel()
	l.prev = slices.DeleteFunc(l.prev, func(p session) bool { return l.ended(ctx, p) })
}

// ended terminates session p if it still runs and reports whether it is
// gone; l.mu is held.
func (l *Leaser) ended(ctx context.Context, p session) bool {
	const alive = `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND backend_start = $2)`
	var running bool
	if err := l.conn.QueryRow(ctx, alive, int64(p.pid), p.started).Scan(&running); err != nil {
		return false
	}
	if !running {
		return true
	}
	var signalled bool
	if err := l.conn.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, int64(p.pid)).Scan(&signalled); err != nil || !signalled {
		return false
	}
	for ctx.Err() == nil {
		if err := l.conn.QueryRow(ctx, alive, int64(p.pid), p.started).Scan(&running); err == nil && !running {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// statementTimeout bounds one statement on the lease connection, and
// cancelWait how long past it the server has to cancel it.
const (
	statementTimeout = 10 * time.Second
	cancelWait       = 2 * time.Second
)

// statement returns the context of one statement on the lease connection:
// ctx, bounded by statementTimeout.
func (l *Leaser) statement(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, l.timeout)
}

// failed handles a statement's error on the lease connection; l.mu is held.
// A dead connection is dropped (its locks are gone). On a live one the
// statement was cancelled or refused and the session, with its locks,
// goes on.
func (l *Leaser) failed() {
	if l.conn != nil && l.conn.IsClosed() {
		l.drop()
	}
}

// drop closes a connection that failed; l.mu is held. Its session may
// live on at the server: the next connect ends it.
func (l *Leaser) drop() {
	if l.conn != nil {
		l.conn.Close(context.Background())
		if len(l.prev) == maxPrevious {
			l.prev = l.prev[1:]
		}
		l.prev = append(l.prev, l.sess)
	}
	l.conn = nil
	l.held = map[int64]bool{}
	l.owed = map[int64]bool{}
}

// owedKeys lists the unlocks owed; l.mu is held.
func (l *Leaser) owedKeys() []int64 {
	if len(l.owed) == 0 {
		return nil
	}
	keys := make([]int64, 0, len(l.owed))
	for k := range l.owed {
		keys = append(keys, k)
	}
	return keys
}

// payOwed retries the unlocks that failed on this session; l.mu is held.
// Those it cannot pay stay owed; a session that died meanwhile is dropped
// (l.conn is nil afterwards: check it).
func (l *Leaser) payOwed(ctx context.Context) {
	keys := l.owedKeys()
	if len(keys) == 0 {
		return
	}
	c, cancel := l.statement(ctx)
	defer cancel()
	if _, err := l.conn.Exec(c, l.unlockSQL, keys); err != nil {
		l.failed()
		return
	}
	clear(l.owed)
}

// TryAcquire takes the lease called name without waiting. It returns ErrBusy
// when someone else holds it.
func (l *Leaser) TryAcquire(ctx context.Context, name string) (*Lease, error) {
	return l.TryAcquireThen(ctx, name, nil)
}

// Read is a query run on the lease's session right after its lock was
// granted, in the same round trip: what a pass reads first (its cursors)
// costs no trip of its own. The lease's database must be the one read.
type Read struct {
	SQL  string
	Args []any
	Scan func(pgx.Rows) error // called only when the lock was granted
}

// TryAcquireThen is TryAcquire, and with then, runs then's query after the
// lock was granted. An error of the read gives the lease back.
func (l *Leaser) TryAcquireThen(ctx context.Context, name string, then *Read) (*Lease, error) {
	key := Key(name)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[key] && l.conn != nil && !l.conn.IsClosed() {
		return nil, ErrBusy
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var ok bool
	for attempt := 0; ; attempt++ {
		if err := l.connect(ctx); err != nil {
			return nil, err
		}
		if l.owed[key] {
			// Taking it now and paying later would unlock the new hold:
			// pay first.
			if l.payOwed(ctx); l.conn == nil {
				continue // the session died while paying: reconnect
			}
			if l.owed[key] {
				return nil, fmt.Errorf("take lease %q: its earlier release has not reached the server yet", name)
			}
		}
		// The other unlocks owed ride along (ReleaseSoon): one round trip.
		owed := l.owedKeys()
		c, cancel := l.statement(ctx)
		var err error
		ok, err = l.tryLock(c, key, owed, then)
		cancel()
		var re *readError
		if errors.As(err, &re) {
			for _, k := range owed {
				delete(l.owed, k)
			}
			if ok {
				l.unlockAll([]int64{key})
			}
			return nil, fmt.Errorf("take lease %q: %w", name, re.err)
		}
		if err == nil {
			for _, k := range owed {
				delete(l.owed, k)
			}
			break
		}
		if !l.conn.IsClosed() {
			// Cancelled on a live session: the lock may have been granted
			// just before. Give it back, or the session would hold a lock
			// nobody knows of and the source would have no owner.
			l.unlockAll([]int64{key})
			return nil, fmt.Errorf("take lease %q: %w", name, err)
		}
		// The connection died (e.g. a Postgres restart): reconnect once.
		l.drop()
		if attempt == 1 || ctx.Err() != nil {
			return nil, fmt.Errorf("take lease %q: %w", name, err)
		}
	}
	if !ok {
		return nil, ErrBusy
	}
	l.held[key] = true
	return &Lease{Name: name, key: key, sess: l.sess, l: l}, nil
}

// readError is the error of a Read that ran after its lock statement: the
// lock's outcome is known.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }

// tryLock tries key's lock, paying the owed unlocks, and runs then after it
// when it is granted: one round trip. l.mu is held.
func (l *Leaser) tryLock(ctx context.Context, key int64, owed []int64, then *Read) (bool, error) {
	lockSQL, args := "SELECT pg_try_advisory_lock($1), 0::bigint", []any{key}
	if len(owed) > 0 {
		lockSQL = `SELECT pg_try_advisory_lock($1), (SELECT count(*) FROM unnest($2::bigint[]) AS k WHERE pg_advisory_unlock(k))`
		args = append(args, owed)
	}
	var ok bool
	var unlocked int64
	if then == nil {
		err := l.conn.QueryRow(ctx, lockSQL, args...).Scan(&ok, &unlocked)
		return ok, err
	}
	b := &pgx.Batch{}
	b.Queue(lockSQL, args...)
	b.Queue(then.SQL, then.Args...)
	br := l.conn.SendBatch(ctx, b)
	if err := br.QueryRow().Scan(&ok, &unlocked); err != nil {
		_ = br.Close()
		return false, err
	}
	rows, err := br.Query()
	if err == nil && ok {
		err = then.Scan(rows)
	}
	rows.Close()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil && !l.conn.IsClosed() {
		return ok, &readError{err}
	}
	return ok, err
}

// acquireBatch bounds the locks one statement of TryAcquireMany tries.
const acquireBatch = 1000

// TryAcquireMany takes, without waiting, each of the leases called names
// that nobody else holds, a thousand per statement: a replica taking its
// share of thousands of sources at start makes a few round trips, not one
// a source. It returns the leases taken, by name; the others are busy. On
// an error the leases of the failed statement are given back (some may
// have been granted before it failed) and those taken before it are
// returned with the error.
func (l *Leaser) TryAcquireMany(ctx context.Context, names []string) (map[string]*Lease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]*Lease{}
	for len(names) > 0 {
		n := min(len(names), acquireBatch)
		batch := names[:n]
		names = names[n:]
		keys := make([]int64, 0, len(batch))
		byKey := map[int64]string{}
		for _, name := range batch {
			k := Key(name)
			if _, dup := byKey[k]; dup || (l.held[k] && l.conn != nil && !l.conn.IsClosed()) {
				continue // held here already: busy
			}
			byKey[k] = name
			keys = append(keys, k)
		}
		if len(keys) == 0 {
			continue
		}
		if err := l.connect(ctx); err != nil {
			return out, err
		}
		if l.payOwed(ctx); l.conn == nil {
			clear(out) // their session is gone
			return out, errors.New("take leases: the lease connection dropped")
		}
		keys = slices.DeleteFunc(keys, func(k int64) bool { return l.owed[k] })
		got, err := l.tryLocks(ctx, keys)
		if err != nil {
			if !l.conn.IsClosed() {
				l.unlockAll(keys)
			} else {
				l.drop()
			}
			if l.conn == nil {
				clear(out) // their session is gone
			}
			return out, fmt.Errorf("take %d leases: %w", len(keys), err)
		}
		for _, k := range got {
			l.held[k] = true
			out[byKey[k]] = &Lease{Name: byKey[k], key: k, sess: l.sess, l: l}
		}
	}
	return out, nil
}

// tryLocks tries the advisory locks on keys in one statement and returns
// those granted; l.mu is held.
func (l *Leaser) tryLocks(ctx context.Context, keys []int64) ([]int64, error) {
	c, cancel := l.statement(ctx)
	defer cancel()
	rows, err := l.conn.Query(c, `SELECT k FROM unnest($1::bigint[]) AS k WHERE pg_try_advisory_lock(k)`, keys)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// sqlUnlockAll gives up the session's locks on $1 (a key not held is a
// warning, not an error).
const sqlUnlockAll = `SELECT pg_advisory_unlock(k) FROM unnest($1::bigint[]) AS k`

// unlockAll gives up the session's locks on keys; l.mu is held. On a live
// session that fails to (a cancelled statement) the keys are owed; a dead
// one is dropped, and its locks go with it.
// The unlocks owed go along (a source handed over takes the pass lease
// its last pass gave up with ReleaseSoon with it).
func (l *Leaser) unlockAll(keys []int64) {
	keys = append(keys, l.owedKeys()...)
	ctx, cancel := l.statement(context.Background())
	defer cancel()
	if _, err := l.conn.Exec(ctx, l.unlockSQL, keys); err != nil {
		if l.failed(); l.conn != nil {
			for _, k := range keys {
				l.owed[k] = true
			}
		}
		return
	}
	clear(l.owed)
}

// Release gives the lease up. It is bounded: a black-holed connection must
// not wedge the leaser (an unlock that fails on a live session is owed and
// paid before the key is taken again; a dead session takes the lock with
// it). Releasing twice, or after the session died, is harmless.
func (h *Lease) Release() { h.release(false) }

// releaseDelay is how long a lease given up with ReleaseSoon may stay
// locked at the server when no other lease statement comes first.
const releaseDelay = time.Second

// ReleaseSoon gives the lease up like Release, without a round trip of
// its own: the unlock rides on this process's next lease statement, or is
// sent within releaseDelay. A daemon gives up a pass lease per source and
// tick; this halves the statements its lease connection runs. Until then
// another process finds the lease busy, as if the pass were still ending.
func (h *Lease) ReleaseSoon() { h.release(true) }

func (h *Lease) release(soon bool) {
	h.released.Store(true)
	h.once.Do(func() {
		l := h.l
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.conn == nil || l.conn.IsClosed() || l.sess != h.sess {
			return // that session, and its lock, are gone already
		}
		delete(l.held, h.key)
		if soon {
			l.owed[h.key] = true
			l.payLater(releaseDelay)
			return
		}
		l.unlockAll([]int64{h.key})
	})
}

// payLater pays the unlocks owed after d, unless a flush is pending
// already; l.mu is held.
func (l *Leaser) payLater(d time.Duration) {
	if l.paying {
		return
	}
	l.paying = true
	time.AfterFunc(d, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.paying = false
		if len(l.owed) == 0 || l.conn == nil || l.conn.IsClosed() {
			return
		}
		if l.payOwed(context.Background()); l.conn != nil && len(l.owed) > 0 {
			l.payLater(5 * releaseDelay) // the server is struggling: later
		}
	})
}

// Holds reports whether this process still holds the lease called name, as
// far as it knows without a round trip.
func (l *Leaser) Holds(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held[Key(name)] && l.conn != nil && !l.conn.IsClosed()
}

// Querier is what Check needs: a transaction, a pool or a connection.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// sqlHeld asks whether the session (pid, backend_start) that took a lease
// still runs. A session's advisory locks last until it ends or unlocks
// them, and only this process unlocks them (Release, which Check sees
// first), so a live session still holds the lock. pg_stat_get_activity(pid)
// reads one backend's entry; pg_locks would materialize every lock of the
// server (the lease connection holds one per owned source) at each cursor
// advance, backfill window and reconcile.
const sqlHeld = `
SELECT EXISTS (SELECT 1 FROM pg_stat_get_activity($1::int) a WHERE a.backend_start = $2)`

// Check is the fence: run inside the transaction that commits work done
// under the lease, it fails with ErrLeaseLost unless the session that took
// this lease still holds it. A reconnect does not fool it: the new session
// is another (pid, backend start).
func (h *Lease) Check(ctx context.Context, q Querier) error {
	if h.released.Load() {
		return fmt.Errorf("lease %q: released: %w", h.Name, ErrLeaseLost)
	}
	var ok bool
	if err := q.QueryRow(ctx, sqlHeld, int64(h.sess.pid), h.sess.started).Scan(&ok); err != nil {
		return fmt.Errorf("check lease %q: %w", h.Name, err)
	}
	if !ok {
		return fmt.Errorf("lease %q: %w", h.Name, ErrLeaseLost)
	}
	return nil
}

// Close drops the lease connection, freeing every lease.
func (l *Leaser) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drop()
}
