package poller

import "github.com/tidemarkhq/tidemark/lease"

// The leases live in package lease; these names keep the poller's API.
var (
	// ErrBusy means another pass of the same source holds its lease.
	ErrBusy = lease.ErrBusy
	// ErrLeaseLost means work stopped because its lease is no longer held.
	ErrLeaseLost = lease.ErrLeaseLost
)

// Leaser hands out leases across processes (see package lease).
type Leaser = lease.Leaser

// NewLeaser returns a Leaser that connects to url when first used.
func NewLeaser(url string) *Leaser { return lease.New(url) }
