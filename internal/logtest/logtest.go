// Package logtest owns the log sinks tests read back: a buffer that a
// daemon's, a poller's or a client's goroutines may write while the test
// reads what was logged so far. It is for tests only.
package logtest

import (
	"strings"
	"sync"
)

// Buffer is an io.Writer safe for concurrent writes and reads. Its zero
// value is ready to use.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
