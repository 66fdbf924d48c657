package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const good = `
database_url: ${DATABASE_URL}
sources:
  - name: acme
    kind: harvest
    account_id: "123456"
    token: ${HARVEST_TOKEN}
    schedule: "*/5 * * * *"
    overlap: 10m
    rate_limit: {requests: 100, per: 15s}
    resources: [time_entries, projects]
    reconcile: {schedule: "0 3 * * *", lookback_days: 30}
`

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

var fullEnv = env(map[string]string{"DATABASE_URL": "postgres://x/y", "HARVEST_TOKEN": "s3cr3t-token"})

func TestParseGood(t *testing.T) {
	c := mustParse(t, good)
	s := c.Sources[0]
	if c.DatabaseURL != "postgres://x/y" || s.Token.Value() != "s3cr3t-token" {
		t.Fatalf("expansion: %q %q", c.DatabaseURL, s.Token.Value())
	}
	if s.Overlap.D() != 10*time.Minute || s.RateLimit.Requests != 100 || s.RateLimit.Per.D() != 15*time.Second {
		t.Fatalf("durations: %+v", s)
	}
	if s.BaseURL != "https://api.harvestapp.com/v2" || s.Reconcile.LookbackDays != 30 || s.Reconcile.MaxTombstones != DefaultMaxTombstones {
		t.Fatalf("defaults: %+v", s)
	}
	if got := fmt.Sprintf("%v %+v %#v", s.Token, s, s); strings.Contains(got, "s3cr3t") {
		t.Fatalf("token printed: %s", got)
	}
}

func TestParseErrorsNameKeyAndLine(t *testing.T) {
	cases := []struct {
		name, edit, want string
		env              func(string) (string, bool)
	}{
		{"unknown key", "    overlap: 10m\n    overlapp: 5m\n", "t.yaml:10: sources[0].overlapp: unknown key", nil},
		{"unset variable", "", "t.yaml:7: sources[0].token: environment variable HARVEST_TOKEN is not set", env(map[string]string{"DATABASE_URL": "x"})},
		{"bad duration", "    overlap: tenminutes\n", "t.yaml:9: sources[0].overlap: invalid duration \"tenminutes\"", nil},
		{"bad nested duration", "    rate_limit: {requests: 100, per: often}\n", "sources[0].rate_limit.per: invalid duration", nil},
		{"bad cron", "    schedule: \"*/5 * * *\"\n", "t.yaml:8: sources[0].schedule: invalid cron spec", nil},
		{"missing token", "    token: \"\"\n", "sources[0].token: missing", nil},
		{"bad kind", "    kind: jira\n", "t.yaml:5: sources[0].kind: unknown kind \"jira\"", nil},
		{"bad resource", "    resources: [time_entries, invoice]\n", "sources[0].resources[1]: unknown resource \"invoice\"", nil},
		{"bad rate", "    rate_limit: {requests: 0, per: 15s}\n", "sources[0].rate_limit: want", nil},
		{"bad url", "    base_url: ftp://x\n", "sources[0].base_url", nil},
		{"another kind's key", "    user_ids: [\"5f1e0c2a9b3d4e5f6a7b8c9d\"]\n", "sources[0].user_ids: kind harvest does not take user_ids (it takes account_id)", nil},
		{"missing account", "    account_id: \"\"\n", "sources[0].account_id: missing; kind harvest needs it", nil},
		{"wrong type", "    reconcile: {lookback_days: many}\n", "t.yaml:", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := good
			if tc.edit != "" {
				// Replace the line with the same key, or insert after it.
				key := strings.SplitN(strings.TrimSpace(tc.edit), ":", 2)[0]
				lines := strings.Split(doc, "\n")
				found := false
				for i, l := range lines {
					if strings.HasPrefix(strings.TrimSpace(l), key+":") {
						lines[i] = strings.TrimSuffix(tc.edit, "\n")
						found = true
					}
				}
				doc = strings.Join(lines, "\n")
				if !found {
					doc += tc.edit
				}
			}
			e := cmpOr(tc.env, fullEnv)
			_, err := Parse("t.yaml", []byte(doc), e)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error is %T, want *config.Error", err)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Fatalf("token in error: %v", err)
			}
		})
	}
}

func cmpOr(a, b func(string) (string, bool)) func(string) (string, bool) {
	if a != nil {
		return a
	}
	return b
}

func TestTogglAndClockify(t *testing.T) {
	doc := plans
	c := mustParse(t, doc)
	if c.Sources[0].RateLimit.Requests != 1 || c.Sources[1].Reconcile.Schedule == "" || len(c.Sources[1].UserIDs) != 1 {
		t.Fatalf("defaults: %+v", c.Sources)
	}
	bad := strings.Replace(doc, `workspace_id: "123"`, `workspace_id: abc`, 1)
	if _, err := Parse("t.yaml", []byte(bad), fullEnv); err == nil || !strings.Contains(err.Error(), "t.yaml:5: sources[0].workspace_id") {
		t.Fatalf("bad toggl workspace: %v", err)
	}
	bad = strings.Replace(doc, "    workspace_id: 5f1e0c2a9b3d4e5f6a7b8c9d\n", "", 1)
	if _, err := Parse("t.yaml", []byte(bad), fullEnv); err == nil || !strings.Contains(err.Error(), "sources[1].workspace_id: missing") {
		t.Fatalf("missing clockify workspace: %v", err)
	}
}

func TestDuplicateNames(t *testing.T) {
	doc := good + `  - name: acme
    kind: simulated
`
	_, err := Parse("t.yaml", []byte(doc), fullEnv)
	if err == nil || !strings.Contains(err.Error(), "sources[1].name: duplicate source name \"acme\"") {
		t.Fatalf("got %v", err)
	}
}

func TestExpandedValueIsNotYAML(t *testing.T) {
	e := env(map[string]string{"DATABASE_URL": "x", "HARVEST_TOKEN": "a: b\n- [c"})
	c, err := Parse("t.yaml", []byte(good), e)
	if err != nil {
		t.Fatal(err)
	}
	if c.Sources[0].Token.Value() != "a: b\n- [c" {
		t.Fatalf("token %q", c.Sources[0].Token.Value())
	}
}

func TestExampleConfigsLoad(t *testing.T) {
	files, _ := filepath.Glob("../../configs/*.yaml")
	if len(files) == 0 {
		t.Fatal("no example configs")
	}
	t.Setenv("DATABASE_URL", "postgres://localhost/tidemark")
	t.Setenv("HARVEST_TOKEN", "x")
	t.Setenv("HARVEST_ACCOUNT_ID", "1")
	t.Setenv("TOGGL_WORKSPACE_ID", "1")
	t.Setenv("TOGGL_TOKEN", "x")
	t.Setenv("CLOCKIFY_WORKSPACE_ID", "5f1e0c2a9b3d4e5f6a7b8c9d")
	t.Setenv("CLOCKIFY_API_KEY", "x")
	t.Setenv("TRACKER_URL", "http://tracker:8080/v2") // configs/fleet.yaml
	t.Setenv("TRACKER_ACCOUNT_ID", "1")
	t.Setenv("TRACKER_TOKEN", "x")
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	_ = os.Getenv
}

// Clockify's feed windows end a safety lag (2 min) before the source's
// clock: an overlap shorter than that is refused, naming the key.
func TestClockifyOverlapUnderSafetyLagRefused(t *testing.T) {
	doc := `
sources:
  - name: c
    kind: clockify
    workspace_id: 5f1e0c2a9b3d4e5f6a7b8c9d
    token: ${HARVEST_TOKEN}
    overlap: 1m
`
	_, err := Parse("t.yaml", []byte(doc), fullEnv)
	if err == nil || !strings.Contains(err.Error(), "t.yaml:7: sources[0].overlap") || !strings.Contains(err.Error(), "safety lag") {
		t.Fatalf("error %v, want one naming sources[0].overlap and the safety lag", err)
	}
	for _, ok := range []string{"2m", "10m"} {
		if _, err := Parse("t.yaml", []byte(strings.Replace(doc, "overlap: 1m", "overlap: "+ok, 1)), fullEnv); err != nil {
			t.Errorf("overlap %s: %v", ok, err)
		}
	}
	// Other kinds have no feed lag.
	harvest := strings.Replace(strings.Replace(doc, "kind: clockify", "kind: harvest", 1), "workspace_id: 5f1e0c2a9b3d4e5f6a7b8c9d", `account_id: "1"`, 1)
	if _, err := Parse("t.yaml", []byte(harvest), fullEnv); err != nil {
		t.Errorf("harvest with overlap 1m: %v", err)
	}
}

const plans = `
sources:
  - name: t
    kind: toggl
    workspace_id: "123"
    token: ${HARVEST_TOKEN}
  - name: c
    kind: clockify
    workspace_id: 5f1e0c2a9b3d4e5f6a7b8c9d
    user_ids: [5f1e0c2a9b3d4e5f6a7b8c90]
    token: ${HARVEST_TOKEN}
  - name: h
    kind: harvest
    account_id: "1"
    token: ${HARVEST_TOKEN}
`

func TestPlanDefaults(t *testing.T) {
	c := mustParse(t, plans)
	tg, ck, hv := c.Sources[0], c.Sources[1], c.Sources[2]
	if tg.Plan != "free" || tg.RateLimit.Requests != 1 || tg.RateLimit.Per.D() != time.Second {
		t.Fatalf("toggl: plan %q rate %+v", tg.Plan, tg.RateLimit)
	}
	// A free Clockify workspace: 30 requests an hour, in the rate limit too.
	if ck.Plan != "free" || ck.RateLimit.Requests != 30 || ck.RateLimit.Per.D() != time.Hour {
		t.Fatalf("clockify: plan %q rate %+v", ck.Plan, ck.RateLimit)
	}
	if hv.Plan != "" || hv.RateLimit.Requests != 100 || hv.RateLimit.Per.D() != 15*time.Second {
		t.Fatalf("harvest: plan %q rate %+v", hv.Plan, hv.RateLimit)
	}
	if ck.Settings().Plan != "free" {
		t.Fatalf("settings lose the plan")
	}
}

// The lines of plans that the plan tests add keys after.
const (
	togglPlanAt    = `    workspace_id: "123"` + "\n"
	clockifyPlanAt = "    workspace_id: 5f1e0c2a9b3d4e5f6a7b8c9d\n"
	harvestPlanAt  = `    account_id: "1"` + "\n"
)

// addAfter returns doc with lines added after its first line after.
func addAfter(doc, after, lines string) string {
	return strings.Replace(doc, after, after+lines, 1)
}

func TestPlanChosen(t *testing.T) {
	c := mustParse(t, addAfter(addAfter(plans, clockifyPlanAt, "    plan: paid\n"), togglPlanAt, "    plan: premium\n"))
	if c.Sources[0].Plan != "premium" || c.Sources[1].Plan != "paid" || c.Sources[1].RateLimit.Requests != 10 || c.Sources[1].RateLimit.Per.D() != time.Second {
		t.Fatalf("plans: %+v / %+v", c.Sources[0], c.Sources[1])
	}
}

func TestPlanExplicitRateLimitWins(t *testing.T) {
	c := mustParse(t, addAfter(plans, clockifyPlanAt, "    plan: free\n    rate_limit: {requests: 20, per: 1h}\n"))
	if rl := c.Sources[1].RateLimit; rl.Requests != 20 || rl.Per.D() != time.Hour || c.Sources[1].Plan != "free" {
		t.Fatalf("rate limit: %+v", c.Sources[1])
	}
}

func TestPlanUnknownNamesTheKey(t *testing.T) {
	cases := []struct{ name, after, add, want string }{
		{"toggl", togglPlanAt, "    plan: gold\n", `t.yaml:6: sources[0].plan: "gold": kind toggl has plans free, starter, premium, enterprise`},
		{"clockify", clockifyPlanAt, "    plan: pro\n", `t.yaml:10: sources[1].plan: "pro": kind clockify has plans free, paid`},
		{"harvest", harvestPlanAt, "    plan: free\n", "t.yaml:15: sources[2].plan: kind harvest has no plans"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(addAfter(plans, tc.after, tc.add)), fullEnv)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// scoped is plans with the Toggl source's scope and trailing days set.
var scoped = addAfter(plans, togglPlanAt, "    scope: workspace\n    trailing_days: 21\n")

func TestTogglScopeReachesSettings(t *testing.T) {
	if s := mustParse(t, scoped).Sources[0].Settings(); s.Scope != "workspace" || s.TrailingDays != 21 {
		t.Fatalf("workspace source: scope %q trailing_days %d", s.Scope, s.TrailingDays)
	}
	if s := mustParse(t, plans).Sources[0].Settings(); s.Scope != "" || s.TrailingDays != 0 {
		t.Fatalf("default source: scope %q trailing_days %d (the kind applies the defaults)", s.Scope, s.TrailingDays)
	}
}

func TestScopeErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct{ from, to, want string }{
		{"scope: workspace", "scope: everyone", "scope"},
		{"trailing_days: 21", "trailing_days: 400", "trailing_days"},
	} {
		doc := strings.Replace(scoped, tc.from, tc.to, 1)
		_, err := Parse("t.yaml", []byte(doc), fullEnv)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error naming %s", tc.to, err, tc.want)
		}
	}
	harvest := addAfter(plans, harvestPlanAt, "    scope: workspace\n")
	_, err := Parse("t.yaml", []byte(harvest), fullEnv)
	if err == nil || !strings.Contains(err.Error(), "sources[2].scope") || !strings.Contains(err.Error(), "does not take") {
		t.Errorf("harvest with scope: got %v", err)
	}
}

// mustParse parses doc with every variable set.
func mustParse(t *testing.T, doc string) *Config {
	t.Helper()
	c, err := Parse("t.yaml", []byte(doc), fullEnv)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
