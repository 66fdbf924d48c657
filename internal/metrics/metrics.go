// Package metrics owns tidemark's Prometheus metrics: what they count and
// their labels. A nil *Metrics is valid and records nothing, so packages can
// take one without every test building a registry.
package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the daemon's counters, histograms and gauges.
type Metrics struct {
	Registry    *prometheus.Registry
	records     *prometheus.CounterVec
	requests    *prometheus.CounterVec
	rateLimited *prometheus.CounterVec
	passes      *prometheus.HistogramVec
	lag         *prometheus.GaugeVec
	lastSuccess *prometheus.GaugeVec
	backfill    *prometheus.GaugeVec
	hist        history
}

// New registers the metrics in a new registry.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tidemark_records_total",
			Help: "Records applied, by outcome: inserted, updated, unchanged, stale, tombstoned.",
		}, []string{"source", "resource", "outcome"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tidemark_requests_total",
			Help: "HTTP requests to the source, by status code (0: no response).",
		}, []string{"source", "status"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tidemark_rate_limited_total",
			Help: "Responses that asked us to wait (429, 402).",
		}, []string{"source", "status"}),
		passes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tidemark_pass_duration_seconds",
			Help:    "Duration of passes, by kind and status.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
		}, []string{"source", "resource", "kind", "status"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tidemark_cursor_lag_seconds",
			Help: "Source clock at the last pass minus the cursor's high water.",
		}, []string{"source", "resource"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tidemark_last_success_timestamp_seconds",
			Help: "When the last successful pass ended (Unix time).",
		}, []string{"source", "resource", "kind"}),
		backfill: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tidemark_backfill_progress_timestamp_seconds",
			Help: "When a running backfill last applied a window (Unix time); removed when it ends.",
		}, []string{"source", "resource"}),
	}
	m.Registry.MustRegister(m.records, m.requests, m.rateLimited, m.passes, m.lag, m.lastSuccess, m.backfill)
	return m
}

// Records adds n records with an outcome.
func (m *Metrics) Records(source, resource, outcome string, n int64) {
	if m == nil || n == 0 {
		return
	}
	m.records.WithLabelValues(source, resource, outcome).Add(float64(n))
	m.hist.add(time.Now(), n, 0)
}

// Request counts one HTTP response (status 0 when none came).
func (m *Metrics) Request(source string, status int) {
	if m == nil {
		return
	}
	s := strconv.Itoa(status)
	m.requests.WithLabelValues(source, s).Inc()
	m.hist.add(time.Now(), 0, 1)
	if status == 429 || status == 402 {
		m.rateLimited.WithLabelValues(source, s).Inc()
	}
}

// Pass records a finished pass.
func (m *Metrics) Pass(source, resource, kind, status string, took time.Duration) {
	if m == nil {
		return
	}
	m.passes.WithLabelValues(source, resource, kind, status).Observe(took.Seconds())
	if status == "ok" {
		m.lastSuccess.WithLabelValues(source, resource, kind).SetToCurrentTime()
	}
}

// Lag sets the cursor lag of a (source, resource).
func (m *Metrics) Lag(source, resource string, lag time.Duration) {
	if m == nil {
		return
	}
	m.lag.WithLabelValues(source, resource).Set(lag.Seconds())
	m.hist.setLag(source, resource, lag, time.Now())
}

// BackfillProgress marks a running backfill's progress now; done removes
// the series (the stuck-backfill alert watches its age).
func (m *Metrics) BackfillProgress(source, resource string, done bool) {
	if m == nil {
		return
	}
	if done {
		m.backfill.DeleteLabelValues(source, resource)
		return
	}
	m.backfill.WithLabelValues(source, resource).SetToCurrentTime()
}
