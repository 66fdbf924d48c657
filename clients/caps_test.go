package clients_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tidemarkhq/tidemark/clients"
)

type bare struct{ name string }

func (b bare) Name() string                { return b.name }
func (bare) Resources() []clients.Resource { return nil }
func (bare) List(context.Context, clients.Resource, clients.Window, func(context.Context, clients.Page) error) error {
	return nil
}
func (bare) Mode(clients.Resource) string { return "feed" }

type wrapper struct {
	clients.Source
	inner clients.Source
}

func (w wrapper) Unwrap() clients.Source { return w.inner }

// As finds a capability through any number of wrappers, stops at a wrapper
// that wraps nothing now, and ends on a cycle.
func TestAsWalksWrappers(t *testing.T) {
	t.Parallel()
	b := bare{"acme"}
	w := wrapper{Source: b, inner: wrapper{Source: b, inner: b}}
	if m, ok := clients.As[clients.Moder](w); !ok || m.Mode("x") != "feed" {
		t.Errorf("Moder through two wrappers: %v %v", m, ok)
	}
	if _, ok := clients.As[clients.Confirmer](w); ok {
		t.Error("found a Confirmer nobody has")
	}
	if _, ok := clients.As[clients.Moder](wrapper{Source: nil, inner: nil}); ok {
		t.Error("found a Moder in a wrapper of nothing")
	}
	c := &cycle{}
	c.next = c
	if _, ok := clients.As[clients.Confirmer](c); ok {
		t.Error("found a Confirmer in a cycle")
	}
}

type cycle struct {
	bare
	next clients.Source
}

func (c *cycle) Unwrap() clients.Source { return c.next }

// optional are the optional capabilities of a source; a bare type assertion
// to one of them, anywhere in the program, is lost the day the value is
// wrapped (issue 30): clients.As is the one way to find them.
var bareAssertion = regexp.MustCompile(`\.\((clients\.)?(Scoper|Confirmer|Moder|Unwrapper)\)|\.\(webhooks\.Decoder\)`)

func TestNoBareCapabilityAssertion(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		if filepath.Base(path) == "caps.go" && filepath.Base(filepath.Dir(path)) == "clients" {
			return nil // As itself
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if bareAssertion.MatchString(line) {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s:%d: a bare assertion to an optional capability (use clients.As): %s", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
