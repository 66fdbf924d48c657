package config

import (
	"strings"
	"testing"
)

const scoped = `
sources:
  - name: t
    kind: toggl
    workspace_id: "123"
    token: ${HARVEST_TOKEN}
    scope: workspace
    trailing_days: 21
  - name: m
    kind: toggl
    workspace_id: "123"
    token: ${HARVEST_TOKEN}
`

func TestTogglScopeReachesSettings(t *testing.T) {
	c, err := Parse("t.yaml", []byte(scoped), fullEnv)
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Sources[0].Settings(); s.Scope != "workspace" || s.TrailingDays != 21 {
		t.Fatalf("workspace source: scope %q trailing_days %d", s.Scope, s.TrailingDays)
	}
	if s := c.Sources[1].Settings(); s.Scope != "" || s.TrailingDays != 0 {
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
	harvest := `
sources:
  - name: h
    kind: harvest
    account_id: "1"
    token: ${HARVEST_TOKEN}
    scope: workspace
`
	_, err := Parse("t.yaml", []byte(harvest), fullEnv)
	if err == nil || !strings.Contains(err.Error(), "scope") || !strings.Contains(err.Error(), "does not take") {
		t.Errorf("harvest with scope: got %v", err)
	}
}
