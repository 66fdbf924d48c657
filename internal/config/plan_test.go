package config

import (
	"strings"
	"testing"
	"time"
)

const plans = `
sources:
  - name: t
    kind: toggl
    workspace_id: "123"
    token: ${HARVEST_TOKEN}
  - name: c
    kind: clockify
    workspace_id: 5f1e0c2a9b3d4e5f6a7b8c9d
    token: ${HARVEST_TOKEN}
  - name: h
    kind: harvest
    account_id: "1"
    token: ${HARVEST_TOKEN}
`

func TestPlanDefaults(t *testing.T) {
	c, err := Parse("t.yaml", []byte(plans), fullEnv)
	if err != nil {
		t.Fatal(err)
	}
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

func TestPlanChosen(t *testing.T) {
	doc := strings.Replace(plans, "    workspace_id: 5f1e0c2a9b3d4e5f6a7b8c9d\n", "    workspace_id: 5f1e0c2a9b3d4e5f6a7b8c9d\n    plan: paid\n", 1)
	doc = strings.Replace(doc, `    workspace_id: "123"`+"\n", `    workspace_id: "123"`+"\n    plan: premium\n", 1)
	c, err := Parse("t.yaml", []byte(doc), fullEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.Sources[0].Plan != "premium" || c.Sources[1].Plan != "paid" || c.Sources[1].RateLimit.Requests != 10 || c.Sources[1].RateLimit.Per.D() != time.Second {
		t.Fatalf("plans: %+v / %+v", c.Sources[0], c.Sources[1])
	}
}

func TestPlanExplicitRateLimitWins(t *testing.T) {
	doc := strings.Replace(plans, "    workspace_id: 5f1e0c2a9b3d4e5f6a7b8c9d\n", "    workspace_id: 5f1e0c2a9b3d4e5f6a7b8c9d\n    plan: free\n    rate_limit: {requests: 20, per: 1h}\n", 1)
	c, err := Parse("t.yaml", []byte(doc), fullEnv)
	if err != nil {
		t.Fatal(err)
	}
	if rl := c.Sources[1].RateLimit; rl.Requests != 20 || rl.Per.D() != time.Hour || c.Sources[1].Plan != "free" {
		t.Fatalf("rate limit: %+v", c.Sources[1])
	}
}

func TestPlanUnknownNamesTheKey(t *testing.T) {
	cases := []struct{ name, after, add, want string }{
		{"toggl", `    workspace_id: "123"` + "\n", "    plan: gold\n", `t.yaml:6: sources[0].plan: "gold": kind toggl has plans free, starter, premium, enterprise`},
		{"clockify", "    workspace_id: 5f1e0c2a9b3d4e5f6a7b8c9d\n", "    plan: pro\n", `t.yaml:10: sources[1].plan: "pro": kind clockify has plans free, paid`},
		{"harvest", `    account_id: "1"` + "\n", "    plan: free\n", "t.yaml:14: sources[2].plan: kind harvest has no plans"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(plans, tc.after, tc.after+tc.add, 1)
			_, err := Parse("t.yaml", []byte(doc), fullEnv)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}
