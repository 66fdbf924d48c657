package provider

import (
	"fmt"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/schema"
)

// CheckParams checks what every kind's Params share, after the kind's own
// checks: the rate limit, the API root and the resources. Its errors read
// "<kind> source <name>: …", as the kinds' own do.
func CheckParams(kind, name string, rl httpx.RateLimit, baseURL string, rs []clients.Resource) error {
	if rl.Requests < 1 || rl.Per <= 0 {
		return fmt.Errorf("%s source %s: rate_limit must have requests ≥ 1 and per > 0", kind, name)
	}
	if err := httpx.CheckBaseURL(baseURL); err != nil {
		return fmt.Errorf("%s source %s: %w", kind, name, err)
	}
	if err := schema.Check(rs); err != nil {
		return fmt.Errorf("%s source %s: resources: %w", kind, name, err)
	}
	return nil
}
