// Package configs holds the documented example configurations. They are
// embedded so that `tidemark demo` runs exactly the example that users copy.
package configs

import _ "embed"

// Simulated is configs/simulated.yaml: one source on the built-in simulated
// tracker.
//
//go:embed simulated.yaml
var Simulated []byte
