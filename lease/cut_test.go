package lease_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/lease"
)

// holeProxy forwards TCP connections to a Postgres server until cut: then
// the connections open so far stop carrying bytes either way and stay
// open, as across a network cut that neither end has noticed yet. Later
// connections are forwarded again.
type holeProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cutNow []chan struct{}
}

func newHoleProxy(t *testing.T, target string) *holeProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holeProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			cut := make(chan struct{})
			p.mu.Lock()
			p.cutNow = append(p.cutNow, cut)
			p.mu.Unlock()
			t.Cleanup(func() { c.Close(); s.Close() })
			go pipeUntil(c, s, cut)
			go pipeUntil(s, c, cut)
		}
	}()
	return p
}

// pipeUntil copies from src to dst until cut, then swallows what src sends.
func pipeUntil(dst, src net.Conn, cut chan struct{}) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		select {
		case <-cut:
			continue
		default:
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

// cut silences every connection open so far.
func (p *holeProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.cutNow {
		close(c)
	}
	p.cutNow = nil
}

// A lease connection cut silently (the server never hears of it) leaves
// its session, and every lock, alive at the server until TCP keepalive
// notices. The reconnecting process ends that session, so its sources are
// taken again at once instead of being nobody's for hours.
func TestSilentlyCutSessionIsEndedOnReconnect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.DB(t)
	cfg := pool.Config().ConnConfig
	p := newHoleProxy(t, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
	u, err := url.Parse(pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.ln.Addr().String()
	a := newLeaser(t, u.String())
	h, err := a.TryAcquire(ctx, "owner:acme")
	if err != nil {
		t.Fatal(err)
	}
	p.cut()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := a.TryAcquire(short, "owner:other"); err == nil {
		t.Fatal("a statement across the cut succeeded")
	}
	// The old session still holds the lock at the server.
	if err := h.Check(ctx, pool); err != nil {
		t.Fatalf("before the reconnect the server still sees the old session's lock: %v", err)
	}
	// The next use reconnects (the cut connection has closed by now on
	// the client's side, after the cancel wait) and ends the old session.
	var h2 *lease.Lease
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		h2, err = a.TryAcquire(ctx, "owner:acme")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the process could not take its own source back after the cut: %v", err)
		}
	}
	defer h2.Release()
	if err := h.Check(ctx, pool); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("the old session's lease: %v, want ErrLeaseLost", err)
	}
	if err := h2.Check(ctx, pool); err != nil {
		t.Fatalf("the new lease: %v", err)
	}
}

// The lease session asks the server to notice a silent peer within about
// a minute, not the two hours of the usual TCP keepalive.
func TestLeaseSessionKeepalives(t *testing.T) {
	t.Parallel()
	u := pgtest.URL(t)
	if cfg, err := pgx.ParseConfig(u); err != nil || strings.HasPrefix(cfg.Host, "/") {
		t.Skip("keepalives are TCP's: this database is on a Unix socket")
	}
	l := newLeaser(t, u)
	if _, err := l.TryAcquire(context.Background(), "owner:acme"); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"tcp_keepalives_idle": "30", "tcp_keepalives_interval": "10", "tcp_keepalives_count": "3", "tcp_user_timeout": "60000"} {
		if got, err := lease.Setting(l, name); err != nil || got != want {
			t.Errorf("%s = %q (%v), want %s", name, got, err, want)
		}
	}
}

// A database that accepts connections and never answers (black-holed)
// fails a lease statement within the leaser's timeout: the leaser's lock,
// and every caller queued on it, is not held for the kernel's connect
// timeout.
func TestBlackHoledServerFailsWithinTheTimeout(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // accepted, never answered
		}
	}()
	l := lease.New("postgres://tidemark@" + ln.Addr().String() + "/tidemark?sslmode=disable")
	defer l.Close()
	lease.Timeout(l, 300*time.Millisecond)
	done := make(chan error, 1)
	go func() {
		_, err := l.TryAcquire(context.Background(), "owner:acme")
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a lease taken from a server that never answered")

		}
	case <-time.After(10 * time.Second):
		t.Fatal("TryAcquire against a black-holed server still waiting after 10 s")
	}
}
