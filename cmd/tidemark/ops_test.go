package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// `tidemark health` is the container's HEALTHCHECK: 0 on a 200, 1 otherwise.
func TestHealthCommand(t *testing.T) {
	t.Parallel()
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"health", "--url", srv.URL + "/healthz"}, &out, &errb); code != 0 {
		t.Fatalf("healthy: exit %d: %s", code, errb.String())
	}
	status = http.StatusServiceUnavailable
	if code := run(context.Background(), []string{"health", "--url", srv.URL + "/healthz"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "503") {
		t.Fatalf("unhealthy: exit %d: %s", code, errb.String())
	}
}
