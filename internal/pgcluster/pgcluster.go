// Package pgcluster starts a private, throwaway PostgreSQL cluster from the
// locally installed server binaries: initdb into a temporary directory, a free
// port on 127.0.0.1, trust auth. Tests and `tidemark demo` use it when no
// DATABASE_URL is given. When running as root it runs the server as the
// `postgres` user, since the server refuses to run as root.
package pgcluster

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Cluster is a running throwaway server.
type Cluster struct {
	Dir  string // parent temp dir; data lives in Dir/data
	Port int
	bin  string
	cred *syscall.Credential
	// Reaped lists the clusters of the same owner, left behind by a process
	// killed before it could stop them, that Start stopped and removed.
	Reaped []string
}

// URL returns a connection URL for database db.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, db)
}

// BinDir finds the server binaries: $TIDEMARK_PG_BINDIR, `pg_config
// --bindir`, PATH, then Debian's /usr/lib/postgresql/VERSION/bin of any
// version, newest first.
func BinDir() (string, error) {
	if d := os.Getenv("TIDEMARK_PG_BINDIR"); d != "" {
		return d, nil
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		d := strings.TrimSpace(string(out))
		if isFile(filepath.Join(d, "initdb")) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	if d := newestBinDir("/usr/lib/postgresql"); d != "" {
		return d, nil
	}
	return "", errors.New("no PostgreSQL server binaries found (looked at $TIDEMARK_PG_BINDIR, pg_config --bindir, PATH, /usr/lib/postgresql/*/bin); install PostgreSQL or set DATABASE_URL")
}

// newestBinDir is root/VERSION/bin of the newest VERSION ("18", "9.6")
// that has an initdb; "" when none has.
func newestBinDir(root string) string {
	ents, _ := os.ReadDir(root)
	type ver struct {
		dir          string
		major, minor int
	}
	var vs []ver
	for _, e := range ents {
		majS, minS, _ := strings.Cut(e.Name(), ".")
		maj, err := strconv.Atoi(majS)
		if err != nil {
			continue
		}
		mn, _ := strconv.Atoi(minS)
		d := filepath.Join(root, e.Name(), "bin")
		if isFile(filepath.Join(d, "initdb")) {
			vs = append(vs, ver{d, maj, mn})
		}
	}
	slices.SortFunc(vs, func(a, b ver) int { return cmp.Or(cmp.Compare(b.major, a.major), cmp.Compare(b.minor, a.minor)) })
	if len(vs) == 0 {
		return ""
	}
	return vs[0].dir
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// Options tune Start.
type Options struct {
	// InMemory puts the data directory on /dev/shm when it exists: cloning a
	// database there takes tens of milliseconds instead of hundreds.
	InMemory bool
	// Owner, when set, records who started the cluster (e.g. "demo") and
	// this process in it; Start then first removes the clusters of the same
	// owner whose process is gone (killed with SIGKILL, say).
	Owner string
}

// Start creates and starts a cluster under a new temporary directory.
func Start(ctx context.Context, opt Options) (*Cluster, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	parent := ""
	if st, err := os.Stat("/dev/shm"); opt.InMemory && err == nil && st.IsDir() {
		parent = "/dev/shm"
	}
	dir, err := os.MkdirTemp(parent, "tidemark-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, bin: bin}
	if os.Geteuid() == 0 {
		cred, err := postgresUser()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		c.cred = cred
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if opt.Owner != "" {
		c.Reaped = reap(parent, opt.Owner, bin, c.cred)
		if err := c.writeOwner(opt.Owner); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if err := c.initdb(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// A port picked free may be taken before the server binds it: retry.
	for attempt := 0; ; attempt++ {
		c.Port, err = freePort()
		if err == nil {
			err = c.start(ctx)
		}
		if err == nil {
			return c, nil
		}
		if attempt == 4 || ctx.Err() != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, the server must run as user postgres, which does not exist: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	// Its own process group: a Ctrl-C at the terminal goes to us, and we
	// stop the server ourselves, in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if c.cred != nil {
		cmd.SysProcAttr.Credential = c.cred
	}
	return cmd
}

func run(cmd *exec.Cmd) error {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w\n%s", filepath.Base(cmd.Path), err, strings.TrimSpace(out.String()))
	}
	return nil
}

func (c *Cluster) data() string { return filepath.Join(c.Dir, "data") }

func (c *Cluster) initdb(ctx context.Context) error {
	return run(c.command(ctx, "initdb", "-D", c.data(), "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync"))
}

func (c *Cluster) start(ctx context.Context) error {
	// Durability settings off: this cluster is thrown away, and tests that
	// need crash safety kill our processes, never the server.
	opts := strings.Join([]string{
		"-p", strconv.Itoa(c.Port), "-h", "127.0.0.1", "-k", c.Dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=300", "-c", "shared_buffers=128MB",
	}, " ")
	return run(c.command(ctx, "pg_ctl", "start", "-w", "-t", "60", "-D", c.data(),
		"-l", filepath.Join(c.Dir, "server.log"), "-o", opts))
}

// Attach returns a handle on a cluster started earlier, possibly by another
// process, so that it can be stopped.
func Attach(dir string, port int) (*Cluster, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Port: port, bin: bin}
	if os.Geteuid() == 0 {
		if c.cred, err = postgresUser(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Restart stops the server (fast shutdown: sessions are cut, as in a real
// restart) and starts it again on the same port and data.
func (c *Cluster) Restart(ctx context.Context, down time.Duration) error {
	if err := run(c.command(ctx, "pg_ctl", "stop", "-w", "-m", "fast", "-D", c.data())); err != nil {
		return err
	}
	select {
	case <-time.After(down):
	case <-ctx.Done():
		return ctx.Err()
	}
	return c.start(ctx)
}

// Stop stops the server and removes its files.
func (c *Cluster) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := run(c.command(ctx, "pg_ctl", "stop", "-w", "-m", "immediate", "-D", c.data()))
	if rmErr := os.RemoveAll(c.Dir); err == nil {
		err = rmErr
	}
	return err
}

// Running reports whether the server of a data directory answers.
func (c *Cluster) Running(ctx context.Context) bool {
	return run(c.command(ctx, "pg_ctl", "status", "-D", c.data())) == nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
