package config

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Change feed defaults (issue 13).
const (
	DefaultRetention     = 7 * 24 * time.Hour
	DefaultResendWindow  = 24 * time.Hour
	DefaultWebhookTimout = 10 * time.Second
)

// Switch is an on/off key (`events: on`); true and false work too.
type Switch bool

func parseSwitch(s string) (Switch, bool) {
	switch strings.ToLower(s) {
	case "on", "true", "yes":
		return true, true
	case "off", "false", "no", "":
		return false, true
	}
	return false, false
}

func (s *Switch) UnmarshalYAML(n *yaml.Node) error {
	v, ok := parseSwitch(n.Value)
	if !ok || n.Kind != yaml.ScalarNode {
		return &Error{Line: n.Line, Msg: fmt.Sprintf("invalid switch %q (want on or off)", n.Value)}
	}
	*s = v
	return nil
}

var switchType = reflect.TypeFor[Switch]()

// checkSwitch is checkValues' rule for a Switch.
func checkSwitch(n *yaml.Node, path string) error {
	if _, ok := parseSwitch(n.Value); !ok || n.Kind != yaml.ScalarNode {
		return &Error{Line: n.Line, Key: path, Msg: fmt.Sprintf("invalid value %q (want on or off)", n.Value)}
	}
	return nil
}

// ChangeFeed configures the change feed: retention and outbound webhooks.
// Which sources write events is each source's `events: on`.
type ChangeFeed struct {
	// Retention is how long events are kept (default 7 days); at least the
	// longest webhook resend window plus a day.
	Retention Duration  `yaml:"retention"`
	Webhooks  []Webhook `yaml:"webhooks"`
}

// Webhook is a consumer that delivers every event to an HTTP endpoint,
// signed per Standard Webhooks.
type Webhook struct {
	// Name is the consumer's name (its position and its deliveries).
	Name string `yaml:"name"`
	URL  string `yaml:"url"`
	// Secrets sign each delivery: whsec_ + base64. Two during a rotation:
	// every delivery carries a signature by each.
	Secrets []Secret `yaml:"secrets"`
	// Window is how long a failing delivery is retried (default 24h); then
	// it is dead-lettered (`tidemark events deliveries`, `redrive`).
	Window Duration `yaml:"window"`
	// Timeout bounds one POST (default 10s).
	Timeout Duration `yaml:"timeout"`
}

var consumerName = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// validateChangeFeed applies the change feed's defaults and checks it.
func (c *Config) validateChangeFeed(fail func(key, format string, args ...any) error) error {
	f := &c.ChangeFeed
	if f.Retention < 0 {
		return fail("change_feed.retention", "must not be negative")
	}
	if f.Retention == 0 {
		f.Retention = Duration(DefaultRetention)
	}
	seen := map[string]bool{}
	for i := range f.Webhooks {
		w := &f.Webhooks[i]
		key := func(k string) string { return fmt.Sprintf("change_feed.webhooks[%d].%s", i, k) }
		if !consumerName.MatchString(w.Name) {
			return fail(key("name"), "%q: want 1 to 64 letters, digits, '.', '_', ':' or '-'", w.Name)
		}
		if seen[w.Name] {
			return fail(key("name"), "duplicate consumer name %q", w.Name)
		}
		seen[w.Name] = true
		if u, err := url.Parse(w.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fail(key("url"), "%q is not an http(s) URL", w.URL)
		}
		if len(w.Secrets) < 1 || len(w.Secrets) > 2 {
			return fail(key("secrets"), "want one secret, or two during a rotation (got %d)", len(w.Secrets))
		}
		for j, s := range w.Secrets {
			b64, ok := strings.CutPrefix(s.Value(), "whsec_")
			if _, err := base64.StdEncoding.DecodeString(b64); !ok || err != nil || len(b64) < 24 {
				// The secret itself is never echoed.
				return fail(fmt.Sprintf("change_feed.webhooks[%d].secrets[%d]", i, j), "not a Standard Webhooks secret: want whsec_ followed by base64 of at least 18 bytes")
			}
		}
		if w.Window < 0 || w.Timeout < 0 {
			return fail(key("window"), "window and timeout must not be negative")
		}
		if w.Window == 0 {
			w.Window = Duration(DefaultResendWindow)
		}
		if w.Timeout == 0 {
			w.Timeout = Duration(DefaultWebhookTimout)
		}
		if min := w.Window.D() + 24*time.Hour; f.Retention.D() < min {
			return fail("change_feed.retention", "%s is shorter than webhook %q's resend window plus a day (%s): events would be deleted while still being resent", f.Retention.D(), w.Name, min)
		}
	}
	return nil
}
