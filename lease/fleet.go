package lease

import (
	"cmp"
	"context"
	"crypto/md5"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"reflect"
	"slices"
	"time"
	"unsafe"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The fleet: daemons sharing one database register as members on their
// lease connection and heartbeat there. A member is live while its lease
// session exists (a killed process's connection drops at once, and with it
// its locks) and its heartbeat is younger than the TTL (a member cut off
// behind a half-open connection). Every member computes the same Assign
// over the same live list, so they agree on who should own what without
// talking; the advisory locks still make sure no source has two owners
// while the members' views differ for a moment.

const sqlHeartbeat = `
INSERT INTO fleet_members (id, host, pid, lease_pid, lease_started, sources, config_at, sources_digest)
VALUES ($1, $2, $3, $4, $5, $6, $7, $9)
ON CONFLICT (id) DO UPDATE
SET lease_pid = EXCLUDED.lease_pid, lease_started = EXCLUDED.lease_started, heartbeat_at = now(),
    sources = CASE WHEN $8 THEN EXCLUDED.sources ELSE fleet_members.sources END,
    config_at = CASE WHEN $8 THEN EXCLUDED.config_at ELSE fleet_members.config_at END,
    sources_digest = CASE WHEN $8 THEN EXCLUDED.sources_digest ELSE fleet_members.sources_digest END
RETURNING xmax = 0`

// sqlLive lists the live members; the dead ones whose session is gone are
// removed on the way (a member that dies leaves nothing behind for long).
// A member's sources come as a digest: they are read only when it changes.
const sqlLive = `
WITH gone AS (
    DELETE FROM fleet_members m
    WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = m.lease_pid AND a.backend_start = m.lease_started)
      AND m.heartbeat_at < now() - $1::interval
)
SELECT m.id, CASE WHEN m.sources IS NOT NULL THEN coalesce(m.sources_digest, '') END, m.config_at FROM fleet_members m
JOIN pg_stat_activity a ON a.pid = m.lease_pid AND a.backend_start = m.lease_started
WHERE m.heartbeat_at > now() - $1::interval
ORDER BY m.id`

// Member names this process in the fleet.
type Member struct {
	ID   string // unique in the fleet: host/pid
	Host string
	PID  int
	// Sources are the sources this member has configured, each with a
	// fingerprint of its config (never a secret): it owns only those. nil:
	// not said (taken to serve every source, as members did before).
	// To change it, give another map: one given is never edited.
	Sources map[string]string
	// ConfigAt is when the member loaded that config: of two members with
	// different configs for one source, the newer config serves it.
	ConfigAt time.Time
}

// Peer is a live fleet member as the others see it.
type Peer struct {
	ID       string
	Sources  map[string]string // nil: an older member that serves every source
	ConfigAt time.Time
	// SourceSince is when each of its sources' config first appeared in
	// the fleet, for the sources whose configs differ between live members
	// (the only ones compared); ConfigAt stands in for one missing.
	SourceSince map[string]time.Time
}

// peerCache keeps the members' sources between heartbeats, by digest, and
// what this member last wrote of its own on which session.
type peerCache struct {
	byID     map[string]peerSources
	sent     session
	sentHash string

	since map[configKey]time.Time // configSince's answers: they never change

	encodedMap    unsafe.Pointer // the map encoded last (encode)
	encodedLen    int
	encoded       []byte
	encodedDigest string
}

// encode returns the JSON of a member's sources and its digest, encoded
// again only for another map (the caller replaces the map, never edits it:
// a 3,000-source map took a millisecond of CPU a heartbeat to encode).
func (c *peerCache) encode(srcs map[string]string) ([]byte, string) {
	if srcs == nil {
		return nil, "nil"
	}
	if p := reflect.ValueOf(srcs).UnsafePointer(); p != c.encodedMap || len(srcs) != c.encodedLen {
		b, _ := json.Marshal(srcs) // a map of strings always encodes
		c.encodedMap, c.encodedLen = p, len(srcs)
		c.encoded, c.encodedDigest = b, fmt.Sprintf("%x", md5.Sum(b))
	}
	return c.encoded, c.encodedDigest
}

type peerSources struct {
	digest  string
	sources map[string]string
}

// Heartbeat records that m is alive on this Leaser's session (registering
// it on first use, and again after a reconnect) and returns the live
// members' ids, sorted, m included.
func (l *Leaser) Heartbeat(ctx context.Context, m Member, ttl time.Duration) ([]string, error) {
	peers, err := l.HeartbeatPeers(ctx, m, ttl)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(peers))
	for i, p := range peers {
		ids[i] = p.ID
	}
	return ids, nil
}

// HeartbeatPeers is Heartbeat returning the live members with the sources
// each has configured.
func (l *Leaser) HeartbeatPeers(ctx context.Context, m Member, ttl time.Duration) ([]Peer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.connect(ctx); err != nil {
		return nil, err
	}
	// An owed unlock keeps a source nobody here owns from the replica
	// assigned it: the heartbeat pays it even when nothing is taken.
	if l.payOwed(ctx); l.conn == nil {
		return nil, errors.New("fleet heartbeat: the lease connection dropped")
	}
	ctx, cancel := l.statement(ctx)
	defer cancel()
	if err := l.writeMember(ctx, m); err != nil {
		return nil, err
	}
	lives, err := l.readLive(ctx, m, ttl)
	if err != nil {
		l.failed()
		return nil, err
	}
	peers := l.peerList(lives)
	if l.peers.since == nil {
		l.peers.since = map[configKey]time.Time{}
	}
	if err := configSince(ctx, l.conn, peers, l.peers.since); err != nil {
		l.failed()
		return nil, err
	}
	return peers, nil
}

// writeMember heartbeats m's row, with its sources when they changed or
// the session is new (a new row): not a few hundred kB every heartbeat of
// a large fleet. The sources' configs are recorded first (configSince).
func (l *Leaser) writeMember(ctx context.Context, m Member) error {
	srcJSON, digest := l.peers.encode(m.Sources)
	var configAt *time.Time
	if !m.ConfigAt.IsZero() {
		configAt = &m.ConfigAt
	}
	hash := fmt.Sprintf("%s/%d", digest, m.ConfigAt.UnixNano())
	send := l.peers.sent != l.sess || l.peers.sentHash != hash
	beat := func(send bool) (inserted bool, err error) {
		src, at := any(srcJSON), any(configAt)
		if !send {
			src, at = nil, nil // unchanged: not even sent (the server would parse it all)
		}
		err = l.conn.QueryRow(ctx, sqlHeartbeat, m.ID, m.Host, m.PID, int64(l.sess.pid), l.sess.started,
			src, at, send, hash).Scan(&inserted)
		return inserted, err
	}
	var err error
	if send {
		err = recordConfigs(ctx, l.conn, m.Sources)
	}
	var inserted bool
	if err == nil {
		inserted, err = beat(send)
	}
	if err == nil && inserted && !send {
		// The row was gone (deleted by hand): written again whole.
		_, err = beat(true)
	}
	if err != nil {
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "42703") {
			return fmt.Errorf("fleet heartbeat: %s: run `tidemark migrate`: %w", pe.Message, err)
		}
		l.failed()
		return fmt.Errorf("fleet heartbeat of %s: %w", m.ID, err)
	}
	l.peers.sent, l.peers.sentHash = l.sess, hash
	return nil
}

// liveMember is a live member's row: its sources' digest (nil: it says
// nothing of its sources) and its load time.
type liveMember struct {
	id       string
	digest   *string
	configAt *time.Time
}

// readLive lists the live members and reads into the cache the sources of
// those whose digest changed (m's own are known here, not read back).
func (l *Leaser) readLive(ctx context.Context, m Member, ttl time.Duration) ([]liveMember, error) {
	rows, err := l.conn.Query(ctx, sqlLive, ttl.String())
	if err != nil {
		return nil, fmt.Errorf("fleet members: %w", err)
	}
	lives, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (liveMember, error) {
		var v liveMember
		return v, r.Scan(&v.id, &v.digest, &v.configAt)
	})
	if err != nil {
		return nil, fmt.Errorf("fleet members: %w", err)
	}
	if l.peers.byID == nil {
		l.peers.byID = map[string]peerSources{}
	}
	var stale []string
	for _, v := range lives {
		if v.id == m.ID && v.digest != nil {
			l.peers.byID[v.id] = peerSources{digest: *v.digest, sources: m.Sources}
			continue
		}
		if c, ok := l.peers.byID[v.id]; v.digest != nil && (!ok || c.digest != *v.digest) {
			stale = append(stale, v.id)
		}
	}
	if len(stale) > 0 {
		if err := l.readPeerSources(ctx, stale); err != nil {
			return nil, err
		}
	}
	return lives, nil
}

// peerList turns the live rows into peers with their cached sources; the
// members gone are forgotten.
func (l *Leaser) peerList(lives []liveMember) []Peer {
	peers := make([]Peer, 0, len(lives))
	seen := make(map[string]peerSources, len(lives))
	for _, v := range lives {
		p := Peer{ID: v.id}
		if v.configAt != nil {
			p.ConfigAt = *v.configAt
		}
		if v.digest != nil {
			c := l.peers.byID[v.id]
			p.Sources = c.sources
			seen[v.id] = c
		}
		peers = append(peers, p)
	}
	l.peers.byID = seen
	return peers
}

// readPeerSources reads the sources of the members named into the cache;
// l.mu is held.
func (l *Leaser) readPeerSources(ctx context.Context, ids []string) error {
	rows, err := l.conn.Query(ctx, `SELECT id, coalesce(sources_digest, ''), sources FROM fleet_members WHERE id = ANY($1) AND sources IS NOT NULL`, ids)
	if err != nil {
		return fmt.Errorf("fleet members' sources: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, digest string
		var srcs map[string]string
		if err := rows.Scan(&id, &digest, &srcs); err != nil {
			return fmt.Errorf("fleet members' sources: %w", err)
		}
		l.peers.byID[id] = peerSources{digest: digest, sources: srcs}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("fleet members' sources: %w", err)
	}
	return nil
}

// LivePeers reads the live members with their sources without joining the
// fleet (`cursors`, the status page).
func LivePeers(ctx context.Context, q Queryer, ttl time.Duration) ([]Peer, error) {
	rows, err := q.Query(ctx, `
SELECT m.id, m.sources, m.config_at FROM fleet_members m
JOIN pg_stat_activity a ON a.pid = m.lease_pid AND a.backend_start = m.lease_started
WHERE m.heartbeat_at > now() - $1::interval
ORDER BY m.id`, ttl.String())
	if err != nil {
		return nil, fmt.Errorf("fleet members: %w", err)
	}
	peers, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Peer, error) {
		var p Peer
		var at *time.Time
		err := r.Scan(&p.ID, &p.Sources, &at)
		if at != nil {
			p.ConfigAt = *at
		}
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("fleet members: %w", err)
	}
	if err := configSince(ctx, q, peers, map[configKey]time.Time{}); err != nil {
		return nil, err
	}
	return peers, nil
}

// Servers returns, for each source a live member has configured, the ids
// of the members that may own it, sorted. Members with different configs
// for one source (their fingerprints differ): the newest config wins (the
// one that appeared in the fleet last, SourceSince, then the greater
// fingerprint, so that every member picks the same), and the members with another config serve it not at
// all: two configs of one account never poll it side by side. A member
// that says nothing of its sources (older) may serve every source named.
func Servers(peers []Peer) map[string][]string {
	type best struct {
		fp string
		at time.Time
	}
	n := 0
	for _, p := range peers {
		n = max(n, len(p.Sources))
	}
	win := make(map[string]best, n) // sized once: every heartbeat builds it
	for _, p := range peers {
		for name, fp := range p.Sources {
			at, ok := p.SourceSince[name]
			if !ok {
				at = p.ConfigAt
			}
			b, ok := win[name]
			if !ok || at.After(b.at) || (at.Equal(b.at) && fp > b.fp) {
				win[name] = best{fp, at}
			}
		}
	}
	out := make(map[string][]string, len(win))
	for _, p := range peers {
		for name, fp := range p.Sources {
			if win[name].fp == fp {
				out[name] = append(out[name], p.ID)
			}
		}
	}
	for _, p := range peers {
		if p.Sources == nil {
			for name := range out {
				out[name] = append(out[name], p.ID)
			}
		}
	}
	for _, ids := range out {
		slices.Sort(ids)
	}
	return out
}

// AssignServed is Assign where each source goes only to the members that
// serve it (Servers): a member that does not know a source never owns it,
// and a source no live member has is in no one's share.
func AssignServed(peers []Peer) map[string]string {
	return AssignServers(Servers(peers), peers)
}

// AssignServers is AssignServed with the peers' Servers computed already
// (a heartbeat uses them thrice).
func AssignServers(servers map[string][]string, peers []Peer) map[string]string {
	names := make([]string, 0, len(servers))
	for name := range servers {
		names = append(names, name)
	}
	ids := make([]string, len(peers))
	for i, p := range peers {
		ids[i] = p.ID
	}
	return assign(names, ids, func(name string) []string { return servers[name] })
}

// Leave removes m from the fleet at once (a clean stop), so that the others
// take its share at their next heartbeat rather than after the TTL.
func (l *Leaser) Leave(ctx context.Context, m Member) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil || l.conn.IsClosed() {
		return nil
	}
	if _, err := l.conn.Exec(ctx, `DELETE FROM fleet_members WHERE id = $1`, m.ID); err != nil {
		l.failed()
		return fmt.Errorf("leave the fleet: %w", err)
	}
	return nil
}

// Assign spreads names (sources) over members by rendezvous hashing with
// bounded loads: each name goes to the member that scores highest for it
// among those holding fewer than ⌈N/R⌉+1 names, names taken in the order of
// their own hash. The same inputs give the same answer in every process;
// a member joining or leaving moves about its share (N/R names) and little
// else. Members with no names get none; no members, an empty map.
func Assign(names, members []string) map[string]string {
	ms := slices.Clone(members)
	slices.Sort(ms)
	ms = slices.Compact(ms)
	return assign(names, members, func(string) []string { return ms })
}

// assign is Assign where a name goes to one of its candidates (sorted),
// under the bound when one is, else to the best of them.
func assign(names, members []string, candidates func(name string) []string) map[string]string {
	out := make(map[string]string, len(names))
	if len(members) == 0 {
		return out
	}
	ms := slices.Clone(members)
	slices.Sort(ms)
	ms = slices.Compact(ms)
	ns := slices.Clone(names)
	slices.SortFunc(ns, func(a, b string) int {
		return cmp.Or(cmp.Compare(score("", a), score("", b)), cmp.Compare(a, b))
	})
	limit := (len(ns)+len(ms)-1)/len(ms) + 1
	load := make(map[string]int, len(ms))
	for _, n := range ns {
		best, bestScore, over, overScore := "", uint64(0), "", uint64(0)
		for _, m := range candidates(n) {
			s := score(m, n)
			if over == "" || s > overScore {
				over, overScore = m, s
			}
			if load[m] >= limit {
				continue
			}
			if best == "" || s > bestScore {
				best, bestScore = m, s
			}
		}
		if best == "" {
			// Every member that serves it is full: the best of them
			// all the same (only a source's own servers may own it).
			best = over
		}
		if best == "" {
			continue
		}
		out[n] = best
		load[best]++
	}
	return out
}

func score(member, name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(member))
	h.Write([]byte{0})
	h.Write([]byte(name))
	// fnv's low bits mix poorly for similar inputs: finish with a
	// splitmix64 round so that scores of "src-1", "src-2"… are independent.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// sqlHolders lists the advisory locks held in this database, with the
// session holding each and the fleet member on that session; Holders keeps
// those it was asked about. The join with the names is done in Go: joined
// in SQL, the planner (which cannot estimate an unnested array or pg_locks)
// compared every name with every lock, 52 ms a call for 1,000 sources,
// run by every member's heartbeat. Both system views are read once
// (MATERIALIZED), not again for each row of the other.
const sqlHolders = `
WITH l AS MATERIALIZED (
  SELECT l.classid::bigint AS hi, l.objid::bigint AS lo, l.pid FROM pg_locks l
  WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
), a AS MATERIALIZED (SELECT pid, backend_start FROM pg_stat_activity)
SELECT l.hi, l.lo, COALESCE(m.id, 'pid ' || l.pid::text || ' (not a fleet member)')
FROM l JOIN a ON a.pid = l.pid
LEFT JOIN fleet_members m ON m.lease_pid = l.pid AND m.lease_started = a.backend_start`

// Queryer is what Holders needs: a pool, a connection or a transaction.
type Queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Holders returns, for the leases named that someone holds, who: the fleet
// member's id, or the backend pid of a process that is no member (a CLI
// backfill). Leases nobody holds are absent.
func Holders(ctx context.Context, q Queryer, names []string) (map[string]string, error) {
	byKey := make(map[int64]string, len(names))
	for _, n := range names {
		byKey[Key(n)] = n
	}
	rows, err := q.Query(ctx, sqlHolders)
	if err != nil {
		return nil, fmt.Errorf("lease holders: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var hi, lo int64
		var who string
		if err := rows.Scan(&hi, &lo, &who); err != nil {
			return nil, fmt.Errorf("lease holders: %w", err)
		}
		if name, ok := byKey[int64(uint64(hi)<<32|uint64(lo))]; ok {
			out[name] = who
		}
	}
	return out, rows.Err()
}
