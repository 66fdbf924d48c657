package poller

// FleetRounds is how many fleet rounds (heartbeats) d has run: tests of
// hand-overs count heartbeats, not seconds of a machine that may be busy.
func FleetRounds(d *Daemon) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fleet == nil {
		return 0
	}
	return d.fleet.rounds
}
