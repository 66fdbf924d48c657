package app_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/internal/app"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/internal/slowdown"
)

// closedByServer waits until the server closes c (a read ends in EOF or a
// reset), failing after a scaled safety net.
func closedByServer(t *testing.T, c net.Conn, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(slowdown.Scale(time.Minute)))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: still open after the safety net", what)
	}
}

// Issue 30, S3: the ops listener closes a keep-alive connection left idle
// and a webhook POST whose body trickles in, instead of holding them (and
// a file descriptor each) for ever; /healthz still answers meanwhile.
func TestOpsListenerClosesStalledConnections(t *testing.T) {
	t.Parallel()
	u := pgtest.URL(t)
	cfg, err := config.Parse("status.yaml", []byte(statusConfig), func(k string) (string, bool) { return u, k == "DATABASE_URL" })
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.Open(context.Background(), cfg, u, "test", zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	a.OpsTimeouts = app.OpsTimeouts{Idle: 300 * time.Millisecond, Body: 300 * time.Millisecond}
	srv, err := a.ServeOps("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })

	// An idle keep-alive connection, after one answered request.
	idle, err := net.Dial("tcp", srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if _, err := io.WriteString(idle, "GET /healthz HTTP/1.1\r\nHost: ops\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(idle)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	// A webhook POST announcing 10 kB and sending a byte every 50 ms.
	slow, err := net.Dial("tcp", srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if _, err := io.WriteString(slow, "POST /webhooks/alpha HTTP/1.1\r\nHost: ops\r\nContent-Type: application/json\r\nContent-Length: 10000\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if _, err := slow.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()

	closedByServer(t, slow, "the trickling webhook POST")
	closedByServer(t, idle, "the idle keep-alive connection")
	if r, err := http.Get("http://" + srv.Addr + "/healthz"); err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("/healthz after: %v %v", r, err)
	} else {
		r.Body.Close()
	}
}
