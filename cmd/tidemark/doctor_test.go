package main

import (
	"encoding/json"
	"strings"
	"testing"
)

const doctorConfig = `
sources:
  - name: tg
    kind: toggl
    workspace_id: "1"
    token: x
    schedule: "*/5 * * * *"
  - name: ck
    kind: clockify
    workspace_id: 5f1e0c2a9b3d4e5f6a7b8c9d
    token: x
    plan: free
    schedule: "0 * * * *"
`

func TestDoctor(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.writeFile("doctor.yaml", doctorConfig)

	out, errOut, code := e.cli("doctor", "--config", cfg)
	if code != 0 {
		t.Fatalf("doctor: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"source tg (toggl, plan free): DOES NOT FIT",
		"61 requests", "against 30/h (plan free)", // 5 resources × 12 passes + /me once a day
		"/me calls", `schedule: "*/20 * * * *"`,
		// The daily reconcile at 03:30 lists every resource once more.
		"reconcile         5 requests", `"30 3 * * *"`, "66 requests",
		"feed unusable", // Clockify's fallback listings
		"source ck (clockify, plan free): FITS",
		"GET /user (clock) + 2 created/updated + 1 deleted",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}

	out, _, code = e.cli("doctor", "--config", cfg, "--json", "--source", "tg")
	var reps []struct {
		Source         string `json:"source"`
		Plan           string `json:"plan"`
		PassRequests   int    `json:"pass_requests"`
		HourlyRequests int    `json:"hourly_requests"`
		Quota          int    `json:"hourly_quota"`
		Verdict        string `json:"verdict"`
		Refuse         bool   `json:"refuse"`
	}
	if err := json.Unmarshal([]byte(out), &reps); err != nil || code != 0 {
		t.Fatalf("doctor --json: exit %d, %v\n%s", code, err, out)
	}
	if len(reps) != 1 || reps[0].Source != "tg" || reps[0].Plan != "free" || reps[0].PassRequests != 5 ||
		reps[0].HourlyRequests != 61 || reps[0].Quota != 30 || reps[0].Verdict != "does not fit" || reps[0].Refuse {
		t.Fatalf("doctor --json: %+v", reps)
	}

	// A Clockify free workspace with 40 projects: listing their tasks alone
	// is 41 requests, more than the hour holds.
	out, errOut, code = e.cli("doctor", "--config", cfg, "--source", "ck", "--projects", "40")
	if code != 2 || !strings.Contains(out, "does not fit: `run` refuses this source") ||
		!strings.Contains(errOut, "source ck: even one pass an hour (48 requests) does not fit 30 requests/h (plan free)") {
		t.Fatalf("doctor, refused: exit %d\n%s%s", code, out, errOut)
	}

	bad := e.writeFile("bad.yaml", strings.Replace(doctorConfig, "plan: free", "plan: team", 1))
	if _, errOut, code := e.cli("doctor", "--config", bad); code != 2 || !strings.Contains(errOut, `sources[1].plan: "team": kind clockify has plans free, paid`) {
		t.Fatalf("doctor, unknown plan: exit %d\n%s", code, errOut)
	}
	if _, _, code := e.cli("doctor"); code != 2 {
		t.Fatalf("doctor without --config: exit %d", code)
	}
}

// TestRunRefusesAScheduleThatCannotFit: `run` names the source and the
// numbers and exits 2 when even one pass an hour does not fit the plan.
func TestRunRefusesAScheduleThatCannotFit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Toggl free: 30 requests an hour. Five resources cost 5 a pass, so
	// only a plan whose rate limit allows less than a pass an hour refuses:
	// a rate limit of 4 an hour.
	cfg := e.writeFile("refuse.yaml", `
sources:
  - name: tg
    kind: toggl
    workspace_id: "1"
    token: x
    base_url: http://127.0.0.1:1
    rate_limit: {requests: 4, per: 1h}
`)
	if _, _, code := e.cli("migrate"); code != 0 {
		t.Fatalf("migrate: exit %d", code)
	}
	_, errOut, code := e.cli("run", "--config", cfg)
	if code != 2 || !strings.Contains(errOut, "source tg (toggl, plan free)") || !strings.Contains(errOut, "even one pass an hour (6 requests) does not fit") ||
		!strings.Contains(errOut, "against 4/h (rate_limit 4 per 1h0m0s)") {
		t.Fatalf("run: exit %d\n%s", code, errOut)
	}
}
