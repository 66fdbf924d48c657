package webhooks

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics count deliveries by outcome and time events to their rows. A nil
// *Metrics records nothing.
type Metrics struct {
	deliveries *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	passes     *prometheus.CounterVec
	panics     *prometheus.CounterVec
}

// NewMetrics registers the webhook metrics in reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tidemark_webhook_deliveries_total",
			Help: "Webhook deliveries by outcome: accepted, duplicate, conflict, expired_replay, ignored, bad_signature, ping, too_large, invalid, unavailable.",
		}, []string{"source", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tidemark_webhook_event_to_row_seconds",
			Help:    "From a webhook's arrival to its change in the mirror: by the pass it triggered (path pass) or by webhooks.apply (path apply).",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 15),
		}, []string{"source", "resource", "path"}),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tidemark_webhook_passes_total",
			Help: "Targeted passes run for webhook triggers, by status (ok, failed, deferred: waiting for quota or the source's pass).",
		}, []string{"source", "status"}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tidemark_webhook_apply_panics_total",
			Help: "Webhook records whose apply (webhooks.apply) panicked: recovered and logged, the triggered pass reads the record. Any is a bug.",
		}, []string{"source"}),
	}
	reg.MustRegister(m.deliveries, m.latency, m.passes, m.panics)
	return m
}

func (m *Metrics) delivery(source string, o Outcome) {
	if m != nil {
		m.deliveries.WithLabelValues(source, string(o)).Inc()
	}
}

func (m *Metrics) eventToRow(source, resource, path string, d time.Duration) {
	if m != nil {
		m.latency.WithLabelValues(source, resource, path).Observe(d.Seconds())
	}
}

func (m *Metrics) pass(source, status string) {
	if m != nil {
		m.passes.WithLabelValues(source, status).Inc()
	}
}

func (m *Metrics) applyPanic(source string) {
	if m != nil {
		m.panics.WithLabelValues(source).Inc()
	}
}
