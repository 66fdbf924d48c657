package poller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
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

// unownedEvery is how many heartbeats apart the fleet's first member looks
// for sources nobody polls (watchUnowned): 30 s at the default heartbeat.
const unownedEvery = 6

// fleet is a daemon's membership; d.mu guards it.
type fleet struct {
	FleetParams
	names   []string // every source this daemon schedules, sorted
	members []string // the live members at the last heartbeat; nil: unknown

	// differs is the difference with the peers' source lists last logged
	// (logged once per difference); refused the same for sources whose
	// newer config is on another member.
	differs, refused string
	// unretired is the list of sources last brought back from retirement
	// (fmt of the sorted names): done once per change of what it serves.
	unretired string
	// unownedSince: when the sources found without an owner were first
	// seen so (the fleet's first member counts them, see watchUnowned).
	unownedSince map[string]time.Time
	watching     atomic.Bool // a watchUnowned runs
	rounds       int         // rebalances so far
}

// FleetObserver is an Observer that also wants the fleet's sources that
// nobody polls: unowned are configured on a live member and had no owner
// at two looks in a row (unownedEvery heartbeats apart); unserved the
// database knows (they have cursors, not retired) and no live member has
// configured. Only the
// fleet's first member reports them; the others report none.
type FleetObserver interface {
	FleetSources(unowned, unserved []string)
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
	if f.Member.Sources == nil {
		// No fingerprints given: the names say what it serves.
		f.Member.Sources = make(map[string]string, len(f.names))
		for _, name := range f.names {
			f.Member.Sources[name] = ""
		}
	}
	d.fleet = f
}

// SetFleetSources changes what this member advertises after a reload
// (AddSource, RemoveSource): each source's config fingerprint, and when
// that config was loaded.
func (d *Daemon) SetFleetSources(fingerprints map[string]string, at time.Time) {
	if d.fleet == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fleet.Member.Sources, d.fleet.Member.ConfigAt = maps.Clone(fingerprints), at
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
	d.mu.Lock()
	me := f.Member
	d.mu.Unlock()
	peers, err := d.p.leaser.HeartbeatPeers(ctx, me, f.TTL)
	if err != nil {
		if d.ctx.Err() == nil {
			d.log.Warn().Err(err).Msg("fleet heartbeat failed; keeping the sources held, taking none")
		}
		return
	}
	members := make([]string, len(peers))
	for i, p := range peers {
		members[i] = p.ID
	}
	// Only the members that have a source configured share it: a member
	// that does not know a source never owns it (issue 25).
	servers := lease.Servers(peers)
	assign := lease.AssignServers(servers, peers)
	d.noteDifferences(me, peers, servers)
	d.unretire(ctx, me)
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
		mine := assign[name] == me.ID
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
	d.mu.Lock()
	f.rounds++
	// Not in Start's round (the first passes come first), then every
	// unownedEvery rounds: the look reads every lock and cursor source,
	// which was a sixth of an idle daemon's database time every
	// heartbeat, and the alert on it waits minutes anyway.
	watch := f.rounds > 1 && (f.rounds-2)%unownedEvery == 0
	d.mu.Unlock()
	first := len(members) > 0 && members[0] == me.ID
	if first && watch {
		// Beside the rounds, never two at once: a slow look (thousands of
		// leases) must not delay the next hand-over.
		if f.watching.CompareAndSwap(false, true) {
			d.wg.Add(1)
			go func() {
				defer d.wg.Done()
				defer f.watching.Store(false)
				ctx, cancel := context.WithTimeout(d.ctx, max(f.Heartbeat, 5*time.Second))
				defer cancel()
				d.watchUnowned(ctx, servers)
			}()
		}
	} else if fo, ok := d.p.metrics.(FleetObserver); ok && !first {
		fo.FleetSources(nil, nil)
	}
}

// unretire brings this member's sources back from retirement once it
// advertises them (heartbeat done): configured again, a retired source
// shows again and is counted as not served when dropped again. One
// statement per change of the member's sources, not per heartbeat.
func (d *Daemon) unretire(ctx context.Context, me lease.Member) {
	names := slices.Sorted(maps.Keys(me.Sources))
	key := fmt.Sprint(names)
	d.mu.Lock()
	done := d.fleet.unretired == key
	d.mu.Unlock()
	if done || len(names) == 0 {
		return
	}
	back, err := d.p.store.Unretire(ctx, names)
	if err != nil {
		if d.ctx.Err() == nil {
			d.log.Warn().Err(err).Msg("could not bring this replica's retired sources back into view; trying again at the next heartbeat")
		}
		return
	}
	if len(back) > 0 {
		d.log.Info().Strs("sources", back).Msg("retired sources configured again: shown again, and alerted on when no replica serves them")
	}
	d.mu.Lock()
	d.fleet.unretired = key
	d.mu.Unlock()
}

// noteDifferences logs, once per difference, that this member's sources
// differ from its peers' (a rolling deploy, a config edited on one
// replica, two teams on one database): which names only it has, which
// only they have, and which of its sources a newer config elsewhere
// serves instead.
func (d *Daemon) noteDifferences(me lease.Member, peers []lease.Peer, servers map[string][]string) {
	f := d.fleet
	var onlyHere, onlyThere []string
	theirs := map[string]bool{}
	for _, p := range peers {
		if p.ID == me.ID || p.Sources == nil {
			continue
		}
		for name := range p.Sources {
			theirs[name] = true
			if _, ok := me.Sources[name]; !ok && !slices.Contains(onlyThere, name) {
				onlyThere = append(onlyThere, name)
			}
		}
	}
	if len(peers) > 1 {
		for name := range me.Sources {
			if !theirs[name] {
				onlyHere = append(onlyHere, name)
			}
		}
	}
	slices.Sort(onlyHere)
	slices.Sort(onlyThere)
	var refused []string
	for name, ids := range servers {
		if _, ok := me.Sources[name]; ok && !slices.Contains(ids, me.ID) {
			refused = append(refused, name)
		}
	}
	slices.Sort(refused)
	d.mu.Lock()
	key := fmt.Sprint(onlyHere, onlyThere)
	logDiff := key != f.differs && len(onlyHere)+len(onlyThere) > 0
	f.differs = key
	rkey := fmt.Sprint(refused)
	logRefused := rkey != f.refused && len(refused) > 0
	f.refused = rkey
	d.mu.Unlock()
	if logDiff {
		d.log.Warn().Strs("only_here", onlyHere).Strs("only_on_peers", onlyThere).
			Msg("this replica's sources differ from its fleet peers': each source is polled only by the replicas that have it configured")
	}
	if logRefused {
		d.log.Warn().Strs("sources", refused).
			Msg("a newer config of these sources runs on another replica: it serves them, this replica does not (see README, Running in production)")
	}
}

// watchUnowned counts the fleet's sources nobody polls, for the metrics
// (FleetObserver): run by the fleet's first member only, every
// unownedEvery heartbeats, so a fleet pays for one look in that time.
func (d *Daemon) watchUnowned(ctx context.Context, servers map[string][]string) {
	fo, ok := d.p.metrics.(FleetObserver)
	if !ok {
		return
	}
	known, err := d.p.store.KnownSources(ctx)
	if err != nil {
		d.log.Warn().Err(err).Msg("could not list the sources the database knows")
		return
	}
	var unserved []string
	for _, name := range known {
		if _, ok := servers[name]; !ok {
			unserved = append(unserved, name)
		}
	}
	names := make([]string, 0, len(servers))
	leases := make([]string, 0, len(servers))
	for name := range servers {
		names, leases = append(names, name), append(leases, ownerLease(name))
	}
	holders, err := lease.Holders(ctx, d.p.pool, leases)
	if err != nil {
		d.log.Warn().Err(err).Msg("could not read who owns the fleet's sources")
		return
	}
	now := time.Now()
	f := d.fleet
	since := map[string]time.Time{}
	var unowned []string
	d.mu.Lock()
	for _, name := range names {
		if holders[ownerLease(name)] != "" {
			continue
		}
		first, ok := f.unownedSince[name]
		if !ok {
			first = now
		}
		since[name] = first
		// A hand-over leaves a source free until the next member's
		// heartbeat: only one still free at the next look counts.
		if now.Sub(first) >= f.Heartbeat {
			unowned = append(unowned, name)
		}
	}
	f.unownedSince = since
	d.mu.Unlock()
	slices.Sort(unowned)
	fo.FleetSources(unowned, unserved)
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
	if src := d.p.src(source); src != nil {
		src.memo.forget("")
	}
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
