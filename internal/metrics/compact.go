package metrics

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// The families below keep one number (or one histogram's counts) per label
// set in a map and build the samples only when scraped. client_golang's
// vecs keep a full metric object per series (its label pairs as protobuf
// messages, a descriptor, a mutex): about 2 kB each, measured at 28 MB of
// the 50 MB live heap of a daemon with 1,000 sources × 5 resources
// (issue 15). The exposition is the same: names, help, labels, types.

// sep joins label values into a map key; it cannot occur in UTF-8 text.
const sep = "\xff"

// series is a family's label sets: by the first label's value (the source,
// in every family of the daemon's), then the others' joined by sep, so that
// a source's series go at once when it moves to another replica (Forget).
type series[T any] map[string]map[string]T

func rest(lvs []string) string { return strings.Join(lvs[1:], sep) }

// of returns the series of lvs[0], made when missing.
func (s series[T]) of(first string) map[string]T {
	m := s[first]
	if m == nil {
		m = map[string]T{}
		s[first] = m
	}
	return m
}

// each calls fn with the label values (n of them) of every series.
func (s series[T]) each(n int, fn func(lvs []string, x T)) {
	for first, m := range s {
		for r, x := range m {
			lvs := []string{first}
			if n > 1 {
				lvs = append(lvs, strings.Split(r, sep)...)
			}
			fn(lvs, x)
		}
	}
}

// family is what counter, gauge and histogram families share: the
// descriptor, the number of labels and the series under their lock.
type family[T any] struct {
	desc   *prometheus.Desc
	labels int
	mu     sync.Mutex
	vals   series[T]
}

func newFamily[T any](name, help string, labels []string) family[T] {
	return family[T]{desc: prometheus.NewDesc(name, help, labels, nil), labels: len(labels), vals: series[T]{}}
}

// deleteFirst removes every series whose first label value is first.
func (f *family[T]) deleteFirst(first string) {
	f.mu.Lock()
	delete(f.vals, first)
	f.mu.Unlock()
}

func (f *family[T]) Describe(ch chan<- *prometheus.Desc) { ch <- f.desc }

// collect sends one sample a series, built by sample under the lock.
func (f *family[T]) collect(ch chan<- prometheus.Metric, sample func(lvs []string, x T) prometheus.Metric) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.vals.each(f.labels, func(lvs []string, x T) { ch <- sample(lvs, x) })
}

// vec is a counter or gauge family.
type vec struct {
	family[float64]
	typ prometheus.ValueType
}

func newVec(typ prometheus.ValueType, name, help string, labels ...string) *vec {
	return &vec{family: newFamily[float64](name, help, labels), typ: typ}
}

func (v *vec) add(d float64, lvs ...string) {
	k := rest(lvs)
	v.mu.Lock()
	v.vals.of(lvs[0])[k] += d
	v.mu.Unlock()
}

func (v *vec) set(x float64, lvs ...string) {
	k := rest(lvs)
	v.mu.Lock()
	v.vals.of(lvs[0])[k] = x
	v.mu.Unlock()
}

func (v *vec) delete(lvs ...string) {
	k := rest(lvs)
	v.mu.Lock()
	defer v.mu.Unlock()
	if m := v.vals[lvs[0]]; m != nil {
		delete(m, k)
		if len(m) == 0 {
			delete(v.vals, lvs[0])
		}
	}
}

func (v *vec) Collect(ch chan<- prometheus.Metric) {
	v.collect(ch, func(lvs []string, x float64) prometheus.Metric {
		return prometheus.MustNewConstMetric(v.desc, v.typ, x, lvs...)
	})
}

// histVec is a histogram family.
type histVec struct {
	family[*hist]
	bounds []float64
}

type hist struct {
	count  uint64
	sum    float64
	counts []uint64 // per bucket, not cumulative; the last is +Inf
}

func newHistVec(name, help string, bounds []float64, labels ...string) *histVec {
	return &histVec{family: newFamily[*hist](name, help, labels), bounds: bounds}
}

func (h *histVec) observe(x float64, lvs ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.vals.of(lvs[0])
	k := rest(lvs)
	s := m[k]
	if s == nil {
		s = &hist{counts: make([]uint64, len(h.bounds)+1)}
		m[k] = s
	}
	i := 0
	for i < len(h.bounds) && x > h.bounds[i] { // buckets are upper-inclusive
		i++
	}
	s.counts[i]++
	s.count++
	s.sum += x
}

func (h *histVec) Collect(ch chan<- prometheus.Metric) {
	h.collect(ch, func(lvs []string, s *hist) prometheus.Metric {
		cum := make(map[float64]uint64, len(h.bounds))
		var n uint64
		for i, b := range h.bounds {
			n += s.counts[i]
			cum[b] = n
		}
		return prometheus.MustNewConstHistogram(h.desc, s.count, s.sum, cum, lvs...)
	})
}
