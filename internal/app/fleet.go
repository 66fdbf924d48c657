package app

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/tidemarkhq/tidemark/internal/config"

	"github.com/tidemarkhq/tidemark/lease"
	"github.com/tidemarkhq/tidemark/poller"
)

// member is how this process names itself in the fleet: host and pid, so
// that a restarted process is a new member and the status page and
// `cursors` say which machine owns what.
func (a *App) member() lease.Member {
	host, _ := os.Hostname()
	if host == "" {
		host = "unknown"
	}
	return lease.Member{ID: fmt.Sprintf("%s/%d", host, os.Getpid()), Host: host, PID: os.Getpid()}
}

func (a *App) memberName() string { return a.fleetParams().Member.ID }

// fleetParams are a.Fleet with this process's member name when it has none,
// and the sources this config serves with their fingerprints.
func (a *App) fleetParams() poller.FleetParams {
	fp := a.Fleet
	if fp.Member.ID == "" {
		fp.Member = a.member()
	}
	if fp.Member.Sources == nil {
		fp.Member.Sources = Fingerprints(a.Config)
	}
	if fp.Member.ConfigAt.IsZero() {
		fp.Member.ConfigAt = a.configAt
	}
	return fp
}

// Fingerprints are each configured source's Fingerprint, by name.
func Fingerprints(cfg *config.Config) map[string]string {
	out := make(map[string]string, len(cfg.Sources))
	for _, sc := range cfg.Sources {
		out[sc.Name] = Fingerprint(sc)
	}
	return out
}

// Fingerprint digests a source's config as the fleet compares it between
// replicas: every key but the token (a secret never leaves the process,
// not even hashed; a token rotated on one replica first is not a
// different config).
func Fingerprint(sc config.Source) string {
	sc.Token = ""
	b, err := json.Marshal(sc)
	if err != nil {
		return "" // plain data: never
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// fleetTTL is how long a member silent on a live session counts as live,
// for the views that do not heartbeat (`cursors`, the status page).
func (a *App) fleetTTL() time.Duration {
	fp := a.Fleet
	switch {
	case fp.TTL > 0:
		return fp.TTL
	case fp.Heartbeat > 0:
		return 3 * fp.Heartbeat
	}
	return 3 * poller.DefaultHeartbeat
}
