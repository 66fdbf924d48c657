package app

import (
	"fmt"
	"os"

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

// fleetParams are a.Fleet with this process's member name when it has none.
func (a *App) fleetParams() poller.FleetParams {
	fp := a.Fleet
	if fp.Member.ID == "" {
		fp.Member = a.member()
	}
	return fp
}
