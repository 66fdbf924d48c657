package pgcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A cluster started for an owner (Options.Owner, e.g. "demo") records that
// owner and its process in ownerFile. A process killed with SIGKILL cannot
// stop its cluster; the next Start for the same owner finds the clusters
// whose process is gone and stops and removes them, so that they do not pile
// up one per try.
const ownerFile = "tidemark-owner"

// procStart identifies a process beyond its pid (pids are reused): its start
// time in clock ticks since boot, from /proc (Linux); "" elsewhere.
func procStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The command (field 2) may hold spaces and parentheses: count fields
	// after its closing parenthesis. starttime is field 22.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

func alive(pid int, start string) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && err != syscall.EPERM {
		return false
	}
	return start == "" || procStart(pid) == start
}

func (c *Cluster) writeOwner(owner string) error {
	pid := os.Getpid()
	body := fmt.Sprintf("%s\n%d\n%s\n", owner, pid, procStart(pid))
	return os.WriteFile(filepath.Join(c.Dir, ownerFile), []byte(body), 0o644)
}

// reap stops and removes the clusters under parent that were started for
// owner by a process that no longer runs, and returns their directories.
func reap(parent, owner, bin string, cred *syscall.Credential) []string {
	if parent == "" {
		parent = os.TempDir()
	}
	dirs, _ := filepath.Glob(filepath.Join(parent, "tidemark-pg-*"))
	var reaped []string
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // not ours to judge: no owner recorded
		}
		f := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(f) < 2 || f[0] != owner {
			continue
		}
		pid, _ := strconv.Atoi(f[1])
		start := ""
		if len(f) > 2 {
			start = f[2]
		}
		if alive(pid, start) {
			continue
		}
		c := &Cluster{Dir: dir, bin: bin, cred: cred}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = run(c.command(ctx, "pg_ctl", "stop", "-w", "-m", "immediate", "-D", c.data()))
		cancel()
		if os.RemoveAll(dir) == nil {
			reaped = append(reaped, dir)
		}
	}
	return reaped
}
