// Package metrics owns tidemark's Prometheus metrics: what they count and
// their labels. A nil *Metrics is valid and records nothing, so packages can
// take one without every test building a registry.
package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the daemon's counters, histograms and gauges (compact.go).
type Metrics struct {
	Registry    *prometheus.Registry
	records     *vec
	requests    *vec
	rateLimited *vec
	passes      *histVec
	lag         *vec
	lastSuccess *vec
	backfill    *vec
	failures    *vec
	refused     *vec
	waiting     *vec
	schedule    *vec
	backoff     *vec
	hist        history
	fleet       *fleetMetrics // fleet.go
}

// New registers the metrics in a new registry.
func New() *Metrics {
	counter, gauge := prometheus.CounterValue, prometheus.GaugeValue
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		records: newVec(counter, "tidemark_records_total",
			"Records applied, by outcome: inserted, updated, unchanged, stale, tombstoned.", "source", "resource", "outcome"),
		requests: newVec(counter, "tidemark_requests_total",
			"HTTP requests to the source, by status code (0: no response).", "source", "status"),
		rateLimited: newVec(counter, "tidemark_rate_limited_total",
			"Responses that asked us to wait (429, 402).", "source", "status"),
		passes: newHistVec("tidemark_pass_duration_seconds", "Duration of passes, by kind and status.",
			prometheus.ExponentialBuckets(0.05, 2, 14), "source", "resource", "kind", "status"),
		lag: newVec(gauge, "tidemark_cursor_lag_seconds",
			"Source clock at the last pass minus the cursor's high water.", "source", "resource"),
		lastSuccess: newVec(gauge, "tidemark_last_success_timestamp_seconds",
			"When the last successful pass ended (Unix time).", "source", "resource", "kind"),
		backfill: newVec(gauge, "tidemark_backfill_progress_timestamp_seconds",
			"When a running backfill last applied a window (Unix time); removed when it ends.", "source", "resource"),
		failures: newVec(gauge, "tidemark_consecutive_failures",
			"Passes that failed in a row, by kind; 0 after a success.", "source", "resource", "kind"),
		refused: newVec(gauge, "tidemark_reconcile_refused",
			"1 while the last reconcile of a resource was refused (more tombstones than max_tombstones), else 0.", "source", "resource"),
		waiting: newVec(gauge, "tidemark_source_wait_until_timestamp_seconds",
			"Until when the source made us wait (Unix time), by reason: quota (402) or retry_after (a long 429); removed when it answers again.", "source", "reason"),
		schedule: newVec(gauge, "tidemark_schedule_interval_seconds",
			"The longest gap between two scheduled incremental passes of a source (alerts compare freshness with it).", "source"),
		backoff: newVec(gauge, "tidemark_resource_backoff_until_timestamp_seconds",
			"Until when a resource's passes of a kind back off (Unix time), by reason: capped (its listing stays capped or unstable) or failing; removed after a success.", "source", "resource", "kind", "reason"),
	}
	// The Go runtime's and the process's own series (go_*, process_*), which
	// every Go exporter has and the usual dashboards read.
	m.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.Registry.MustRegister(m.records, m.requests, m.rateLimited, m.passes, m.lag, m.lastSuccess, m.backfill,
		m.failures, m.refused, m.waiting, m.schedule, m.backoff)
	m.fleet = newFleetMetrics(m.Registry)
	return m
}

func unixNow() float64 { return float64(time.Now().UnixNano()) / 1e9 }

// Records adds n records with an outcome.
func (m *Metrics) Records(source, resource, outcome string, n int64) {
	if m == nil || n == 0 {
		return
	}
	m.records.add(float64(n), source, resource, outcome)
	m.hist.add(time.Now(), n, 0)
}

// Request counts one HTTP response (status 0 when none came).
func (m *Metrics) Request(source string, status int) {
	if m == nil {
		return
	}
	s := strconv.Itoa(status)
	m.requests.add(1, source, s)
	m.hist.add(time.Now(), 0, 1)
	if status == 429 || status == 402 {
		m.rateLimited.add(1, source, s)
	}
}

// Pass records a finished pass.
func (m *Metrics) Pass(source, resource, kind, status string, took time.Duration) {
	if m == nil {
		return
	}
	m.passes.observe(took.Seconds(), source, resource, kind, status)
	if status == "ok" {
		m.lastSuccess.set(unixNow(), source, resource, kind)
		m.failures.set(0, source, resource, kind)
	} else {
		m.failures.add(1, source, resource, kind)
	}
	if kind == "reconcile" {
		refused := 0.0
		if status == "refused" {
			refused = 1
		}
		m.refused.set(refused, source, resource)
	}
}

// Backoff records that a resource's passes of kind back off until a time,
// for reason (capped or failing); a zero until removes it (a success).
func (m *Metrics) Backoff(source, resource, kind, reason string, until time.Time) {
	if m == nil {
		return
	}
	if until.IsZero() {
		m.backoff.delete(source, resource, kind, "capped")
		m.backoff.delete(source, resource, kind, "failing")
		return
	}
	other := "failing"
	if reason == "failing" {
		other = "capped"
	}
	m.backoff.delete(source, resource, kind, other)
	m.backoff.set(float64(until.UnixMilli())/1000, source, resource, kind, reason)
}

// Lag sets the cursor lag of a (source, resource).
func (m *Metrics) Lag(source, resource string, lag time.Duration) {
	if m == nil {
		return
	}
	m.lag.set(lag.Seconds(), source, resource)
	m.hist.setLag(source, resource, lag, time.Now())
}

// BackfillProgress marks a running backfill's progress now; done removes
// the series (the stuck-backfill alert watches its age).
func (m *Metrics) BackfillProgress(source, resource string, done bool) {
	if m == nil {
		return
	}
	if done {
		m.backfill.delete(source, resource)
		return
	}
	m.backfill.set(unixNow(), source, resource)
}

// Wait records that the source makes us wait until a time (reason quota or
// retry_after); Resumed removes it.
func (m *Metrics) Wait(source, reason string, until time.Time) {
	if m == nil {
		return
	}
	m.waiting.set(float64(until.UnixMilli())/1000, source, reason)
}

// Resumed records that the source answers again.
func (m *Metrics) Resumed(source string) {
	if m == nil {
		return
	}
	m.waiting.deleteFirst(source)
}

// Schedule records the longest gap between a source's scheduled passes.
func (m *Metrics) Schedule(source string, every time.Duration) {
	if m == nil {
		return
	}
	m.schedule.set(every.Seconds(), source)
}

// Forget removes every series of a source, and its last lag, when this
// process hands the source over to another replica: a replica's series
// follow its share, not every source it ever owned. The new owner's series
// take over (the dashboards and alerts take the max over replicas); the
// minutes of the status page's chart keep what was done here.
func (m *Metrics) Forget(source string) {
	if m == nil {
		return
	}
	for _, v := range []*vec{m.records, m.requests, m.rateLimited, m.lag, m.lastSuccess, m.backfill,
		m.failures, m.refused, m.waiting, m.schedule} {
		v.deleteFirst(source)
	}
	m.passes.deleteFirst(source)
	m.hist.mu.Lock()
	delete(m.hist.lag, source)
	m.hist.mu.Unlock()
}
