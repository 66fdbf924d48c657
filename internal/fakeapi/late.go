package fakeapi

import "time"

// Late holds writes until they become visible, as a replica lagging behind
// or a long transaction would: a write waits until its time, and a later
// write of the same key (a record) waits for an earlier one, so that the
// writes of a record become visible in the order they were made. The
// dialect's store owns it under its own lock and applies what comes due.
type Late[K comparable, V any] struct {
	Delays
	ops []lateOp[K, V]
}

// Delays decides which writes are late and by how much.
type Delays struct {
	// Delay is how long a late write waits (0: none is late).
	Delay time.Duration
	// Every, when above 1, makes only every Every-th write late (the others
	// are visible at once), like a few long transactions among quick ones.
	Every int

	writes int
}

type lateOp[K comparable, V any] struct {
	at  time.Time // visible from then
	key K
	val V
}

// Next counts a write and returns how long it is to wait: Delay, or 0 for
// the writes Every lets through.
func (d *Delays) Next() time.Duration {
	if d.Delay <= 0 {
		return 0
	}
	d.writes++
	if d.Every <= 1 || d.writes%d.Every == 0 {
		return d.Delay
	}
	return 0
}

// Add queues val for key, visible from at (zero: at once unless an
// earlier write of key still waits), and applies what is due by now.
func (l *Late[K, V]) Add(key K, at time.Time, val V, now time.Time, apply func(K, V)) {
	l.ops = append(l.ops, lateOp[K, V]{at, key, val})
	l.Flush(now, apply)
}

// Flush applies the writes due by now, in the order they were made.
func (l *Late[K, V]) Flush(now time.Time, apply func(K, V)) {
	if len(l.ops) == 0 {
		return
	}
	keep := l.ops[:0]
	blocked := map[K]bool{}
	for _, op := range l.ops {
		if blocked[op.key] || op.at.After(now) {
			blocked[op.key] = true
			keep = append(keep, op)
			continue
		}
		apply(op.key, op.val)
	}
	clear(l.ops[len(keep):])
	l.ops = keep
}

// Len returns how many writes wait.
func (l *Late[K, V]) Len() int { return len(l.ops) }

// Last returns the latest waiting write of key.
func (l *Late[K, V]) Last(key K) (V, bool) {
	for i := len(l.ops) - 1; i >= 0; i-- {
		if l.ops[i].key == key {
			return l.ops[i].val, true
		}
	}
	var zero V
	return zero, false
}
