package provider

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
)

func TestBaseFill(t *testing.T) {
	d := Defaults{BaseURL: "https://api.example.com/v2/", RateLimit: httpx.RateLimit{Requests: 100, Per: 15 * time.Second}}
	all := []clients.Resource{clients.Users, clients.TimeEntries}
	b := Base{}.Fill(d, all)
	if b.BaseURL != "https://api.example.com/v2" || b.RateLimit != d.RateLimit || len(b.Resources) != 2 {
		t.Fatalf("left out: %+v", b)
	}
	own := httpx.RateLimit{Requests: 1, Per: time.Second}
	b = Base{BaseURL: "http://127.0.0.1:9/v2//", RateLimit: own, Resources: []clients.Resource{clients.Users}}.Fill(d, all)
	if b.BaseURL != "http://127.0.0.1:9/v2" || b.RateLimit != own || len(b.Resources) != 1 {
		t.Fatalf("given: %+v", b)
	}
}

func TestBaseOf(t *testing.T) {
	s := Settings{Name: "src", BaseURL: "https://api.example.com", Token: "t0ken", AccountID: "1",
		RateLimit: httpx.RateLimit{Requests: 1, Per: time.Second}, Resources: []clients.Resource{clients.Users}}
	env := Env{Contact: "ops@example.com", Version: "1.2.3"}
	b := BaseOf(s, env)
	if b.Name != s.Name || b.BaseURL != s.BaseURL || b.Token != s.Token || b.RateLimit != s.RateLimit ||
		len(b.Resources) != 1 || b.Contact != env.Contact || b.Version != env.Version || b.HTTP != nil {
		t.Fatalf("BaseOf = %+v", b)
	}
}

func TestBaseCheck(t *testing.T) {
	good := Base{
		Name: "src", BaseURL: "https://api.example.com", Token: "t0ken",
		RateLimit: httpx.RateLimit{Requests: 1, Per: time.Second}, Resources: []clients.Resource{clients.Users},
	}
	errOwn := errors.New("workspace_id is required")
	for _, tc := range []struct {
		name string
		edit func(*Base)
		own  func() error
		want string // "" for no error
	}{
		{"good", func(*Base) {}, nil, ""},
		{"good with own checks", func(*Base) {}, func() error { return nil }, ""},
		{"no name comes first", func(c *Base) { c.Name, c.Token = "", "" }, func() error { return errOwn }, "acme: name is required"},
		{"no token before own checks", func(c *Base) { c.Token = "" }, func() error { return errOwn }, "acme source src: token is required"},
		{"own checks before the shared ones", func(c *Base) { c.RateLimit = httpx.RateLimit{} }, func() error { return errOwn }, "acme source src: workspace_id is required"},
		{"rate limit", func(c *Base) { c.RateLimit = httpx.RateLimit{Requests: 1} }, nil, "acme source src: rate_limit must have requests ≥ 1 and per > 0"},
		{"API root", func(c *Base) { c.BaseURL = "" }, nil, "acme source src: "},
		{"resources", func(c *Base) { c.Resources = []clients.Resource{"nope"} }, nil, "acme source src: resources: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.edit(&c)
			err := c.Check("acme", tc.own)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
				t.Fatalf("error %v, want it to start with %q", err, tc.want)
			}
		})
	}
	c := good
	if err := c.Check("acme", func() error { return errOwn }); !errors.Is(err, errOwn) {
		t.Fatalf("own error %v is not wrapped", err)
	}
}

func TestBaseHTTPConfigAndOpen(t *testing.T) {
	var responses, waits int
	c := Base{
		Name: "src", BaseURL: "https://api.example.com/v1", Token: "t0ken",
		RateLimit: httpx.RateLimit{Requests: 2, Per: time.Second},
		Env: Env{
			Contact: "ops@example.com", Version: "1.2.3",
			OnResponse: func(int, time.Duration) { responses++ },
			OnWait:     func(string, time.Duration) { waits++ },
		},
	}
	cfg := c.HTTPConfig()
	if cfg.Source != "src" || cfg.RateLimit != c.RateLimit || cfg.Contact != c.Contact || cfg.Version != c.Version || cfg.Headers != nil {
		t.Fatalf("config %+v", cfg)
	}
	cfg.OnResponse(http.StatusOK, 0)
	cfg.OnWait("limiter", 0)
	if responses != 1 || waits != 1 {
		t.Fatalf("observers not passed on: %d responses, %d waits", responses, waits)
	}

	base, hc := c.Open(cfg)
	if base.String() != "https://api.example.com/v1" || hc == nil {
		t.Fatalf("open: %v %v", base, hc)
	}
	c.HTTP = httpx.New(httpx.Config{Source: "given"})
	if _, got := c.Open(cfg); got != c.HTTP {
		t.Fatal("a given HTTP client is not used as is")
	}
}

type fakeSource struct{ name string }

func (s *fakeSource) Name() string                  { return s.name }
func (s *fakeSource) Resources() []clients.Resource { return nil }
func (s *fakeSource) List(context.Context, clients.Resource, clients.Window, func(context.Context, clients.Page) error) error {
	return nil
}

func TestConstructor(t *testing.T) {
	params := func(s Settings, env Env) string { return s.Name + "/" + env.Contact }
	newFn := Constructor(params, func(p string) (*fakeSource, error) {
		if p == "bad/" {
			return nil, errors.New("bad params")
		}
		return &fakeSource{name: p}, nil
	})
	b, err := newFn(context.Background(), Settings{Name: "src"}, Env{Contact: "ops"})
	if err != nil || b.Source.Name() != "src/ops" || b.Close != nil {
		t.Fatalf("built %+v, %v", b, err)
	}
	b, err = newFn(context.Background(), Settings{Name: "bad"}, Env{})
	if err == nil || b.Source != nil {
		t.Fatalf("a failed constructor built %+v, %v", b, err)
	}
}
