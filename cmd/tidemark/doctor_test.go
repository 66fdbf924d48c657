package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients/simulated"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
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

	out, errOut, code := e.cli("doctor", "--budget-only", "--config", cfg)
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

	out, _, code = e.cli("doctor", "--budget-only", "--config", cfg, "--json", "--source", "tg")
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
	out, errOut, code = e.cli("doctor", "--budget-only", "--config", cfg, "--source", "ck", "--projects", "40")
	if code != 2 || !strings.Contains(out, "does not fit: `run` refuses this source") ||
		!strings.Contains(errOut, "source ck: even one pass an hour (48 requests) does not fit 30 requests/h (plan free)") {
		t.Fatalf("doctor, refused: exit %d\n%s%s", code, out, errOut)
	}

	bad := e.writeFile("bad.yaml", strings.Replace(doctorConfig, "plan: free", "plan: team", 1))
	if _, errOut, code := e.cli("doctor", "--budget-only", "--config", bad); code != 2 || !strings.Contains(errOut, `sources[1].plan: "team": kind clockify has plans free, paid`) {
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

// TestDoctorChecksEverything: with a good token, a migrated database and a
// role that may write, doctor says all is well (exit 0); a refused token, an
// unmigrated database, a role without rights and an unreachable database
// each fail (exit 1) with the fix printed.
func TestDoctorChecksEverything(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tr, cfg := e.acme(simulated.Params{Seed: 3}, source{})
	out, errOut, code := e.cli("doctor", "--config", cfg)
	out = flat(out)
	if code != 0 || !strings.Contains(out, "all is well") {
		t.Fatalf("doctor: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"OK database reachable", "OK database migrated", "OK database rights", "OK acme token", "OK acme clock", "OK acme budget"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}

	// A refused token.
	e.vars = append(e.vars, "WRONG_TOKEN=not-the-token")
	bad := e.writeConfig(source{name: "acme", tr: tr, tokenVar: "WRONG_TOKEN"})
	out, _, code = e.cli("doctor", "--config", bad)
	out = flat(out)
	if code != 1 || !strings.Contains(out, "FAIL acme token the source refused the token (401") || !strings.Contains(out, "fix: check the source's token") {
		t.Fatalf("wrong token: exit %d\n%s", code, out)
	}
	if strings.Contains(out, "not-the-token") {
		t.Fatal("doctor printed the token")
	}

	// An unmigrated database, and one that does not answer.
	out, _, code = e.cli("doctor", "--config", cfg, "--database-url", pgtest.EmptyURL(t))
	out = flat(out)
	if code != 1 || !strings.Contains(out, "FAIL database migrated") || !strings.Contains(out, "run `tidemark migrate`") {
		t.Fatalf("unmigrated: exit %d\n%s", code, out)
	}
	out, _, code = e.cli("doctor", "--config", cfg, "--database-url", "postgres://tidemark:secret-pw@127.0.0.1:1/none?connect_timeout=2")
	out = flat(out)
	if code != 1 || !strings.Contains(out, "FAIL database reachable") || strings.Contains(out, "secret-pw") {
		t.Fatalf("unreachable: exit %d\n%s", code, out)
	}

	// A role that may only read.
	role := fmt.Sprintf("reader_%d", time.Now().UnixNano()%1_000_000)
	ctx := context.Background()
	for _, q := range []string{"CREATE ROLE " + role + " LOGIN", "GRANT SELECT ON ALL TABLES IN SCHEMA public TO " + role,
		"GRANT USAGE ON SCHEMA public TO " + role} {
		if _, err := e.pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		e.pool.Exec(context.Background(), "DROP OWNED BY "+role)
		e.pool.Exec(context.Background(), "DROP ROLE "+role)
	})
	u, _ := url.Parse(e.dbURL)
	u.User = url.User(role)
	out, _, code = e.cli("doctor", "--config", cfg, "--database-url", u.String())
	out = flat(out)
	if code != 1 || !strings.Contains(out, "FAIL database rights") || !strings.Contains(out, "cursors: INSERT, UPDATE, DELETE") || !strings.Contains(out, "fix: GRANT") {
		t.Fatalf("read-only role: exit %d\n%s", code, out)
	}
}

// flat collapses runs of spaces (the table's padding).
func flat(s string) string { return regexp.MustCompile(` +`).ReplaceAllString(s, " ") }
