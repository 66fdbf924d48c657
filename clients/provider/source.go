package provider

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/schema"
)

// Common is what every kind's Params have and treat alike: each kind's
// Params give theirs (a common method), so that the checks, the HTTP
// configuration and the start of New are written once, here.
type Common struct {
	// Kind names the kind in errors: "<kind> source <name>: …".
	Kind                 string
	Name, BaseURL, Token string
	RateLimit            httpx.RateLimit
	Resources            []clients.Resource
	// HTTP, when set, is the source's HTTP client, used as is.
	HTTP *httpx.Client
	// Env holds the User-Agent's contact and version, the logger and the
	// observers of the HTTP client.
	Env
}

// Fill returns the API root (without a trailing "/"), the rate limit and
// the resources of a kind's Params, each the kind's default when left out
// (all: every resource the kind serves).
func (d Defaults) Fill(baseURL string, rl httpx.RateLimit, rs, all []clients.Resource) (string, httpx.RateLimit, []clients.Resource) {
	baseURL = strings.TrimRight(cmp.Or(baseURL, d.BaseURL), "/")
	if rl == (httpx.RateLimit{}) {
		rl = d.RateLimit
	}
	if len(rs) == 0 {
		rs = all
	}
	return baseURL, rl, rs
}

// Check validates a kind's Params, their defaults applied, in this order:
// the source name (every later error names it), the token, the kind's own
// checks (own, nil for none), then the rate limit, the API root and the
// resources. Every error but the first reads "<kind> source <name>: …".
func (c Common) Check(own func() error) error {
	if c.Name == "" {
		return errors.New(c.Kind + ": name is required")
	}
	fail := func(err error) error { return fmt.Errorf("%s source %s: %w", c.Kind, c.Name, err) }
	if c.Token == "" {
		return fail(errors.New("token is required"))
	}
	if own != nil {
		if err := own(); err != nil {
			return fail(err)
		}
	}
	if c.RateLimit.Requests < 1 || c.RateLimit.Per <= 0 {
		return fail(errors.New("rate_limit must have requests ≥ 1 and per > 0"))
	}
	if err := httpx.CheckBaseURL(c.BaseURL); err != nil {
		return fail(err)
	}
	if err := schema.Check(c.Resources); err != nil {
		return fail(fmt.Errorf("resources: %w", err))
	}
	return nil
}

// HTTPConfig is the part of a source's httpx configuration every kind
// fills alike: the source name, rate limit, User-Agent, logger and
// observers. The kind adds its auth headers and waits.
func (c Common) HTTPConfig() httpx.Config {
	return httpx.Config{
		Source:     c.Name,
		RateLimit:  c.RateLimit,
		Version:    c.Version,
		Contact:    c.Contact,
		Logger:     c.Logger,
		OnResponse: c.OnResponse,
		OnWait:     c.OnWait,
	}
}

// Open is where every kind's New starts, once its Params were checked (by
// Check) and given their defaults: it parses the API root and returns the
// HTTP client, c.HTTP when set, else one built from cfg.
func (c Common) Open(cfg httpx.Config) (*url.URL, *httpx.Client) {
	base, _ := url.Parse(c.BaseURL) // Check has parsed it
	if c.HTTP != nil {
		return base, c.HTTP
	}
	return base, httpx.New(cfg)
}

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
