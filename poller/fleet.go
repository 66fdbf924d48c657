package poller

import (
	"context"
	"slices"
	"time"

	"github.com/tidemarkhq/tidemark/lease"
)

// FleetParams make a daemon a member of the fleet: the daemons on one
// database spread the sources over themselves (lease.Assign over the live
// members) instead of the first one taking them all.
type FleetParams struct {
	Member lease.Member
	// Heartbeat is how often the member heartbeats and rebalances: a share
	// moves within two heartbeats of a member joining or leaving. Default 5 s.
	Heartbeat time.Duration
	// TTL is how long a member that stopped heartbeating while its
	// connection looks open still counts as live. Default 3 heartbeats.
	TTL time.Duration
}

// DefaultHeartbeat is FleetParams.Heartbeat's default.
const DefaultHeartbeat = 5 * time.Second

// fleet is a daemon's membership; d.mu guards members.
type fleet struct {
	FleetParams
	names   []string // every source this daemon schedules, sorted
	members []string // the live members at the last heartbeat; nil: unknown
}

// OwnerLease names the lease a daemon holds on a source it owns.
func OwnerLease(source string) string { return ownerLease(source) }

// JoinFleet makes d a fleet member; call before Start. Every member must
// schedule the same sources: each computes the assignment from its own list.
func (d *Daemon) JoinFleet(fp FleetParams) {
	if fp.Heartbeat <= 0 {
		fp.Heartbeat = DefaultHeartbeat
	}
	if fp.TTL <= 0 {
		fp.TTL = 3 * fp.Heartbeat
	}
	f := &fleet{FleetParams: fp}
	for name := range d.state {
		f.names = append(f.names, name)
	}
	slices.Sort(f.names)
	d.fleet = f
}

// fleetLoop heartbeats and rebalances until the daemon stops. The first
// round runs in Start, before the first passes.
func (d *Daemon) fleetLoop() {
	defer d.wg.Done()
	d.every(d.fleet.Heartbeat, d.rebalance)
}

// rebalance heartbeats, reads the live members, and moves ownership toward
// the assignment: it gives up the sources assigned elsewhere (never during
// a pass or a backfill of theirs: those finish first, and are handed over
// at a later round) and takes those assigned here that are free.
func (d *Daemon) rebalance() {
	f := d.fleet
	ctx, cancel := context.WithTimeout(d.ctx, max(f.Heartbeat, 5*time.Second))
	defer cancel()
	members, err := d.p.leaser.Heartbeat(ctx, f.Member, f.TTL)
	if err != nil {
		if d.ctx.Err() == nil {
			d.log.Warn().Err(err).Msg("fleet heartbeat failed; keeping the sources held, taking none")
		}
		return
	}
	assign := lease.Assign(f.names, members)
	var give []*lease.Lease
	var giveNames, take []string
	d.mu.Lock()
	if !slices.Equal(members, f.members) {
		n := 0
		for _, m := range assign {
			if m == f.Member.ID {
				n++
			}
		}
		d.log.Info().Strs("members", members).Int("share", n).Int("sources", len(f.names)).Msg("fleet membership changed")
	}
	f.members = members
	for _, name := range f.names {
		st := d.state[name]
		mine := assign[name] == f.Member.ID
		st.assigned = mine
		switch {
		case !mine && st.owner != nil && !st.running && !st.backfilling:
			give, giveNames = append(give, st.owner), append(giveNames, name)
			st.disown()
			st.running = true // no pass starts while the lease goes
		case mine && st.owner == nil && !st.running:
			take = append(take, name)
			st.running = true // nor while it is taken
		}
	}
	d.mu.Unlock()
	for i, h := range give {
		h.Release()
		d.owning(giveNames[i], false)
		d.log.Info().Str("source", giveNames[i]).Msg("source assigned to another fleet member; handed over")
	}
	d.ownMany(take)
	d.mu.Lock()
	for _, name := range append(giveNames, take...) {
		d.state[name].running = false
	}
	d.mu.Unlock()
}

// ownMany takes the ownership of the sources the fleet just assigned here
// (their st.running is set): their leases in a few statements, and one
// clean-up after their previous owners, rather than three round trips a
// source (a replica taking 3,000 sources at start spent minutes on it).
// A source it cannot take now is taken at a later round or tick.
func (d *Daemon) ownMany(names []string) {
	if len(names) == 0 {
		return
	}
	leases := make([]string, len(names))
	for i, name := range names {
		leases[i] = ownerLease(name)
	}
	held, err := d.p.leaser.TryAcquireMany(d.ctx, leases)
	if err != nil && d.ctx.Err() == nil {
		d.log.Error().Err(err).Msg("could not take the ownership leases of the sources assigned here")
	}
	var taken []string
	for _, name := range names {
		if held[ownerLease(name)] != nil {
			taken = append(taken, name)
		}
	}
	// Clean up after the previous owners before the sources count as owned
	// here: a queued backfill started here must not be requeued as theirs.
	if len(taken) > 0 {
		d.adopt(taken, d.log)
	}
	d.mu.Lock()
	for _, name := range names {
		st := d.state[name]
		h, ok := held[ownerLease(name)]
		switch {
		case ok:
			st.owned, st.owner = true, h
		case st.owned:
			d.log.Warn().Str("source", name).Msg("lost the source to another replica")
			st.disown()
		}
	}
	d.mu.Unlock()
	if len(taken) == 0 {
		return
	}
	d.log.Info().Int("sources", len(taken)).Msg("this daemon now owns the sources assigned to it")
	for _, name := range taken {
		d.log.Info().Str("source", name).Msg("this daemon now owns the source")
		d.owning(name, true)
	}
}

// OnOwnership sets fn to be told of each source this daemon takes (owned
// true, before its first pass here) and gives up (false: handed over, lost
// to another replica, its lease unreachable), so that a replica keeps what
// a source costs (its client, its metric series) only while it owns it. fn
// runs between that source's passes, never two at once for one source;
// call before Start.
func (d *Daemon) OnOwnership(fn func(source string, owned bool)) { d.ownership = fn }

func (d *Daemon) owning(source string, owned bool) {
	// Another owner may have written in between: look pages up afresh.
	d.p.sources[source].memo.forget("")
	if d.ownership != nil {
		d.ownership(source, owned)
	}
}

// disown forgets what the daemon held of a source it no longer owns: the
// lease and the passes' back-offs and due reconciles (pass_state keeps
// those; the next owner, this daemon again too, reads them back); d.mu is
// held.
func (st *sourceState) disown() {
	st.owner, st.owned, st.loaded, st.passes = nil, false, false, nil
}

// skipsTick reports whether a tick of the source is none of this daemon's
// business: the fleet gives the source to another member and this daemon
// holds no lease on it. Such a tick ends at once instead of waiting for its
// splay on a goroutine of its own, so that a replica's ticks cost its
// share, not every source; d.mu is held.
func (d *Daemon) skipsTick(st *sourceState) bool {
	return d.assignedElsewhere(st) && st.owner == nil && !st.backfilling
}

// assignedElsewhere reports whether the fleet gives source to another
// member (or does not know yet); d.mu is held.
func (d *Daemon) assignedElsewhere(st *sourceState) bool {
	return d.fleet != nil && !st.assigned
}
