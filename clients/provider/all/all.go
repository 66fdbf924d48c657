// Package all registers every provider kind tidemark ships: import it for
// its side effect wherever sources are configured or built.
package all

import (
	_ "github.com/tidemarkhq/tidemark/clients/clockify"  // kind clockify
	_ "github.com/tidemarkhq/tidemark/clients/harvest"   // kind harvest
	_ "github.com/tidemarkhq/tidemark/clients/simulated" // kind simulated
	_ "github.com/tidemarkhq/tidemark/clients/toggl"     // kind toggl
)
