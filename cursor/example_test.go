package cursor_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/tidemarkhq/tidemark/cursor"
)

// Advance refuses to move a cursor back; the poller tells that apart from a
// database failure with errors.Is / errors.As. (Advance itself needs a
// database, so this example builds the error it returns.)
func ExampleBackwardError() {
	var err error = &cursor.BackwardError{
		Source:   "acme",
		Resource: "time_entries",
		From:     time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		To:       time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC),
	}
	err = fmt.Errorf("pass 42: %w", err)

	var be *cursor.BackwardError
	fmt.Println(errors.Is(err, cursor.ErrBackward), errors.As(err, &be), be.From.Sub(be.To))
	fmt.Println(err)
	// Output:
	// true true 1h0m0s
	// pass 42: cursor acme/time_entries: refusing to move high water backward from 2026-03-01T12:00:00Z to 2026-03-01T11:00:00Z; use `tidemark cursor set` to move it back on purpose
}
