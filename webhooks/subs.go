package webhooks

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Subscription is a provider subscription as stored.
type Subscription struct {
	Source         string
	ID             string
	URL            string
	Events         []string
	CreatedAt      time.Time
	ValidatedAt    *time.Time
	LastDeliveryAt *time.Time
	Deliveries     int64
	sealed         []byte
}

const (
	saveSub = `INSERT INTO webhook_subscriptions (source, subscription_id, url, events, secret_enc, validated_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (source, subscription_id) DO UPDATE SET url = $3, events = $4, secret_enc = $5,
			validated_at = coalesce(webhook_subscriptions.validated_at, $6)`
	renameSub   = `UPDATE webhook_subscriptions SET subscription_id = $3 WHERE source = $1 AND subscription_id = $2`
	deleteSub   = `DELETE FROM webhook_subscriptions WHERE source = $1 AND subscription_id = $2`
	validateSub = `UPDATE webhook_subscriptions SET validated_at = coalesce(validated_at, $3) WHERE source = $1 AND subscription_id = $2`
	listSubs    = `SELECT source, subscription_id, url, events, created_at, validated_at, last_delivery_at, deliveries, secret_enc
		FROM webhook_subscriptions WHERE ($1 = '' OR source = $1) ORDER BY source, subscription_id`
	listConflicts = `SELECT id, source, key, seen_at, stored_hash, received_hash FROM webhook_conflicts
		WHERE ($1 = '' OR source = $1) ORDER BY id DESC LIMIT $2`
	lastBySource = `SELECT source, max(last_delivery_at) FROM webhook_subscriptions WHERE last_delivery_at IS NOT NULL GROUP BY source`
)

// SaveSubscription stores a subscription with its secret sealed.
func (s *Store) SaveSubscription(ctx context.Context, sub Subscription, secret string, seal *Sealer) error {
	_, err := s.Pool.Exec(ctx, saveSub, sub.Source, sub.ID, sub.URL, sub.Events, seal.Seal(secret), sub.ValidatedAt)
	if err != nil {
		return fmt.Errorf("store webhook subscription of %s: %w", sub.Source, err)
	}
	return nil
}

// RenameSubscription gives a subscription stored before the provider named
// it (so that its first PING already verifies) the provider's id.
func (s *Store) RenameSubscription(ctx context.Context, source, from, to string) error {
	if _, err := s.Pool.Exec(ctx, renameSub, source, from, to); err != nil {
		return fmt.Errorf("name webhook subscription of %s: %w", source, err)
	}
	return nil
}

// DeleteSubscription forgets a stored subscription.
func (s *Store) DeleteSubscription(ctx context.Context, source, id string) error {
	if _, err := s.Pool.Exec(ctx, deleteSub, source, id); err != nil {
		return fmt.Errorf("forget webhook subscription of %s: %w", source, err)
	}
	return nil
}

// Validated records that a subscription answered the provider's
// validation.
func (s *Store) Validated(ctx context.Context, source, id string) error {
	_, err := s.Pool.Exec(ctx, validateSub, source, id, s.now())
	return err
}

// Subscriptions lists the stored subscriptions (of one source, or all).
func (s *Store) Subscriptions(ctx context.Context, source string) ([]Subscription, error) {
	rows, err := s.Pool.Query(ctx, listSubs, source)
	if err != nil {
		return nil, fmt.Errorf("read webhook subscriptions: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Subscription, error) {
		var v Subscription
		err := r.Scan(&v.Source, &v.ID, &v.URL, &v.Events, &v.CreatedAt, &v.ValidatedAt, &v.LastDeliveryAt, &v.Deliveries, &v.sealed)
		return v, err
	})
}

// Secret decrypts a stored subscription's secret.
func (v Subscription) Secret(seal *Sealer) (string, error) { return seal.Open(v.sealed) }

// ConflictRow is a recorded conflict.
type ConflictRow struct {
	ID           int64     `json:"id"`
	Source       string    `json:"source"`
	Key          string    `json:"key"`
	SeenAt       time.Time `json:"seen_at"`
	StoredHash   []byte    `json:"stored_hash"`
	ReceivedHash []byte    `json:"received_hash"`
}

// Conflicts lists the newest recorded conflicts (of one source, or all).
func (s *Store) Conflicts(ctx context.Context, source string, limit int) ([]ConflictRow, error) {
	rows, err := s.Pool.Query(ctx, listConflicts, source, limit)
	if err != nil {
		return nil, fmt.Errorf("read webhook conflicts: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[ConflictRow])
}

// LastDelivery returns, per source, when its last signed delivery arrived.
func LastDelivery(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) (map[string]time.Time, error) {
	rows, err := q.Query(ctx, lastBySource)
	if err != nil {
		return nil, fmt.Errorf("read last webhook deliveries: %w", err)
	}
	out := map[string]time.Time{}
	_, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct{}, error) {
		var s string
		var t time.Time
		err := r.Scan(&s, &t)
		out[s] = t
		return struct{}{}, err
	})
	return out, err
}
