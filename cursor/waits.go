package cursor

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Wait says a source is waiting on its provider until a time.
type Wait struct {
	Source string
	Until  time.Time
	Reason string // "quota" (402) or "retry_after" (429)
}

const (
	sqlSetWait = `
INSERT INTO source_waits (source, until, reason) VALUES ($1, $2, $3)
ON CONFLICT (source) DO UPDATE SET until = excluded.until, reason = excluded.reason, updated_at = now()`
	sqlClearWait = `DELETE FROM source_waits WHERE source = $1`
	sqlWaits     = `SELECT source, until, reason FROM source_waits WHERE ($1 = '' OR source = $1) ORDER BY source`
)

// SetWait records that source waits until a time.
func SetWait(ctx context.Context, db DB, w Wait) error {
	if _, err := db.Exec(ctx, sqlSetWait, w.Source, w.Until.UTC(), w.Reason); err != nil {
		return fmt.Errorf("record wait of %s: %w", w.Source, err)
	}
	return nil
}

// ClearWait records that source answers again.
func ClearWait(ctx context.Context, db DB, source string) error {
	if _, err := db.Exec(ctx, sqlClearWait, source); err != nil {
		return fmt.Errorf("clear wait of %s: %w", source, err)
	}
	return nil
}

// Waits lists the recorded waits (of one source when source is non-empty).
func (s *Store) Waits(ctx context.Context, source string) ([]Wait, error) {
	return collect(ctx, s.db, "waits", scanWait, sqlWaits, source)
}

func scanWait(r pgx.CollectableRow) (Wait, error) {
	var w Wait
	err := r.Scan(&w.Source, &w.Until, &w.Reason)
	w.Until = w.Until.UTC()
	return w, err
}
