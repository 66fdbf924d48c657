package harvest

import (
	"fmt"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/provider"
	"github.com/tidemarkhq/tidemark/schema"
)

// PassCost is what one pass of r costs at least (tidemark doctor): one
// listing, but a resource listed under its parents' records (payments,
// messages, rates) also lists under each parent changed since the cursor
// (none when idle) and, in a reconcile, under every parent.
func PassCost(r clients.Resource, p provider.PassShape, _ provider.Settings) provider.Cost {
	def, ok := schema.Lookup(r)
	if r == clients.TimeEntries && !p.Reconcile {
		return provider.Cost{Requests: 1, Note: "one listing, and one of the running timers while any runs"}
	}
	if !ok || def.Parent == "" {
		return provider.Cost{Requests: 1, Note: "one listing"}
	}
	if !p.Reconcile {
		return provider.Cost{Requests: 1, Note: fmt.Sprintf("the %s changed since the cursor, and one listing under each (none when idle)", def.Parent)}
	}
	n := 1
	if def.Parent == clients.Users {
		n = max(p.Users, 1)
	}
	return provider.Cost{Requests: 1 + n, Note: fmt.Sprintf("every %s, and one listing under each (%d assumed)", def.Parent, n)}
}
