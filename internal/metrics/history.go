package metrics

import (
	"sync"
	"time"
)

// HistoryMinutes is how far back the status page's chart reaches.
const HistoryMinutes = 60

// Minute is one minute of this process's work: records applied (every
// outcome) and responses from the sources.
type Minute struct {
	Start    time.Time
	Records  int64
	Requests int64
}

// history keeps the last HistoryMinutes minutes in a ring, so that the
// status page can draw a chart without a Prometheus server.
type history struct {
	mu   sync.Mutex
	ring [HistoryMinutes]Minute
	lag  map[string]map[string]Lag // by source, then resource
}

// Lag is a cursor's lag on the source's clock, as of the pass that set it.
type Lag struct {
	Lag time.Duration
	At  time.Time
}

func (h *history) add(now time.Time, records, requests int64) {
	start := now.Truncate(time.Minute)
	h.mu.Lock()
	defer h.mu.Unlock()
	m := &h.ring[start.Unix()/60%HistoryMinutes]
	if !m.Start.Equal(start) {
		*m = Minute{Start: start}
	}
	m.Records += records
	m.Requests += requests
}

func (h *history) setLag(source, resource string, lag time.Duration, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lag == nil {
		h.lag = map[string]map[string]Lag{}
	}
	if h.lag[source] == nil {
		h.lag[source] = map[string]Lag{}
	}
	h.lag[source][resource] = Lag{Lag: lag, At: at}
}

// History returns the last HistoryMinutes minutes up to now, oldest first,
// with a zero Minute for each minute without work.
func (m *Metrics) History(now time.Time) []Minute {
	out := make([]Minute, HistoryMinutes)
	if m == nil {
		return out
	}
	end := now.Truncate(time.Minute)
	m.hist.mu.Lock()
	defer m.hist.mu.Unlock()
	for i := range out {
		start := end.Add(time.Duration(i-HistoryMinutes+1) * time.Minute)
		out[i] = Minute{Start: start}
		if b := m.hist.ring[start.Unix()/60%HistoryMinutes]; b.Start.Equal(start) {
			out[i] = b
		}
	}
	return out
}

// LastLag returns the lag a pass in this process last measured for a
// (source, resource) on the source's clock; false when none ran here.
func (m *Metrics) LastLag(source, resource string) (Lag, bool) {
	if m == nil {
		return Lag{}, false
	}
	m.hist.mu.Lock()
	defer m.hist.mu.Unlock()
	l, ok := m.hist.lag[source][resource]
	return l, ok
}
