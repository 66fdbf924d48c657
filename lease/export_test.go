package lease

import (
	"context"
	"time"
)

// SlowUnlocks makes l's unlocks sleep past a short statement timeout, so
// that they are cancelled on a live session, before unlocking (done: false)
// or after (done: true); restore undoes it.
func SlowUnlocks(l *Leaser, timeout time.Duration, done bool) (restore func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.timeout, l.unlockSQL = timeout, `SELECT pg_sleep(30), pg_advisory_unlock(k) FROM unnest($1::bigint[]) AS k`
	if done {
		l.unlockSQL = `SELECT pg_advisory_unlock(k), pg_sleep(30) FROM unnest($1::bigint[]) AS k`
	}
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.timeout, l.unlockSQL = statementTimeout, sqlUnlockAll
	}
}

// Setting shows a setting of l's lease session.
func Setting(l *Leaser, name string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var v string
	err := l.conn.QueryRow(context.Background(), "SELECT current_setting($1)", name).Scan(&v)
	return v, err
}

// Timeout sets l's statement (and connect) timeout.
func Timeout(l *Leaser, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.timeout = d
}
