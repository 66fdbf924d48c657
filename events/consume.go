package events

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// Handler is a consumer's effect for one event. It runs in tx, the
// transaction that also moves the consumer's position past the event: a
// write to the same database made through tx happens exactly once. An error
// rolls both back; the event is offered again after a back-off.
type Handler func(ctx context.Context, tx pgx.Tx, ev Event) error

// BehindHorizonError says that retention deleted events a consumer had not
// acknowledged: it missed changes, and only the mirror tables still hold them.
type BehindHorizonError struct {
	Consumer      string
	Position      int64 // the consumer's last acknowledged seq
	PrunedThrough int64 // every event up to this seq is gone
}

func (e *BehindHorizonError) Error() string {
	return fmt.Sprintf("consumer %q is behind the retention horizon: it acknowledged up to seq %d, but events through seq %d were deleted; "+
		"it missed changes: resynchronize it from the mirror tables, then move it to the head of the feed with `tidemark events reset --consumer %s --yes`",
		e.Consumer, e.Position, e.PrunedThrough, e.Consumer)
}

// DisabledError says that a consumer was disabled (a webhook endpoint
// answered 410 Gone); `tidemark events reset --enable` turns it back on.
type DisabledError struct{ Consumer, Note string }

func (e *DisabledError) Error() string {
	return fmt.Sprintf("consumer %q is disabled: %s", e.Consumer, e.Note)
}

// ErrBusy is returned by Drain when another process holds the consumer.
var ErrBusy = errors.New("another process is consuming under this name")

// ConsumeOption tunes Consume and Drain.
type ConsumeOption func(*consumeOptions)

type consumeOptions struct {
	poll       time.Duration
	minBackoff time.Duration
	maxBackoff time.Duration
	log        zerolog.Logger
}

// PollEvery sets how often a consumer looks for events when no NOTIFY
// arrives (default 5 s): the fallback for lost notifications.
func PollEvery(d time.Duration) ConsumeOption { return func(o *consumeOptions) { o.poll = d } }

// Backoff sets the first and the longest wait after a Handler error
// (default 100 ms, doubling with jitter, up to 1 min).
func Backoff(first, max time.Duration) ConsumeOption {
	return func(o *consumeOptions) { o.minBackoff, o.maxBackoff = first, max }
}

// Logger sets the logger (default: none).
func Logger(l zerolog.Logger) ConsumeOption { return func(o *consumeOptions) { o.log = l } }

func buildOptions(opts []ConsumeOption) consumeOptions {
	o := consumeOptions{poll: 5 * time.Second, minBackoff: 100 * time.Millisecond, maxBackoff: time.Minute, log: zerolog.Nop()}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Consume runs fn for every event after the consumer's position, in seq
// order, each in the transaction that acknowledges it, until ctx ends. It
// wakes up on NOTIFY and polls as a fallback. One process at a time
// consumes a name: Consume waits for the name's advisory lock, so a second
// process is a standby. It returns ctx's error, a *BehindHorizonError or a
// *DisabledError; database errors and fn errors are retried with back-off.
// A new name starts at the oldest event still kept.
func Consume(ctx context.Context, pool *pgxpool.Pool, name string, fn Handler, opts ...ConsumeOption) error {
	o := buildOptions(opts)
	log := o.log.With().Str("consumer", name).Logger()
	wait := o.minBackoff
	for {
		err := consumeConn(ctx, pool, name, fn, &o, log)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if _, ok := errors.AsType[*BehindHorizonError](err); ok {
			return err
		}
		if _, ok := errors.AsType[*DisabledError](err); ok {
			return err
		}
		log.Warn().Err(err).Dur("retry_in", wait).Msg("consumer connection failed")
		if !sleep(ctx, jitter(wait)) {
			return ctx.Err()
		}
		wait = min(2*wait, o.maxBackoff)
	}
}

// consumeConn consumes on one connection until an error.
func consumeConn(ctx context.Context, pool *pgxpool.Pool, name string, fn Handler, o *consumeOptions, log zerolog.Logger) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection leaves with its lock and LISTEN: it goes back to the
	// pool clean, or is closed.
	defer release(conn)
	for {
		got, err := tryLock(ctx, conn, name)
		if err != nil {
			return err
		}
		if got {
			break
		}
		log.Debug().Msg("consumer held by another process; waiting")
		if !sleep(ctx, o.poll) {
			return ctx.Err()
		}
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{Channel}.Sanitize()); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	for {
		if _, err := drainConn(ctx, conn, name, fn, o, log, 0); err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, o.poll)
		_, err := conn.Conn().WaitForNotification(wctx)
		cancel()
		if err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("wait for notification: %w", err)
		}
	}
}

// Drain runs fn for the events after the consumer's position, as Consume
// does, and returns when it has caught up (or after limit events, if
// limit > 0) with how many it acknowledged. It returns ErrBusy when another
// process holds the name.
func Drain(ctx context.Context, pool *pgxpool.Pool, name string, fn Handler, limit int, opts ...ConsumeOption) (int, error) {
	o := buildOptions(opts)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer release(conn)
	got, err := tryLock(ctx, conn, name)
	if err != nil {
		return 0, err
	}
	if !got {
		return 0, fmt.Errorf("consumer %q: %w", name, ErrBusy)
	}
	return drainConn(ctx, conn, name, fn, &o, o.log.With().Str("consumer", name).Logger(), limit)
}

func release(conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := conn.Exec(ctx, "UNLISTEN *; SELECT pg_advisory_unlock_all()"); err != nil {
		_ = conn.Conn().Close(ctx)
	}
	conn.Release()
}

// lockKey is the advisory lock of a consumer name.
func lockKey(name string) int64 {
	h := sha256.Sum256([]byte("tidemark events consumer\x00" + name))
	return int64(binary.BigEndian.Uint64(h[:8]))
}

func tryLock(ctx context.Context, conn *pgxpool.Conn, name string) (bool, error) {
	if name == "" {
		return false, errors.New("consumer name is empty")
	}
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, lockKey(name)).Scan(&got); err != nil {
		return false, fmt.Errorf("lock consumer %q: %w", name, err)
	}
	if got {
		// A new name starts at the oldest event kept.
		if _, err := conn.Exec(ctx, `INSERT INTO event_consumers (name, position)
SELECT $1, pruned_through FROM event_horizon ON CONFLICT (name) DO NOTHING`, name); err != nil {
			return false, fmt.Errorf("register consumer %q: %w", name, err)
		}
	}
	return got, nil
}

// drainConn handles events one per transaction until none is left (or
// limit is reached). A Handler error rolls back and retries the same event
// after a jittered, doubling back-off.
func drainConn(ctx context.Context, conn *pgxpool.Conn, name string, fn Handler, o *consumeOptions, log zerolog.Logger, limit int) (int, error) {
	n := 0
	wait := o.minBackoff
	for limit <= 0 || n < limit {
		done, err := step(ctx, conn, name, fn)
		if hErr, ok := errors.AsType[*handlerError](err); ok {
			log.Warn().Err(hErr.err).Str("event_id", hErr.ev.ID).Int64("seq", hErr.ev.Seq).
				Dur("retry_in", wait).Msg("consumer failed on an event; position kept, retrying")
			if !sleep(ctx, jitter(wait)) {
				return n, ctx.Err()
			}
			wait = min(2*wait, o.maxBackoff)
			continue
		}
		if err != nil {
			return n, err
		}
		if done {
			return n, nil
		}
		n++
		wait = o.minBackoff
	}
	return n, nil
}

type handlerError struct {
	ev  Event
	err error
}

func (e *handlerError) Error() string { return e.err.Error() }

// step handles the next event in one transaction; done when there is none.
func step(ctx context.Context, conn *pgxpool.Conn, name string, fn Handler) (done bool, err error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var pos, pruned int64
	var status string
	var note *string
	// The horizon row is read under a share lock: a prune waits for this
	// transaction, so its deletes cannot land between the check and the read.
	err = tx.QueryRow(ctx, `SELECT c.position, c.status, c.status_note, h.pruned_through
FROM event_consumers c, event_horizon h WHERE c.name = $1 FOR UPDATE OF c FOR SHARE OF h`, name).Scan(&pos, &status, &note, &pruned)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("consumer %q is not registered", name)
	}
	if err != nil {
		return false, fmt.Errorf("read consumer %q: %w", name, err)
	}
	if status != "active" {
		return false, &DisabledError{Consumer: name, Note: deref(note)}
	}
	if pos < pruned {
		return false, &BehindHorizonError{Consumer: name, Position: pos, PrunedThrough: pruned}
	}
	rows, err := tx.Query(ctx, selectSQL+` WHERE seq > $1 ORDER BY seq LIMIT 1`, pos)
	if err != nil {
		return false, fmt.Errorf("read events: %w", err)
	}
	evs, err := pgx.CollectRows(rows, scanEvent)
	if err != nil {
		return false, fmt.Errorf("read events: %w", err)
	}
	if len(evs) == 0 {
		return true, nil
	}
	ev := evs[0]
	if err := fn(ctx, tx, ev); err != nil {
		return false, &handlerError{ev: ev, err: err}
	}
	if _, err := tx.Exec(ctx, `UPDATE event_consumers SET position = $2, updated_at = now() WHERE name = $1`, name, ev.Seq); err != nil {
		return false, fmt.Errorf("move consumer %q: %w", name, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("commit consumer %q at seq %d: %w", name, ev.Seq, err)
	}
	return false, nil
}

const selectSQL = `SELECT seq, event_id, source, resource, record_id, kind, version, content_hash, recorded_at FROM events`

func scanEvent(row pgx.CollectableRow) (Event, error) {
	var e Event
	var id pgtype.UUID
	var hash []byte
	if err := row.Scan(&e.Seq, &id, &e.Source, &e.Resource, &e.RecordID, &e.Kind, &e.Version, &hash, &e.RecordedAt); err != nil {
		return e, err
	}
	e.ID = FormatID(id.Bytes)
	e.Hash = hex.EncodeToString(hash)
	return e, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func jitter(d time.Duration) time.Duration {
	return d/2 + time.Duration(rand.Int64N(int64(d)/2+1))
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
