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
	failures    *prometheus.GaugeVec
	refused     *prometheus.GaugeVec
	waiting     *prometheus.GaugeVec
	schedule    *prometheus.GaugeVec
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
		failures: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tidemark_consecutive_failures",
			Help: "Passes that failed in a row, by kind; 0 after a success.",
		}, []string{"source", "resource", "kind"}),
		refused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tidemark_reconcile_refused",
			Help: "1 while the last reconcile of a resource was refused (more tombstones than max_tombstones), else 0.",
		}, []string{"source", "resource"}),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tidemark_source_wait_until_timestamp_seconds",
			Help: "Until when the source made us wait (Unix time), by reason: quota (402) or retry_after (a long 429); removed when it answers again.",
		}, []string{"source", "reason"}),
		schedule: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tidemark_schedule_interval_seconds",
			Help: "The longest gap between two scheduled incremental passes of a source (alerts compare freshness with it).",
		}, []string{"source"}),
	}
	m.Registry.MustRegister(m.records, m.requests, m.rateLimited, m.passes, m.lag, m.lastSuccess, m.backfill,
		m.failures, m.refused, m.waiting, m.schedule)
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
	fails := m.failures.WithLabelValues(source, resource, kind)
	if status == "ok" {
		m.lastSuccess.WithLabelValues(source, resource, kind).SetToCurrentTime()
		fails.Set(0)
	} else {
		fails.Inc()
	}
	if kind == "reconcile" {
		refused := 0.0
		if status == "refused" {
			refused = 1
		}
		m.refused.WithLabelValues(source, resource).Set(refused)
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

// Wait records that the source makes us wait until a time (reason quota or
// retry_after); Resumed removes it.
func (m *Metrics) Wait(source, reason string, until time.Time) {
	if m == nil {
		return
	}
	m.waiting.WithLabelValues(source, reason).Set(float64(until.UnixMilli()) / 1000)
}

// Resumed records that the source answers again.
func (m *Metrics) Resumed(source string) {
	if m == nil {
		return
	}
	m.waiting.DeletePartialMatch(prometheus.Labels{"source": source})
}

// Schedule records the longest gap between a source's scheduled passes.
func (m *Metrics) Schedule(source string, every time.Duration) {
	if m == nil {
		return
	}
	m.schedule.WithLabelValues(source).Set(every.Seconds())
}
