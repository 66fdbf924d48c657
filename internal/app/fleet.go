package app

import (
	"fmt"
	"os"
)

// memberName is how this process names itself in the fleet: host and pid.
func (a *App) memberName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}
