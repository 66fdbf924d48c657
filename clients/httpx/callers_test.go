package httpx_test

import (
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// callersAllowed are the only places outside this package that may build
// an HTTP client or use net/http's default one (issue 23, item 4): every
// request to a provider goes through httpx (no redirects, redaction,
// limiter, budget). Keys are paths from the module root (a folder ends in
// /).
var callersAllowed = map[string]string{
	"clients/httpx/":      "the providers' client itself",
	"events/webhook.go":   "outbound deliveries: its own client, which follows no redirect",
	"internal/fakeapi/":   "the fakes' webhook sender (test infrastructure)",
	"cmd/tidemark-bench/": "the bench harness asks the fakes' control API",
	"cmd/tidemark/ops.go": "`tidemark health` asks the daemon's own /healthz",
	"examples/invoicer/":  "the example's accounting API, not a provider",
}

// TestOnlyHTTPXTalksToProviders parses every non-test Go file of the module
// and fails on http.Get/Head/Post/PostForm, http.DefaultClient,
// http.DefaultTransport and any http.Client built (a literal, new, or a
// variable of that type) outside callersAllowed.
func TestOnlyHTTPXTalksToProviders(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	fset := gotoken.NewFileSet()
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if name := d.Name(); rel != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || allowed(rel) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, use := range httpClientUses(f) {
			found = append(found, rel+":"+strconv.Itoa(fset.Position(use.pos).Line)+": "+use.what)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Fatalf("HTTP requests outside httpx (use an httpx.Client, or add the place to callersAllowed with why):\n%s", strings.Join(found, "\n"))
	}
}

func allowed(rel string) bool {
	for p := range callersAllowed {
		if rel == p || strings.HasSuffix(p, "/") && strings.HasPrefix(rel, p) {
			return true
		}
	}
	return false
}

type use struct {
	pos  gotoken.Pos
	what string
}

// httpClientUses lists f's uses of net/http's default client and of
// http.Client values it builds.
func httpClientUses(f *ast.File) []use {
	name := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "net/http" {
			name = "http"
			if imp.Name != nil {
				name = imp.Name.Name
			}
		}
	}
	if name == "" || name == "_" {
		return nil
	}
	isHTTP := func(e ast.Expr, sels ...string) (string, bool) {
		se, ok := e.(*ast.SelectorExpr)
		if !ok {
			return "", false
		}
		id, ok := se.X.(*ast.Ident)
		if !ok || id.Name != name {
			return "", false
		}
		for _, s := range sels {
			if se.Sel.Name == s {
				return "http." + s, true
			}
		}
		return "", false
	}
	var out []use
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if s, ok := isHTTP(n, "Get", "Head", "Post", "PostForm", "DefaultClient", "DefaultTransport"); ok {
				out = append(out, use{n.Pos(), s})
			}
		case *ast.CompositeLit:
			if s, ok := isHTTP(n.Type, "Client"); ok {
				out = append(out, use{n.Pos(), s + "{…}"})
			}
		case *ast.CallExpr:
			if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "new" && len(n.Args) == 1 {
				if s, ok := isHTTP(n.Args[0], "Client"); ok {
					out = append(out, use{n.Pos(), "new(" + s + ")"})
				}
			}
		case *ast.ValueSpec:
			if s, ok := isHTTP(n.Type, "Client"); ok {
				out = append(out, use{n.Pos(), "var of type " + s})
			}
		}
		return true
	})
	return out
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
