package provider

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/schema"
)

// Base is what every kind's Params have and treat alike. Each kind's
// Params embed it (harvest.Params{Base: provider.Base{Name: "acme", …},
// AccountID: "1"}), so that the fields, their defaults, the checks, the
// HTTP configuration and the start of New are written once, here.
type Base struct {
	// Name is the source name (the `source` column, and errors).
	Name string
	// BaseURL defaults to the kind's Defaults.BaseURL.
	BaseURL string
	// Token is the kind's API credential; it is never logged or put in an
	// error.
	Token string
	// RateLimit defaults to the kind's Defaults.RateLimit.
	RateLimit httpx.RateLimit
	// Resources defaults to every resource the kind serves.
	Resources []clients.Resource
	// HTTP, when set, is the source's HTTP client, used as is (build it
	// from the kind's HTTPConfig to keep its auth headers); otherwise one
	// is built from the Params.
	HTTP *httpx.Client
	// Env holds the User-Agent's contact and version, the logger and the
	// observers of the HTTP client.
	Env
}

// BaseOf is the Base of a configured source: its settings and what the
// process gives it.
func BaseOf(s Settings, env Env) Base {
	return Base{Name: s.Name, BaseURL: s.BaseURL, Token: s.Token, RateLimit: s.RateLimit, Resources: s.Resources, Env: env}
}

// Fill returns b with the API root (without a trailing "/"), the rate
// limit and the resources each the kind's default when left out (all:
// every resource the kind serves).
func (b Base) Fill(d Defaults, all []clients.Resource) Base {
	b.BaseURL = strings.TrimRight(cmp.Or(b.BaseURL, d.BaseURL), "/")
	if b.RateLimit == (httpx.RateLimit{}) {
		b.RateLimit = d.RateLimit
	}
	if len(b.Resources) == 0 {
		b.Resources = all
	}
	return b
}

// Check validates a kind's Params, their defaults applied, in this order:
// the source name (every later error names it), the token, the kind's own
// checks (own, nil for none), then the rate limit, the API root and the
// resources. Every error but the first reads "<kind> source <name>: …".
func (b Base) Check(kind string, own func() error) error {
	if b.Name == "" {
		return errors.New(kind + ": name is required")
	}
	fail := func(err error) error { return fmt.Errorf("%s source %s: %w", kind, b.Name, err) }
	if b.Token == "" {
		return fail(errors.New("token is required"))
	}
	if own != nil {
		if err := own(); err != nil {
			return fail(err)
		}
	}
	if b.RateLimit.Requests < 1 || b.RateLimit.Per <= 0 {
		return fail(errors.New("rate_limit must have requests ≥ 1 and per > 0"))
	}
	if err := httpx.CheckBaseURL(b.BaseURL); err != nil {
		return fail(err)
	}
	if err := schema.Check(b.Resources); err != nil {
		return fail(fmt.Errorf("resources: %w", err))
	}
	return nil
}

// HTTPConfig is the part of a source's httpx configuration every kind
// fills alike: the source name, rate limit, User-Agent, logger and
// observers. The kind adds its auth headers and waits.
func (b Base) HTTPConfig() httpx.Config {
	return httpx.Config{
		Source:     b.Name,
		RateLimit:  b.RateLimit,
		Version:    b.Version,
		Contact:    b.Contact,
		Logger:     b.Logger,
		OnResponse: b.OnResponse,
		OnWait:     b.OnWait,
		Pacer:      b.Pacer,
	}
}

// Open is where every kind's New starts, once its Params were checked (by
// Check) and given their defaults: it parses the API root and returns the
// HTTP client, b.HTTP when set, else one built from cfg.
func (b Base) Open(cfg httpx.Config) (*url.URL, *httpx.Client) {
	base, _ := url.Parse(b.BaseURL) // Check has parsed it
	if b.HTTP != nil {
		return base, b.HTTP
	}
	return base, httpx.New(cfg)
}

// Log is the source's logger: Logger with the source's name.
func (b Base) Log() zerolog.Logger { return b.Logger.With().Str("source", b.Name).Logger() }

// Constructor adapts a kind's New to Kind.New: params makes the kind's
// Params from a source's settings (see HTTPClient), newClient builds the
// source from them.
func Constructor[P any, C clients.Source](params func(Settings, Env) P, newClient func(P) (C, error)) func(context.Context, Settings, Env) (Built, error) {
	return func(_ context.Context, s Settings, env Env) (Built, error) {
		c, err := newClient(params(s, env))
		if err != nil {
			return Built{}, err
		}
		return Built{Source: c}, nil
	}
}
