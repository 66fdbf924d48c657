package fakeapi

import (
	"sync"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
)

// Late is a fake store's lock and its writes not yet visible, as a replica
// lagging behind or a long transaction would hold them back: a write waits
// until its time, and a later write of the same key (a record) waits for an
// earlier one, so that the writes of a record become visible in the order
// they were made. Lock applies every write that is due, so whatever the
// store reads under it is what listings serve now.
type Late[K comparable, V any] struct {
	Delays
	// Now is the source's clock; Apply makes a write visible in the store.
	// Both are called with the lock held.
	Now   func() time.Time
	Apply func(K, V)

	mu  sync.Mutex
	ops []lateOp[K, V]
}

// Key names a record, the usual key of a Late.
type Key[ID comparable] struct {
	Resource clients.Resource
	ID       ID
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

// Lock locks the store, with every write due by now applied.
func (l *Late[K, V]) Lock() {
	l.mu.Lock()
	l.flush()
}

// Unlock unlocks the store.
func (l *Late[K, V]) Unlock() { l.mu.Unlock() }

// Pending returns how many writes are not yet visible.
func (l *Late[K, V]) Pending() int {
	l.Lock()
	defer l.Unlock()
	return len(l.ops)
}

// Write queues val for key, made at at: visible at once when Delays.Next
// lets it through (unless an earlier write of key still waits), else Delay
// after at. It applies what is due. Call it with the lock held.
func (l *Late[K, V]) Write(key K, at time.Time, val V) {
	var visible time.Time
	if d := l.Next(); d > 0 {
		visible = at.Add(d)
	}
	l.ops = append(l.ops, lateOp[K, V]{visible, key, val})
	l.flush()
}

func (l *Late[K, V]) flush() {
	if len(l.ops) == 0 {
		return
	}
	now := l.Now()
	keep := l.ops[:0]
	blocked := map[K]bool{}
	for _, op := range l.ops {
		if blocked[op.key] || op.at.After(now) {
			blocked[op.key] = true
			keep = append(keep, op)
			continue
		}
		l.Apply(op.key, op.val)
	}
	clear(l.ops[len(keep):])
	l.ops = keep
}

// Last returns the latest waiting write of key. Call it with the lock
// held.
func (l *Late[K, V]) Last(key K) (V, bool) {
	for i := len(l.ops) - 1; i >= 0; i-- {
		if l.ops[i].key == key {
			return l.ops[i].val, true
		}
	}
	var zero V
	return zero, false
}
