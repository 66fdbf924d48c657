package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// RunsPruned counts the sync_runs rows run retention deleted (issue 15).
// A nil *RunsPruned records nothing.
type RunsPruned struct{ v *vec }

// RunsPruned registers tidemark_runs_pruned_total, by reason: idle (after
// runs.keep_idle) or expired (after runs.keep). Registering twice returns
// the same counter.
func (m *Metrics) RunsPruned() *RunsPruned {
	if m == nil {
		return nil
	}
	v := newVec(prometheus.CounterValue, "tidemark_runs_pruned_total",
		"sync_runs rows deleted by retention, by reason: idle (runs.keep_idle) or expired (runs.keep).", "reason")
	if err := m.Registry.Register(v); err != nil {
		if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
			v = are.ExistingCollector.(*vec)
		}
	}
	return &RunsPruned{v}
}

// Add counts n rows deleted for reason.
func (c *RunsPruned) Add(reason string, n int64) {
	if c == nil || n == 0 {
		return
	}
	c.v.add(float64(n), reason)
}
