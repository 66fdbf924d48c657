package provider_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/provider"
)

func TestRegisterRefusesBadPlans(t *testing.T) {
	newFn := func(context.Context, provider.Settings, provider.Env) (provider.Built, error) {
		return provider.Built{}, nil
	}
	rl := httpx.RateLimit{Requests: 1, Per: time.Second}
	rs := []clients.Resource{clients.Users}
	for _, k := range []provider.Kind{
		{Name: "nodefault", Resources: rs, New: newFn, Plans: []provider.Plan{{Name: "free", RateLimit: rl}}},
		{Name: "baddefault", Resources: rs, New: newFn, Plans: []provider.Plan{{Name: "free", RateLimit: rl}}, DefaultPlan: "paid"},
		{Name: "norate", Resources: rs, New: newFn, Plans: []provider.Plan{{Name: "free"}}, DefaultPlan: "free"},
	} {
		if err := provider.Register(k); err == nil {
			t.Errorf("registered %s", k.Name)
		}
	}
}

func TestPlanOf(t *testing.T) {
	toggl, _ := provider.Lookup("toggl")
	if n, p, fe := toggl.PlanOf(""); fe != nil || n != "free" || p.Hourly != 30 || p.Caps["/me"] != 30 {
		t.Fatalf("toggl default: %s %+v %v", n, p, fe)
	}
	if n, p, fe := toggl.PlanOf("starter"); fe != nil || n != "starter" || p.Hourly != 240 {
		t.Fatalf("toggl starter: %s %+v %v", n, p, fe)
	}
	if _, _, fe := toggl.PlanOf("gold"); fe == nil || fe.Key != provider.KeyPlan || !strings.Contains(fe.Msg, "free, starter, premium, enterprise") {
		t.Fatalf("toggl gold: %v", fe)
	}
	clockify, _ := provider.Lookup("clockify")
	if n, p, fe := clockify.PlanOf(""); fe != nil || n != "free" || p.Hourly != 30 || p.RateLimit != (httpx.RateLimit{Requests: 30, Per: time.Hour}) {
		t.Fatalf("clockify default: %s %+v %v", n, p, fe)
	}
	harvest, _ := provider.Lookup("harvest")
	if n, p, fe := harvest.PlanOf(""); fe != nil || n != "" || p.RateLimit != harvest.Defaults.RateLimit {
		t.Fatalf("harvest: %s %+v %v", n, p, fe)
	}
	if _, _, fe := harvest.PlanOf("free"); fe == nil || fe.Key != provider.KeyPlan {
		t.Fatalf("harvest plan: %v", fe)
	}
}
