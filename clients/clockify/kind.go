package clockify

import (
	"context"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/provider"
)

// Resources are what a Clockify source serves, in pass order.
var Resources = []clients.Resource{clients.Clients, clients.Users, clients.Projects, clients.Tasks, clients.TimeEntries}

func init() {
	provider.MustRegister(provider.Kind{
		Name:     "clockify",
		Doc:      "Clockify API v1 (X-Api-Key and workspace id)",
		Keys:     []provider.Key{provider.KeyBaseURL, provider.KeyWorkspaceID, provider.KeyUserIDs},
		Required: []provider.Key{provider.KeyWorkspaceID, provider.KeyToken},
		Defaults: provider.Defaults{
			BaseURL: DefaultBaseURL, RateLimit: DefaultRateLimit,
			// The change feed is experimental: a weekly safety reconcile.
			ReconcileSchedule: "0 4 * * 0",
		},
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
		New: func(_ context.Context, s provider.Settings, env provider.Env) (provider.Built, error) {
			p := Params{
				Name: s.Name, BaseURL: s.BaseURL, Token: s.Token, WorkspaceID: s.WorkspaceID,
				UserIDs: s.UserIDs, Contact: env.Contact, Version: env.Version, RateLimit: s.RateLimit,
				Resources: s.Resources, Overlap: s.Overlap,
				Logger: env.Logger, OnResponse: env.OnResponse, OnWait: env.OnWait,
			}
			p.HTTP = provider.HTTPClient(HTTPConfig(p), s)
			c, err := New(p)
			return provider.Built{Source: c}, err
		},
	})
}
