package cursor_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/tidemarkhq/tidemark/cursor"
)

// TestAdvanceProperty: whatever the sequence of Advance calls, each in a
// transaction that commits or rolls back, the stored high water is the
// maximum of the committed accepted targets, it never decreases, and a call
// fails with ErrBackward exactly when its target is behind it.
func TestAdvanceProperty(t *testing.T) {
	_, db, s := setup(t)
	ctx := context.Background()
	iteration := 0
	rapid.Check(t, func(rt *rapid.T) {
		iteration++
		resource := fmt.Sprintf("r%d", iteration) // a fresh cursor per case
		var hw time.Time                          // the model: zero = never synced
		steps := rapid.IntRange(1, 25).Draw(rt, "steps")
		for i := range steps {
			var to time.Time
			if rapid.IntRange(0, 19).Draw(rt, fmt.Sprintf("never%d", i)) > 0 { // 1 in 20: zero
				to = t0.Add(time.Duration(rapid.IntRange(-20, 20).Draw(rt, fmt.Sprintf("sec%d", i))) * time.Second).
					Add(time.Duration(rapid.IntRange(0, 1999).Draw(rt, fmt.Sprintf("ns%d", i))))
			}
			commit := rapid.IntRange(0, 3).Draw(rt, fmt.Sprintf("commit%d", i)) > 0
			want := to.Truncate(time.Microsecond)

			tx, err := db.Begin(ctx)
			if err != nil {
				rt.Fatal(err)
			}
			err = cursor.Advance(ctx, tx, "acme", resource, to)
			if commit {
				if cerr := tx.Commit(ctx); cerr != nil {
					rt.Fatal(cerr)
				}
			} else {
				_ = tx.Rollback(ctx)
			}

			backward := want.Before(hw)
			switch {
			case backward && !errors.Is(err, cursor.ErrBackward):
				rt.Fatalf("step %d: advance from %v to %v: got %v, want ErrBackward", i, hw, to, err)
			case !backward && err != nil:
				rt.Fatalf("step %d: advance from %v to %v: %v", i, hw, to, err)
			}
			if err == nil && commit && want.After(hw) {
				hw = want
			}

			c, err := s.Load(ctx, "acme", resource)
			if errors.Is(err, cursor.ErrNotFound) && hw.IsZero() {
				continue // nothing committed yet
			}
			if err != nil {
				rt.Fatalf("step %d: load: %v", i, err)
			}
			if !c.HighWater.Equal(hw) {
				rt.Fatalf("step %d: high water %v, want %v (max of committed targets)", i, c.HighWater, hw)
			}
		}
	})
}
