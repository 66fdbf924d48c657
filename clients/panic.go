package clients

import (
	"fmt"
	"runtime/debug"
)

// PanicError is a panic recovered in a source's goroutine (a pass, a
// listing's read-ahead fetch, a backfill): the pass it ran in fails with
// it, naming where, and every other source goes on. Stack is where it
// happened, for the log.
type PanicError struct {
	Where string
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("%s: panic: %v", e.Where, e.Value) }

// Recovered turns a value from recover() into a PanicError (nil for nil).
// Call it directly in the deferred function, so that the stack is the
// panicking goroutine's.
func Recovered(where string, v any) error {
	if v == nil {
		return nil
	}
	return &PanicError{Where: where, Value: v, Stack: debug.Stack()}
}
