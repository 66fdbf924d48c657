// Package pgtest gives each test its own real PostgreSQL database, cloned from
// a migrated template so that it costs milliseconds.
//
// The server is DATABASE_URL when set. Otherwise one throwaway cluster
// (internal/pgcluster) is shared by every test binary of a `go test ./...`
// run: the first binary starts it, a shared file lock counts the binaries
// using it, and the last one to finish stops it. Under CI=true a test that
// cannot get a database fails; elsewhere it is skipped.
package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidemarkhq/tidemark/internal/pgcluster"
	"github.com/tidemarkhq/tidemark/migrations"
)

// Main runs the tests of a package and releases the shared cluster after.
// Use it from TestMain: func TestMain(m *testing.M) { pgtest.Main(m) }.
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// Run is Main without the exit, for a TestMain with its own clean-up.
func Run(m *testing.M) int {
	code := m.Run()
	release()
	return code
}

var (
	once     sync.Once
	srv      *server
	setupErr error
)

type server struct {
	adminURL string // URL of a maintenance database on the server
	template string
	users    *os.File // shared lock held while this binary uses the cluster
	stateDir string
	cluster  *pgcluster.Cluster
	admin    *pgxpool.Pool
}

// URL creates a fresh migrated database and returns its URL. The database is
// dropped when the test ends.
func URL(t testing.TB) string {
	t.Helper()
	return newDatabase(t, true)
}

// EmptyURL creates a fresh database with no schema at all.
func EmptyURL(t testing.TB) string {
	t.Helper()
	return newDatabase(t, false)
}

func newDatabase(t testing.TB, migrated bool) string {
	t.Helper()
	once.Do(func() { srv, setupErr = setup() })
	if setupErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pgtest: no PostgreSQL (CI=true, so this fails): %v", setupErr)
		}
		t.Skipf("pgtest: no PostgreSQL, skipping: %v", setupErr)
	}
	name := "t_" + randomHex(8)
	ctx := context.Background()
	template := srv.template
	if !migrated {
		template = "template0"
	}
	if err := createFromTemplate(ctx, srv.admin, name, template); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		_, _ = srv.admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	return withDatabase(srv.adminURL, name)
}

// DB creates a fresh migrated database and returns a pool on it, closed when
// the test ends.
func DB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	u := URL(t)
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func createFromTemplate(ctx context.Context, admin *pgxpool.Pool, name, template string) error {
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		_, err = admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{template}.Sanitize()+" STRATEGY FILE_COPY")
		// 55006: the template is briefly in use by a concurrent clone.
		if err == nil || !strings.Contains(err.Error(), "55006") {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

func setup() (*server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := &server{}
	if u := os.Getenv("DATABASE_URL"); u != "" {
		s.adminURL = u
	} else if err := s.startShared(ctx); err != nil {
		return nil, err
	}
	admin, err := pgxpool.New(ctx, s.adminURL)
	if err != nil {
		return nil, err
	}
	if err := admin.Ping(ctx); err != nil {
		admin.Close()
		return nil, fmt.Errorf("connect to %s: %w", redact(s.adminURL), err)
	}
	s.admin = admin
	s.template, err = ensureTemplate(ctx, admin, s.adminURL)
	if err != nil {
		return nil, err
	}
	return s, nil
}

type state struct {
	Dir  string `json:"dir"`
	Port int    `json:"port"`
}

// startShared starts the run's shared cluster, or joins it when another test
// binary already did.
func (s *server) startShared(ctx context.Context) error {
	s.stateDir = filepath.Join(os.TempDir(), fmt.Sprintf("tidemark-pgtest-%d", os.Getuid()))
	if err := os.MkdirAll(s.stateDir, 0o700); err != nil {
		return err
	}
	control, err := lockFile(filepath.Join(s.stateDir, "control.lock"), syscall.LOCK_EX)
	if err != nil {
		return err
	}
	defer control.Close()

	var st state
	if b, err := os.ReadFile(filepath.Join(s.stateDir, "state.json")); err == nil && json.Unmarshal(b, &st) == nil {
		c := &pgcluster.Cluster{Dir: st.Dir, Port: st.Port}
		if ping(ctx, c.URL("postgres")) == nil {
			s.adminURL = c.URL("postgres")
		}
	}
	if s.adminURL == "" {
		c, err := pgcluster.Start(ctx, pgcluster.Options{InMemory: true})
		if err != nil {
			return err
		}
		b, _ := json.Marshal(state{Dir: c.Dir, Port: c.Port})
		if err := os.WriteFile(filepath.Join(s.stateDir, "state.json"), b, 0o600); err != nil {
			c.Stop()
			return err
		}
		s.cluster = c
		s.adminURL = c.URL("postgres")
	}
	s.users, err = lockFile(filepath.Join(s.stateDir, "users.lock"), syscall.LOCK_SH)
	return err
}

// release drops this binary's claim on the shared cluster and stops it when
// no other binary uses it.
func release() {
	if srv == nil || srv.users == nil {
		if srv != nil && srv.admin != nil {
			srv.admin.Close()
		}
		return
	}
	srv.admin.Close()
	control, err := lockFile(filepath.Join(srv.stateDir, "control.lock"), syscall.LOCK_EX)
	if err != nil {
		return
	}
	defer control.Close()
	srv.users.Close()
	last, err := os.OpenFile(filepath.Join(srv.stateDir, "users.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	defer last.Close()
	if syscall.Flock(int(last.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return // another test binary still uses the cluster
	}
	b, err := os.ReadFile(filepath.Join(srv.stateDir, "state.json"))
	var st state
	if err == nil && json.Unmarshal(b, &st) == nil {
		c, err := pgcluster.Attach(st.Dir, st.Port)
		if err == nil {
			_ = c.Stop()
		}
	}
	os.Remove(filepath.Join(srv.stateDir, "state.json"))
}

func lockFile(path string, how int) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ensureTemplate builds, once per server and schema, a migrated database to
// clone. Its name carries a hash of the migration files, so a changed schema
// gets a new template.
func ensureTemplate(ctx context.Context, admin *pgxpool.Pool, adminURL string) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrations.Files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.Files, p)
		h.Write([]byte(p))
		h.Write(b)
		return err
	})
	if err != nil {
		return "", err
	}
	name := "tidemark_tpl_" + hex.EncodeToString(h.Sum(nil))[:12]

	conn, err := admin.Acquire(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Release()
	// Serialize template builds across test binaries on this server.
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(7469646501)"); err != nil {
		return "", err
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock(7469646501)")

	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	building := name + "_building"
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{building}.Sanitize()+" WITH (FORCE)"); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{building}.Sanitize()); err != nil {
		return "", err
	}
	if _, err := migrations.Up(ctx, withDatabase(adminURL, building)); err != nil {
		return "", fmt.Errorf("migrate template: %w", err)
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{building}.Sanitize()+" RENAME TO "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", err
	}
	return name, nil
}

func ping(ctx context.Context, u string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// withDatabase returns u with its database name replaced.
func withDatabase(u, db string) string {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "postgres" && p.Scheme != "postgresql") {
		// keyword/value form
		return u + " dbname=" + db
	}
	p.Path = "/" + db
	return p.String()
}

func redact(u string) string {
	if p, err := url.Parse(u); err == nil && p.User != nil {
		p.User = url.User(p.User.Username())
		return p.String()
	}
	return "the database"
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
