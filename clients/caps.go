package clients

// A wrapper of a Source (the daemon's per-source slot, a poller's source
// with its pass settings) must not hide what the source can do. A bare type
// assertion on a wrapped value finds only the wrapper's own methods, and the
// day someone adds a wrapper a capability silently goes (issue 30: a slot
// dropped Confirmer, and no reconcile looked an absent row up by id). So a
// wrapper says what it wraps (Unwrapper) and every optional capability is
// looked up with As, which walks the chain the way errors.As and
// http.NewResponseController do.

// Unwrapper is implemented by a Source that wraps another.
type Unwrapper interface {
	// Unwrap returns the wrapped source; nil when there is none now.
	Unwrap() Source
}

// maxWrappers bounds the walk: a chain that long is a cycle.
const maxWrappers = 32

// As finds the first source in src's wrapper chain (src, then what each
// Unwrap returns) that implements T, usually an optional interface such as
// Scoper, Confirmer or Moder.
func As[T any](src Source) (T, bool) {
	for range maxWrappers {
		if src == nil {
			break
		}
		if t, ok := any(src).(T); ok {
			return t, true
		}
		u, ok := src.(Unwrapper)
		if !ok {
			break
		}
		src = u.Unwrap()
	}
	var zero T
	return zero, false
}
