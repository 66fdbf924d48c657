package app

import (
	"fmt"
	"os"

	"github.com/tidemarkhq/tidemark/lease"
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

func (a *App) memberName() string { return a.member().ID }
