package metrics

import "testing"

func TestRunsPruned(t *testing.T) {
	m := New()
	m.RunsPruned().Add("idle", 5000)
	m.RunsPruned().Add("idle", 12) // registered once, counted on
	m.RunsPruned().Add("expired", 3)
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "tidemark_runs_pruned_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			got[s.GetLabel()[0].GetValue()] = s.GetCounter().GetValue()
		}
	}
	if got["idle"] != 5012 || got["expired"] != 3 || len(got) != 2 {
		t.Fatalf("tidemark_runs_pruned_total %v", got)
	}
	var none *Metrics
	none.RunsPruned().Add("idle", 1) // records nothing, does not panic
}
