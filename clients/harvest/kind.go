package harvest

import (
	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/provider"
	"github.com/tidemarkhq/tidemark/schema"
)

// Resources are what a Harvest source serves, in pass order: every
// declared resource with a reader (the first five's own, or an endpoint
// entry).
var Resources = func() []clients.Resource {
	var out []clients.Resource
	for _, r := range schema.Resources() {
		if _, ok := refResources[r]; ok || r == clients.TimeEntries || Endpoints[r] != (Endpoint{}) {
			out = append(out, r)
		}
	}
	return out
}()

func init() {
	provider.MustRegister(provider.Kind{
		Name:      "harvest",
		Doc:       "Harvest API v2 (Bearer token and account id)",
		Keys:      []provider.Key{provider.KeyBaseURL, provider.KeyAccountID},
		Required:  []provider.Key{provider.KeyAccountID, provider.KeyToken},
		Defaults:  defaults,
		Resources: Resources,
		PassCost:  PassCost,
		New:       provider.Constructor(ParamsOf, New),
	})
}

// defaults are the values of the keys a source leaves out.
var defaults = provider.Defaults{BaseURL: DefaultBaseURL, RateLimit: DefaultRateLimit}

// ParamsOf turns a source's settings into Params, with its HTTP client
// built from them (the per-request timeout is a setting Params lack).
func ParamsOf(s provider.Settings, env provider.Env) Params {
	p := Params{Base: provider.BaseOf(s, env), AccountID: s.AccountID}
	p.HTTP = provider.HTTPClient(HTTPConfig(p), s)
	return p
}
