package cursor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemarkhq/tidemark/cursor"
)

// A pass whose fence passed and whose lease is lost right after (the
// operator takes it and rewinds the cursor) must not advance over the
// rewind: the operator's change applies after the pass's commit, never
// before it (issue 23, item 11).
func TestAdvanceFencedNeverOverwritesARewind(t *testing.T) {
	ctx, pool, s := setup(t)
	if err := cursor.Advance(ctx, pool, "acme", "time_entries", t0); err != nil {
		t.Fatal(err)
	}
	rewind := t0.Add(-24 * time.Hour)
	setDone := make(chan error, 1)
	// The fence passes (the lease was held at the check); then the lease
	// is lost and the operator, who now holds it, sets the cursor back.
	// The fence returns once the operator's change committed or waits.
	lostAfterCheck := func(ctx context.Context, tx pgx.Tx) error {
		go func() {
			_, err := s.Set(context.WithoutCancel(ctx), cursor.SetParams{Source: "acme", Resource: "time_entries", To: rewind, Actor: "op@test"})
			setDone <- err
		}()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case err := <-setDone:
				setDone <- err
				return nil
			default:
			}
			var waiting bool
			if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
				WHERE NOT l.granted AND a.datname = current_database())`).Scan(&waiting); err != nil {
				return err
			}
			if waiting {
				return nil
			}
			time.Sleep(10 * time.Millisecond)
		}
		return errors.New("the operator's set neither committed nor waited")
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return cursor.AdvanceFenced(ctx, tx, lostAfterCheck, "acme", "time_entries", t0.Add(time.Hour))
	}); err != nil {
		t.Fatal(err)
	}
	if err := <-setDone; err != nil {
		t.Fatal(err)
	}
	if got := mustLoad(t, s, "acme", "time_entries").HighWater; !got.Equal(rewind) {
		t.Fatalf("high water %s after the operator's rewind to %s: the old pass advanced over it", got, rewind)
	}
}
