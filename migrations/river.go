package migrations

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverLockID serializes River's migrator across processes, as goose's
// locker does ours: two `tidemark migrate` at once both succeed.
const riverLockID int64 = 0x7269_7665_725f_6d67 // "river_mg"

// upRiver applies River's own migrations (its job tables, used for the
// change feed's webhook deliveries, issue 13) through River's migrator: River
// owns that schema and its upgrades, so we never copy its SQL.
func upRiver(ctx context.Context, url string) error {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return fmt.Errorf("river migrations: connect: %w", err)
	}
	defer pool.Close()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("river migrations: connect: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, riverLockID); err != nil {
		return fmt.Errorf("river migrations: lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, riverLockID) //nolint:errcheck // the session ends anyway
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	return nil
}
