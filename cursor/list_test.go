package cursor_test

import (
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/cursor"
)

func TestList(t *testing.T) {
	ctx, db, s := setup(t)

	// acme/projects: cursor, no runs.
	advance(t, db, "acme", "projects", t0)
	// acme/time_entries: cursor, an ok run, a failed run, then a running
	// one; and an operator set, which is not a pass.
	advance(t, db, "acme", "time_entries", t0.Add(time.Hour))
	startRun(t, s, "te1", "acme", "time_entries", cursor.KindIncremental)
	finishRun(t, db, "te1", cursor.StatusOK)
	startRun(t, s, "te2", "acme", "time_entries", cursor.KindIncremental)
	finishRun(t, db, "te2", cursor.StatusFailed)
	startRun(t, s, "te3", "acme", "time_entries", cursor.KindReconcile)
	if _, err := s.Set(ctx, cursor.SetParams{Source: "acme", Resource: "time_entries", To: t0.Add(2 * time.Hour), Actor: "alice@host"}); err != nil {
		t.Fatal(err)
	}
	// acme/users: runs but no cursor row yet (the first pass failed).
	startRun(t, s, "u1", "acme", "users", cursor.KindIncremental)
	finishRun(t, db, "u1", cursor.StatusFailed)
	// beta/clients: another source.
	advance(t, db, "beta", "clients", t0)

	list, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	byKey := map[string]cursor.Status{}
	for _, st := range list {
		k := st.Source + "/" + st.Resource
		keys = append(keys, k)
		byKey[k] = st
	}
	want := []string{"acme/projects", "acme/time_entries", "acme/users", "beta/clients"}
	if len(keys) != len(want) {
		t.Fatalf("List keys %v, want %v", keys, want)
	}
	for i := range want {
		if keys[i] != want[i] {
			t.Fatalf("List keys %v, want %v", keys, want)
		}
	}

	if p := byKey["acme/projects"]; !p.HighWater.Equal(t0) || p.UpdatedBy != "poller" || p.LastRun != nil || p.LastOK != nil {
		t.Errorf("acme/projects: %+v", p)
	}

	te := byKey["acme/time_entries"]
	if !te.HighWater.Equal(t0.Add(2*time.Hour)) || te.UpdatedBy != "alice@host" {
		t.Errorf("acme/time_entries cursor: %+v", te)
	}
	if te.LastRun == nil || te.LastRun.RunID != "te3" || te.LastRun.Status != cursor.StatusRunning ||
		te.LastRun.Kind != cursor.KindReconcile || te.LastRun.FinishedAt != nil {
		t.Errorf("acme/time_entries last run: %+v, want te3 running", te.LastRun)
	}
	okRun := runByID(t, s, "te1")
	if te.LastOK == nil || okRun.FinishedAt == nil || !te.LastOK.Equal(*okRun.FinishedAt) {
		t.Errorf("acme/time_entries last ok: %v, want te1's finished_at %v", te.LastOK, okRun.FinishedAt)
	}

	u := byKey["acme/users"]
	if !u.HighWater.IsZero() || u.UpdatedBy != "" || u.LastRun == nil || u.LastRun.RunID != "u1" ||
		u.LastRun.Status != cursor.StatusFailed || u.LastOK != nil {
		t.Errorf("acme/users (runs, no cursor): %+v", u)
	}

	// Filter by source.
	list, err = s.List(ctx, "beta")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Source != "beta" || list[0].Resource != "clients" {
		t.Fatalf("List(beta): %+v", list)
	}
	list, err = s.List(ctx, "gamma")
	if err != nil || len(list) != 0 {
		t.Fatalf("List(gamma): %+v, %v", list, err)
	}
}

func runByID(t *testing.T, s *cursor.Store, id string) cursor.Run {
	t.Helper()
	runs, err := s.Runs(t.Context(), cursor.RunsParams{Limit: 1000})
	return findOne(t, runs, err, "run "+id, func(r cursor.Run) bool { return r.RunID == id })
}
