// Package webhooks owns provider webhook intake (issue 14): signature
// checks, the event key store (webhook_events: insert first, a unique key
// refuses a repeat), conflicts for a person, and the triggers that make the
// owning daemon run a targeted incremental pass. It knows nothing of the
// write rule: the pass it triggers writes through the versioned upsert, so
// a replayed or late event is harmless. Polling stays the source of truth.
package webhooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidemarkhq/tidemark/clients"
)

// Outcome is what became of a delivery.
type Outcome string

// Outcomes (the metric's label values).
const (
	Accepted      Outcome = "accepted"       // first delivery of the key: a pass is triggered
	Duplicate     Outcome = "duplicate"      // same key, same payload: nothing new
	Conflict      Outcome = "conflict"       // same key, another payload: recorded, not processed
	ExpiredReplay Outcome = "expired_replay" // the key was seen before its expiry: triggered again
	Ignored       Outcome = "ignored"        // an event for nothing this source mirrors
	BadSignature  Outcome = "bad_signature"  // 401, nothing changed
	Ping          Outcome = "ping"           // Toggl's validation event, answered
	TooLarge      Outcome = "too_large"      // 413
	Invalid       Outcome = "invalid"        // signed but not an event we can read: 400
	Unavailable   Outcome = "unavailable"    // the store could not answer in time: 503, the provider resends
)

// Channel is the NOTIFY channel a committed trigger wakes the owners on.
const Channel = "tidemark_webhooks"

// Store is the key store, the conflicts, the triggers and the
// subscriptions, in Postgres.
type Store struct {
	Pool *pgxpool.Pool
	// Keep is how long a key is remembered (webhooks.keep).
	Keep time.Duration
	// Now is the clock (tests move it); default time.Now.
	Now func() time.Time

	// beforeCommit, when set, runs inside the claim's transaction just
	// before it commits (the kill -9 test stops the process there).
	beforeCommit func(context.Context)
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Delivery is one verified event.
type Delivery struct {
	Source string
	// Key is the provider's stable event id, or one derived from the change.
	Key string
	// Resource is the mirrored resource the event is about ("" when the
	// source does not mirror it).
	Resource clients.Resource
	// Hash is SHA-256 of the payload in canonical JSON.
	Hash []byte
	// Subscription is the subscription whose secret signed it.
	Subscription string
}

const (
	insertEvent = `INSERT INTO webhook_events (source, key, resource, first_seen_at, expires_at, payload_hash, outcome)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (source, key) DO NOTHING`
	lockEvent   = `SELECT payload_hash, expires_at FROM webhook_events WHERE source = $1 AND key = $2 FOR UPDATE`
	renewEvent  = `UPDATE webhook_events SET resource = $3, first_seen_at = $4, expires_at = $5, payload_hash = $6, outcome = $7 WHERE source = $1 AND key = $2`
	addConflict = `INSERT INTO webhook_conflicts (source, key, seen_at, stored_hash, received_hash) VALUES ($1, $2, $3, $4, $5)`
	addTrigger  = `INSERT INTO webhook_triggers (source, resource, first_event_at) VALUES ($1, $2, $3)
		ON CONFLICT (source, resource) DO UPDATE SET seq = webhook_triggers.seq + 1, events = webhook_triggers.events + 1`
	notify     = `SELECT pg_notify($1, $2)`
	delivered  = `UPDATE webhook_subscriptions SET last_delivery_at = $3, deliveries = deliveries + 1 WHERE source = $1 AND subscription_id = $2`
	purgeSQL   = `DELETE FROM webhook_events WHERE expires_at < $1`
	pendingSQL = `SELECT source, resource, seq, events, first_event_at FROM webhook_triggers ORDER BY first_event_at`
	doneSQL    = `DELETE FROM webhook_triggers WHERE source = $1 AND resource = $2 AND seq = $3`
)

// Claim records a verified delivery and, when it is the first of its key
// (or a replay after the key expired), a trigger for its source and
// resource, in one transaction: a crash anywhere before the commit leaves
// neither (the provider resends, and the resend is then the first), and
// after it both. first_seen_at is never refreshed by a repeat.
func (s *Store) Claim(ctx context.Context, d Delivery) (Outcome, error) {
	if d.Key == "" || d.Source == "" {
		return "", errors.New("webhooks: claim without a source or key")
	}
	now := s.now()
	expires := now.Add(s.Keep)
	var out Outcome
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		outcome := Accepted
		if d.Resource == "" {
			outcome = Ignored
		}
		tag, err := tx.Exec(ctx, insertEvent, d.Source, d.Key, string(d.Resource), now, expires, d.Hash, string(outcome))
		if err != nil {
			return fmt.Errorf("insert event key: %w", err)
		}
		if tag.RowsAffected() == 0 {
			var stored []byte
			var until time.Time
			if err := tx.QueryRow(ctx, lockEvent, d.Source, d.Key).Scan(&stored, &until); err != nil {
				return fmt.Errorf("read event key: %w", err)
			}
			switch {
			case !now.Before(until):
				// Past its expiry the key is forgotten: this is a new life
				// of it, and the pass it triggers is harmless.
				if outcome == Accepted {
					outcome = ExpiredReplay
				}
				if _, err := tx.Exec(ctx, renewEvent, d.Source, d.Key, string(d.Resource), now, expires, d.Hash, string(outcome)); err != nil {
					return fmt.Errorf("renew expired key: %w", err)
				}
			case bytes.Equal(stored, d.Hash):
				outcome = Duplicate
			default:
				outcome = Conflict
				if _, err := tx.Exec(ctx, addConflict, d.Source, d.Key, now, stored, d.Hash); err != nil {
					return fmt.Errorf("record conflict: %w", err)
				}
			}
		}
		if outcome == Accepted || outcome == ExpiredReplay {
			if _, err := tx.Exec(ctx, addTrigger, d.Source, string(d.Resource), now); err != nil {
				return fmt.Errorf("record trigger: %w", err)
			}
			if _, err := tx.Exec(ctx, notify, Channel, d.Source); err != nil {
				return fmt.Errorf("notify: %w", err)
			}
		}
		if d.Subscription != "" {
			if _, err := tx.Exec(ctx, delivered, d.Source, d.Subscription, now); err != nil {
				return fmt.Errorf("record delivery: %w", err)
			}
		}
		if s.beforeCommit != nil {
			s.beforeCommit(ctx)
		}
		out = outcome
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("webhooks: source %s: %w", d.Source, err)
	}
	return out, nil
}

// Purge forgets keys that expired more than grace ago (kept that long so a
// replay after expiry is still recognised as one).
func (s *Store) Purge(ctx context.Context, grace time.Duration) (int64, error) {
	tag, err := s.Pool.Exec(ctx, purgeSQL, s.now().Add(-grace))
	if err != nil {
		return 0, fmt.Errorf("purge expired webhook keys: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Trigger is a pending targeted pass.
type Trigger struct {
	Source   string
	Resource clients.Resource
	// Seq changes with every event; Done deletes the row only if it has
	// not.
	Seq    int64
	Events int64
	// FirstEventAt is when the oldest waiting event arrived.
	FirstEventAt time.Time
}

// Pending lists the triggers waiting for a pass, oldest first.
func (s *Store) Pending(ctx context.Context) ([]Trigger, error) {
	rows, err := s.Pool.Query(ctx, pendingSQL)
	if err != nil {
		return nil, fmt.Errorf("read webhook triggers: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Trigger, error) {
		var t Trigger
		var res string
		err := r.Scan(&t.Source, &res, &t.Seq, &t.Events, &t.FirstEventAt)
		t.Resource = clients.Resource(res)
		return t, err
	})
}

// Done removes a trigger after its pass, unless an event came meanwhile:
// then it stays, and the next pass takes that event. It reports whether
// the row went.
func (s *Store) Done(ctx context.Context, t Trigger) (bool, error) {
	tag, err := s.Pool.Exec(ctx, doneSQL, t.Source, string(t.Resource), t.Seq)
	if err != nil {
		return false, fmt.Errorf("clear webhook trigger %s/%s: %w", t.Source, t.Resource, err)
	}
	return tag.RowsAffected() == 1, nil
}
