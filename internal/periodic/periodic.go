// Package periodic owns the life of a maintenance job that runs at start
// and then on a ticker until stopped (event retention, run retention): its
// goroutine, its Start and its bounded Stop.
package periodic

import (
	"context"
	"sync"
	"time"
)

// Loop runs a job now and then every interval, one run at a time, until Stop.
// The zero Loop is ready to Start.
type Loop struct {
	mu   sync.Mutex
	stop context.CancelFunc
	done chan struct{}
}

// Start runs job at once and then every interval until ctx ends or Stop.
func (l *Loop) Start(ctx context.Context, interval time.Duration, job func(context.Context)) {
	ctx, cancel := context.WithCancel(ctx)
	l.mu.Lock()
	l.stop, l.done = cancel, make(chan struct{})
	l.mu.Unlock()
	go func() {
		defer close(l.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			job(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Stop cancels the job in hand and waits for it, at most until ctx ends.
// Stopping a Loop that never started is harmless.
func (l *Loop) Stop(ctx context.Context) {
	l.mu.Lock()
	stop, done := l.stop, l.done
	l.mu.Unlock()
	if stop == nil {
		return
	}
	stop()
	select {
	case <-done:
	case <-ctx.Done():
	}
}
