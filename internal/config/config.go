// Package config loads and validates tidemark's YAML configuration: ${VAR}
// expansion from the environment (an unset variable is an error), unknown
// keys refused, defaults applied, and every error naming the file, line and
// key that is wrong.
package config

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"go.yaml.in/yaml/v3"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/provider"
	_ "github.com/tidemarkhq/tidemark/clients/provider/all" // every kind registers itself
	"github.com/tidemarkhq/tidemark/schema"
)

// Defaults.
const (
	DefaultSchedule       = "*/5 * * * *"
	DefaultOverlap        = 10 * time.Minute
	DefaultLookbackDays   = 90
	DefaultMaxTombstones  = 1000
	DefaultWindowDays     = 30
	DefaultContact        = "https://github.com/tidemarkhq/tidemark"
	DefaultRequestTimeout = 30 * time.Second
)

// Kinds of source.
const (
	KindHarvest   = "harvest"
	KindToggl     = "toggl"
	KindClockify  = "clockify"
	KindSimulated = "simulated"
)

// Config is the whole file.
type Config struct {
	DatabaseURL string `yaml:"database_url"`
	// Listen, when set, serves /healthz, /readyz and /metrics.
	Listen string `yaml:"listen"`
	// Contact goes into the User-Agent (Harvest requires one).
	Contact string   `yaml:"contact"`
	Sources []Source `yaml:"sources"`
	// ChangeFeed configures the change feed (issue 13; config/events.go).
	ChangeFeed ChangeFeed `yaml:"change_feed"`
	// Webhooks configures provider webhook intake (issue 14; webhooks.go).
	Webhooks Webhooks `yaml:"webhooks"`
	// Runs bounds the sync_runs history (issue 15; runs.go).
	Runs Runs `yaml:"runs"`

	// Path is the file the config was read from (for messages).
	Path string `yaml:"-"`
}

// Source is one tracker account.
type Source struct {
	Name      string `yaml:"name"`
	Kind      string `yaml:"kind"`
	BaseURL   string `yaml:"base_url"`
	AccountID string `yaml:"account_id"`
	// WorkspaceID is Toggl's and Clockify's workspace.
	WorkspaceID string `yaml:"workspace_id"`
	// UserIDs limits Clockify's per-user listings (default: every user).
	UserIDs   []string  `yaml:"user_ids"`
	Token     Secret    `yaml:"token"`
	Plan      string    `yaml:"plan"` // the provider plan: its budget is the default
	Schedule  string    `yaml:"schedule"`
	Overlap   Duration  `yaml:"overlap"`
	RateLimit RateLimit `yaml:"rate_limit"`
	Resources []string  `yaml:"resources"`
	Reconcile Reconcile `yaml:"reconcile"`
	Backfill  Backfill  `yaml:"backfill"`
	// Timeout bounds one HTTP request.
	Timeout Duration `yaml:"timeout"`
	// Simulated configures kind: simulated (the built-in tracker).
	Simulated Simulated `yaml:"simulated"`
	// Scope is whose time entries a Toggl source mirrors: me (default) or
	// workspace.
	Scope string `yaml:"scope"`
	// TrailingDays is how many days of spent dates a Toggl workspace-scope
	// incremental pass re-lists (default 14).
	TrailingDays int `yaml:"trailing_days"`
	// Events appends every real change of this source's rows to the change
	// feed (`events: on`; default off).
	Events Switch `yaml:"events"`
	// History keeps every version of the listed resources (history.go;
	// default off).
	History History `yaml:"history"`
}

// RateLimit is a request budget: at most Requests in any window of Per.
type RateLimit struct {
	Requests int      `yaml:"requests"`
	Per      Duration `yaml:"per"`
}

// Reconcile configures the pass that finds deletions.
type Reconcile struct {
	Schedule     string `yaml:"schedule"`
	LookbackDays int    `yaml:"lookback_days"`
	// MaxTombstones refuses a reconcile that would tombstone more rows.
	MaxTombstones int `yaml:"max_tombstones"`
}

// Backfill configures backfill passes.
type Backfill struct {
	WindowDays int `yaml:"window_days"`
}

// Simulated configures the built-in simulated tracker.
type Simulated struct {
	Seed  int64 `yaml:"seed"`
	Users int   `yaml:"users"`
	Days  int   `yaml:"days"`
	// MutationsPerTick and Every drive its mutation stream (0: no churn).
	MutationsPerTick int      `yaml:"mutations_per_tick"`
	Every            Duration `yaml:"every"`
	// VisibilityDelay makes writes visible that much after their stamp, as
	// a lagging replica would (0: at once).
	VisibilityDelay Duration `yaml:"visibility_delay"`
	// LateEvery, above 1, makes only every LateEvery-th write late.
	LateEvery int `yaml:"late_every"`
}

// Secret is a string that never prints.
type Secret string

func (s Secret) String() string   { return "[redacted]" }
func (s Secret) GoString() string { return "[redacted]" }

// Value returns the secret itself, for the one place that sends it.
func (s Secret) Value() string { return string(s) }

// Duration is a time.Duration written as "10m", "15s".
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return &Error{Line: n.Line, Msg: fmt.Sprintf("invalid duration %q (want e.g. 30s, 10m, 1h)", n.Value)}
	}
	*d = Duration(v)
	return nil
}

// Error is a configuration error; it names the file, line and key.
type Error struct {
	File string
	Line int
	Key  string
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(cmp.Or(e.File, "config"))
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Key != "" {
		b.WriteString(": " + e.Key)
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

// Load reads, expands, decodes and validates a config file.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Msg: err.Error()}
	}
	return Parse(path, b, os.LookupEnv)
}

// Parse decodes a config from b; lookup resolves ${VAR} references.
func Parse(path string, b []byte, lookup func(string) (string, bool)) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, &Error{File: path, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	if len(doc.Content) == 0 {
		return nil, &Error{File: path, Msg: "empty file; see configs/ for an example"}
	}
	root := doc.Content[0]
	if err := checkKeys(root, reflect.TypeFor[Config](), ""); err != nil {
		return nil, withFile(err, path)
	}
	if err := expand(root, "", lookup); err != nil {
		return nil, withFile(err, path)
	}
	// Values are checked after expansion, where the key path is known (a
	// decoder error would name only the line).
	if err := checkValues(root, reflect.TypeFor[Config](), ""); err != nil {
		return nil, withFile(err, path)
	}
	var c Config
	if err := root.Decode(&c); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			return nil, &Error{File: path, Msg: strings.Join(te.Errors, "; ")}
		}
		return nil, withFile(err, path)
	}
	c.Path = path
	if err := c.validate(root); err != nil {
		return nil, withFile(err, path)
	}
	return &c, nil
}

func withFile(err error, path string) error {
	var ce *Error
	if errors.As(err, &ce) {
		ce.File = path
		return ce
	}
	return &Error{File: path, Msg: err.Error()}
}

// walkYAML visits n and every node under it with the Go type it decodes
// into, named by its key path. It refuses keys the struct does not have,
// naming them with their line: a typo must not silently fall back to a
// default.
func walkYAML(n *yaml.Node, t reflect.Type, path string, visit func(*yaml.Node, reflect.Type, string) error) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if err := visit(n, t, path); err != nil {
		return err
	}
	switch {
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
		known := map[string]reflect.Type{}
		var names []string
		for i := range t.NumField() {
			f := t.Field(i)
			tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if tag == "" || tag == "-" {
				continue
			}
			known[tag] = f.Type
			names = append(names, tag)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			ft, ok := known[k.Value]
			if !ok {
				return &Error{Line: k.Line, Key: join(path, k.Value), Msg: fmt.Sprintf("unknown key (known keys here: %s)", strings.Join(names, ", "))}
			}
			if err := walkYAML(v, ft, join(path, k.Value), visit); err != nil {
				return err
			}
		}
	case n.Kind == yaml.SequenceNode && t.Kind() == reflect.Slice:
		for i, c := range n.Content {
			if err := walkYAML(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), visit); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkKeys(n *yaml.Node, t reflect.Type, path string) error {
	return walkYAML(n, t, path, func(*yaml.Node, reflect.Type, string) error { return nil })
}

var durationType = reflect.TypeFor[Duration]()

// checkValues refuses values the decoder would refuse without naming the
// key: durations and switches.
func checkValues(n *yaml.Node, t reflect.Type, path string) error {
	return walkYAML(n, t, path, func(n *yaml.Node, t reflect.Type, path string) error {
		if t == switchType {
			return checkSwitch(n, path)
		}
		if t == historyType || t == daysType {
			return checkHistory(n, t, path)
		}
		if _, err := time.ParseDuration(n.Value); t == durationType && (err != nil || n.Kind != yaml.ScalarNode) {
			return &Error{Line: n.Line, Key: path, Msg: fmt.Sprintf("invalid duration %q (want e.g. 30s, 10m, 1h)", n.Value)}
		}
		return nil
	})
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// sourceName is what a source may be called.
var sourceName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// expand replaces ${VAR} in scalar values. Expansion happens after parsing,
// so a value from the environment is never read as YAML.
func expand(n *yaml.Node, path string, lookup func(string) (string, bool)) error {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := expand(n.Content[i+1], join(path, n.Content[i].Value), lookup); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if err := expand(c, fmt.Sprintf("%s[%d]", path, i), lookup); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		var missing string
		out := varRef.ReplaceAllStringFunc(n.Value, func(ref string) string {
			name := ref[2 : len(ref)-1]
			v, ok := lookup(name)
			if !ok && missing == "" {
				missing = name
			}
			return v
		})
		if missing != "" {
			return &Error{Line: n.Line, Key: path, Msg: fmt.Sprintf("environment variable %s is not set", missing)}
		}
		if out != n.Value {
			n.Value = out
			n.Tag = "" // let the decoder resolve the expanded value's type
			n.Style = 0
		}
	}
	return nil
}

// line finds the line of a key path like "sources[1].schedule" in the parsed
// document, for validation errors; 0 when absent.
func line(root *yaml.Node, path string) int {
	n := root
	ln := 0
	for _, part := range strings.Split(path, ".") {
		idx := -1
		if i := strings.IndexByte(part, '['); i >= 0 {
			fmt.Sscanf(part[i:], "[%d]", &idx)
			part = part[:i]
		}
		found := false
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == part {
					ln, n, found = n.Content[i].Line, n.Content[i+1], true
					break
				}
			}
		}
		if !found {
			return ln
		}
		if idx >= 0 {
			if n.Kind != yaml.SequenceNode || idx >= len(n.Content) {
				return ln
			}
			n = n.Content[idx]
			ln = n.Line
		}
	}
	return ln
}

// CronParser parses schedules: five fields, or descriptors like "@every 30s".
var CronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

func (c *Config) validate(root *yaml.Node) error {
	fail := func(key, format string, args ...any) error {
		return &Error{Line: line(root, key), Key: key, Msg: fmt.Sprintf(format, args...)}
	}
	c.Contact = cmp.Or(c.Contact, DefaultContact)
	if err := c.Webhooks.validate(fail); err != nil {
		return err
	}
	if len(c.Sources) == 0 {
		return fail("sources", "no sources configured; add at least one (see configs/)")
	}
	seen := map[string]bool{}
	for i := range c.Sources {
		s := &c.Sources[i]
		key := func(k string) string { return fmt.Sprintf("sources[%d].%s", i, k) }
		if s.Name == "" {
			return fail(key("name"), "missing; every source needs a unique name")
		}
		if !sourceName.MatchString(s.Name) {
			return fail(key("name"), "%q: use letters, digits, '.', '_' or '-' (at most 64)", s.Name)
		}
		if seen[s.Name] {
			return fail(key("name"), "duplicate source name %q", s.Name)
		}
		seen[s.Name] = true
		if s.Kind == "" {
			return fail(key("kind"), "missing; one of %s", strings.Join(provider.Names(), ", "))
		}
		kind, err := provider.Lookup(s.Kind)
		if err != nil {
			return fail(key("kind"), "%v", err)
		}
		if kind.Takes(provider.KeyBaseURL) {
			s.BaseURL = cmp.Or(s.BaseURL, kind.Defaults.BaseURL)
		} else if s.BaseURL != "" {
			return fail(key("base_url"), "kind %s does not take base_url", s.Kind)
		}
		plan, pl, fe := kind.PlanOf(s.Plan)
		if fe != nil {
			return fail(key(string(fe.Key)), "%s", fe.Msg)
		}
		s.Plan = plan
		if s.RateLimit.Requests == 0 && s.RateLimit.Per == 0 {
			// The plan's budget; an explicit rate_limit wins.
			s.RateLimit = RateLimit{Requests: pl.RateLimit.Requests, Per: Duration(pl.RateLimit.Per)}
		}
		s.Reconcile.Schedule = cmp.Or(s.Reconcile.Schedule, kind.Defaults.ReconcileSchedule)
		if s.BaseURL != "" {
			if u, err := url.Parse(s.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fail(key("base_url"), "%q is not an http(s) URL", s.BaseURL)
			}
		}
		s.Schedule = cmp.Or(s.Schedule, DefaultSchedule)
		if _, err := CronParser.Parse(s.Schedule); err != nil {
			return fail(key("schedule"), "invalid cron spec %q: %v", s.Schedule, err)
		}
		if s.Overlap < 0 {
			return fail(key("overlap"), "must not be negative")
		}
		if s.Overlap == 0 {
			s.Overlap = Duration(DefaultOverlap)
		}
		if s.RateLimit.Requests < 1 || s.RateLimit.Per <= 0 {
			return fail(key("rate_limit"), "want {requests: N >= 1, per: duration > 0}")
		}
		if len(s.Resources) == 0 {
			for _, r := range kind.Resources {
				s.Resources = append(s.Resources, string(r))
			}
		}
		for j, r := range s.Resources {
			if _, err := schema.Parse(r); err != nil {
				return fail(fmt.Sprintf("sources[%d].resources[%d]", i, j), "%v", err)
			}
			if !kind.Serves(clients.Resource(r)) {
				return fail(fmt.Sprintf("sources[%d].resources[%d]", i, j), "kind %s does not serve %s", s.Kind, r)
			}
		}
		if err := s.validateHistory(fail, key); err != nil {
			return err
		}
		// What the kind itself says: its keys, required keys, validation.
		if fe := kind.Check(ptr(s.Settings()), s.isSet); fe != nil {
			return fail(key(string(fe.Key)), "%s", fe.Msg)
		}
		if s.Reconcile.Schedule != "" {
			if _, err := CronParser.Parse(s.Reconcile.Schedule); err != nil {
				return fail(key("reconcile.schedule"), "invalid cron spec %q: %v", s.Reconcile.Schedule, err)
			}
		}
		if s.Reconcile.LookbackDays < 0 {
			return fail(key("reconcile.lookback_days"), "must not be negative")
		}
		s.Reconcile.LookbackDays = cmp.Or(s.Reconcile.LookbackDays, DefaultLookbackDays)
		if s.Reconcile.MaxTombstones < 0 {
			return fail(key("reconcile.max_tombstones"), "must not be negative")
		}
		s.Reconcile.MaxTombstones = cmp.Or(s.Reconcile.MaxTombstones, DefaultMaxTombstones)
		if s.Backfill.WindowDays < 0 {
			return fail(key("backfill.window_days"), "must not be negative")
		}
		s.Backfill.WindowDays = cmp.Or(s.Backfill.WindowDays, DefaultWindowDays)
		if s.Timeout < 0 {
			return fail(key("timeout"), "must not be negative")
		}
		if s.Timeout == 0 {
			s.Timeout = Duration(DefaultRequestTimeout)
		}
	}
	if err := c.validateRuns(fail); err != nil {
		return err
	}
	return c.validateChangeFeed(fail)
}

// Settings is what the source's kind sees of it (clients/provider).
func (s *Source) Settings() provider.Settings {
	rs := make([]clients.Resource, len(s.Resources))
	for i, r := range s.Resources {
		rs[i] = clients.Resource(r)
	}
	return provider.Settings{
		Name: s.Name, BaseURL: s.BaseURL, Token: s.Token.Value(), AccountID: s.AccountID,
		WorkspaceID: s.WorkspaceID, UserIDs: s.UserIDs, Resources: rs,
		Scope: s.Scope, TrailingDays: s.TrailingDays,
		RateLimit: httpx.RateLimit{Requests: s.RateLimit.Requests, Per: s.RateLimit.Per.D()},
		Overlap:   s.Overlap.D(), Timeout: s.Timeout.D(), Plan: s.Plan,
		Simulated: provider.Simulated{
			Seed: s.Simulated.Seed, Users: s.Simulated.Users, Days: s.Simulated.Days,
			MutationsPerTick: s.Simulated.MutationsPerTick, Every: s.Simulated.Every.D(),
			VisibilityDelay: s.Simulated.VisibilityDelay.D(), LateEvery: s.Simulated.LateEvery,
		},
	}
}

// isSet reports whether a kind-specific key is set in the file.
func (s *Source) isSet(k provider.Key) bool {
	switch k {
	case provider.KeyBaseURL:
		return s.BaseURL != ""
	case provider.KeyAccountID:
		return s.AccountID != ""
	case provider.KeyWorkspaceID:
		return s.WorkspaceID != ""
	case provider.KeyUserIDs:
		return len(s.UserIDs) > 0
	case provider.KeyToken:
		return s.Token != ""
	case provider.KeySimulated:
		return s.Simulated != Simulated{}
	case provider.KeyScope:
		return s.Scope != ""
	case provider.KeyTrailingDays:
		return s.TrailingDays != 0
	}
	return false
}

func ptr[T any](v T) *T { return &v }

// Source returns the source called name.
func (c *Config) Source(name string) (*Source, error) {
	for i := range c.Sources {
		if c.Sources[i].Name == name {
			return &c.Sources[i], nil
		}
	}
	var names []string
	for _, s := range c.Sources {
		names = append(names, s.Name)
	}
	return nil, fmt.Errorf("%s: no source named %q (configured: %s)", c.Path, name, strings.Join(names, ", "))
}
