package toggl

import (
	"strconv"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/provider"
)

// Resources are what a Toggl source serves, in pass order.
var Resources = []clients.Resource{clients.Clients, clients.Users, clients.Projects, clients.Tasks, clients.TimeEntries}

func init() {
	provider.MustRegister(provider.Kind{
		Name:      "toggl",
		Doc:       "Toggl Track API v9 (API token and workspace id)",
		Keys:      []provider.Key{provider.KeyBaseURL, provider.KeyWorkspaceID, provider.KeyScope, provider.KeyTrailingDays},
		Required:  []provider.Key{provider.KeyWorkspaceID, provider.KeyToken},
		Defaults:  defaults,
		Resources: Resources,
		// Budgets per plan (budget.go).
		Plans: Plans, DefaultPlan: DefaultPlan, PassCost: PassCost,
		Validate: func(s *provider.Settings) *provider.FieldError {
			if id, err := strconv.ParseInt(s.WorkspaceID, 10, 64); err != nil || id <= 0 {
				return provider.Fieldf(provider.KeyWorkspaceID, "%q: want Toggl's numeric workspace id", s.WorkspaceID)
			}
			return checkScope(s)
		},
		New: provider.Constructor(paramsOf, New),
	})
}

// defaults are the values of the keys a source leaves out.
var defaults = provider.Defaults{
	BaseURL: DefaultBaseURL, RateLimit: DefaultRateLimit,
	// Time entries report their deletions, but clients and users are
	// listed without `since`: their deletions need a reconcile.
	ReconcileSchedule: "30 3 * * *",
}

// paramsOf turns a source's settings into Params, with its HTTP client
// built from them (the per-request timeout is a setting Params lack).
func paramsOf(s provider.Settings, env provider.Env) Params {
	wid, _ := strconv.ParseInt(s.WorkspaceID, 10, 64)
	p := Params{Base: provider.BaseOf(s, env), WorkspaceID: wid, Quota: &Quota{}, Scope: s.Scope, TrailingDays: s.TrailingDays}
	p.HTTP = provider.HTTPClient(HTTPConfig(p), s)
	return p
}
