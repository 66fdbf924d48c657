package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The compact families expose exactly what client_golang's vecs expose for
// the same operations.
func TestCompactSameExposition(t *testing.T) {
	bounds := prometheus.ExponentialBuckets(0.05, 2, 14)
	refReg := prometheus.NewRegistry()
	refC := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total", Help: "c."}, []string{"source", "status"})
	refG := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "g", Help: "g."}, []string{"source", "reason"})
	refH := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "h_seconds", Help: "h.", Buckets: bounds}, []string{"source", "kind"})
	refS := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "s_seconds", Help: "s."}, []string{"source"})
	refReg.MustRegister(refC, refG, refH, refS)

	reg := prometheus.NewRegistry()
	c := newVec(prometheus.CounterValue, "c_total", "c.", "source", "status")
	g := newVec(prometheus.GaugeValue, "g", "g.", "source", "reason")
	h := newHistVec("h_seconds", "h.", bounds, "source", "kind")
	sv := newVec(prometheus.GaugeValue, "s_seconds", "s.", "source")
	reg.MustRegister(c, g, h, sv)

	for i, src := range []string{"acme", "acme-2", "bolt"} {
		refC.WithLabelValues(src, "200").Add(float64(i + 1))
		c.add(float64(i+1), src, "200")
		refC.WithLabelValues(src, "429").Inc()
		c.add(1, src, "429")
		refS.WithLabelValues(src).Set(float64(i) + 60)
		sv.set(float64(i)+60, src)
		refG.WithLabelValues(src, "quota").Set(float64(i) * 1.5)
		g.set(float64(i)*1.5, src, "quota")
		refG.WithLabelValues(src, "retry_after").Set(3)
		g.set(3, src, "retry_after")
		for _, x := range []float64{0, 0.05, 0.07, 1, 409.6, 500, 1e6} {
			refH.WithLabelValues(src, "incremental").Observe(x * float64(i+1))
			h.observe(x*float64(i+1), src, "incremental")
		}
	}
	refG.DeletePartialMatch(prometheus.Labels{"source": "acme"})
	g.deleteFirst("acme")
	refC.DeleteLabelValues("bolt", "429")
	c.delete("bolt", "429")

	scrape := func(r *prometheus.Registry) string {
		w := httptest.NewRecorder()
		promhttp.HandlerFor(r, promhttp.HandlerOpts{}).ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		return w.Body.String()
	}
	want, got := scrape(refReg), scrape(reg)
	if got != want {
		t.Fatalf("exposition differs.\ngot:\n%s\nwant:\n%s", got, want)
	}
	if len(want) < 500 {
		t.Fatalf("scrape too short to mean anything:\n%s", want)
	}
}

// Forget removes every series of one source, and only those.
func TestForgetRemovesASourcesSeries(t *testing.T) {
	m := New()
	for _, src := range []string{"acme", "acme-2"} {
		m.Records(src, "time_entries", "inserted", 3)
		m.Request(src, 429)
		m.Pass(src, "time_entries", "reconcile", "refused", time.Second)
		m.Lag(src, "time_entries", time.Minute)
		m.BackfillProgress(src, "time_entries", false)
		m.Wait(src, "quota", time.Now())
		m.Schedule(src, time.Minute)
	}
	m.Forget("acme")
	w := httptest.NewRecorder()
	promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}).ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	text := w.Body.String()
	if strings.Contains(text, `source="acme"`) || strings.Count(text, `source="acme-2"`) < 10 {
		t.Fatalf("exposition after Forget(acme):\n%s", text)
	}
	if _, ok := m.LastLag("acme", "time_entries"); ok {
		t.Fatal("acme's lag is still known")
	}
	if _, ok := m.LastLag("acme-2", "time_entries"); !ok {
		t.Fatal("acme-2's lag is gone")
	}
}
