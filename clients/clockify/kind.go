package clockify

import (
	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/provider"
)

// Resources are what a Clockify source serves, in pass order.
var Resources = []clients.Resource{clients.Clients, clients.Users, clients.Projects, clients.Tasks, clients.TimeEntries}

func init() {
	provider.MustRegister(provider.Kind{
		Name:      "clockify",
		Doc:       "Clockify API v1 (X-Api-Key and workspace id)",
		Keys:      []provider.Key{provider.KeyBaseURL, provider.KeyWorkspaceID, provider.KeyUserIDs},
		Required:  []provider.Key{provider.KeyWorkspaceID, provider.KeyToken},
		Defaults:  defaults,
		Resources: Resources,
		// Budgets per plan (budget.go).
		Plans: Plans, DefaultPlan: DefaultPlan, PassCost: PassCost,
		Validate: func(s *provider.Settings) *provider.FieldError {
			// The feed's windows end a safety lag before the source's clock.
			if err := CheckOverlap(s.Overlap, DefaultSafetyLag); err != nil {
				return provider.Fieldf("overlap", "%v", err)
			}
			return nil
		},
		New: provider.Constructor(paramsOf, New),
	})
}

// defaults are the values of the keys a source leaves out.
var defaults = provider.Defaults{
	BaseURL: DefaultBaseURL, RateLimit: DefaultRateLimit,
	// The change feed is experimental: a weekly safety reconcile.
	ReconcileSchedule: DefaultReconcileSchedule,
}

// paramsOf turns a source's settings into Params, with its HTTP client
// built from them (the per-request timeout is a setting Params lack).
func paramsOf(s provider.Settings, env provider.Env) Params {
	p := Params{Base: provider.BaseOf(s, env), WorkspaceID: s.WorkspaceID, UserIDs: s.UserIDs, Overlap: s.Overlap}
	p.HTTP = provider.HTTPClient(HTTPConfig(p), s)
	return p
}
