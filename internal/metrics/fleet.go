package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// fleetMetrics are the fleet's sources that nobody polls, and the config
// reloads (issue 25).
type fleetMetrics struct {
	source    *prometheus.GaugeVec
	unowned   prometheus.Gauge
	notServed prometheus.Gauge
	reloadOK  prometheus.Gauge
	reloadAt  prometheus.Gauge
	reloads   *prometheus.CounterVec
}

func newFleetMetrics(r *prometheus.Registry) *fleetMetrics {
	f := &fleetMetrics{
		source: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tidemark_fleet_source_unowned",
			Help: "1 for each source nobody polls, by reason: no_owner (a live replica has it configured, none has owned it for over a heartbeat) or not_served (the database has its cursors, no live replica has it configured; `tidemark cursor retire` drops a retired one). Exported by the fleet's first member only."},
			[]string{"source", "reason"}),
		unowned: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tidemark_fleet_sources_unowned",
			Help: "Sources configured on a live replica that no replica owns (for over a heartbeat); 0 on all but the fleet's first member."}),
		notServed: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tidemark_fleet_sources_not_served",
			Help: "Sources with cursors (not retired) that no live replica has configured; 0 on all but the fleet's first member."}),
		reloadOK: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tidemark_config_last_reload_successful",
			Help: "1 when the last config reload (SIGHUP) succeeded or none was asked, 0 when the new config was refused (the running one is kept)."}),
		reloadAt: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tidemark_config_last_reload_success_timestamp_seconds",
			Help: "When the config was last loaded successfully (Unix time)."}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidemark_config_reloads_total",
			Help: "Config reloads (SIGHUP), by result: ok, refused."}, []string{"result"}),
	}
	f.reloadOK.Set(1)
	f.reloadAt.Set(unixNow())
	r.MustRegister(f.source, f.unowned, f.notServed, f.reloadOK, f.reloadAt, f.reloads)
	return f
}

// FleetSources sets the fleet's sources nobody polls (poller.FleetObserver).
func (m *Metrics) FleetSources(unowned, unserved []string) {
	if m == nil {
		return
	}
	f := m.fleet
	f.source.Reset()
	for _, s := range unowned {
		f.source.WithLabelValues(s, "no_owner").Set(1)
	}
	for _, s := range unserved {
		f.source.WithLabelValues(s, "not_served").Set(1)
	}
	f.unowned.Set(float64(len(unowned)))
	f.notServed.Set(float64(len(unserved)))
}

// Reloaded records a config reload: ok, or refused (the old one kept).
func (m *Metrics) Reloaded(ok bool, at time.Time) {
	if m == nil {
		return
	}
	if ok {
		m.fleet.reloadOK.Set(1)
		m.fleet.reloadAt.Set(float64(at.UnixNano()) / 1e9)
		m.fleet.reloads.WithLabelValues("ok").Inc()
		return
	}
	m.fleet.reloadOK.Set(0)
	m.fleet.reloads.WithLabelValues("refused").Inc()
}
