// Package provider owns the registry of source kinds. Each kind (harvest,
// toggl, clockify, simulated) registers once, from its own package, what
// the rest of tidemark needs to know of it: the configuration keys it takes,
// its defaults, its validation and its constructor, and which resources it
// serves. Configuration and the CLI look kinds up here and never switch on a
// kind's name, so a new provider is a package that registers itself and a
// blank import in clients/provider/all.
package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
)

// Key names a kind-specific configuration key of a source.
type Key string

// The kind-specific keys a source may carry; every kind says which it takes.
// The common keys (name, kind, token, schedule, overlap, rate_limit,
// resources, reconcile, backfill, timeout) are every kind's.
const (
	KeyBaseURL     Key = "base_url"
	KeyAccountID   Key = "account_id"
	KeyWorkspaceID Key = "workspace_id"
	KeyUserIDs     Key = "user_ids"
	KeyToken       Key = "token"
	KeySimulated   Key = "simulated"
	// KeyScope is whose time entries a source mirrors (Toggl: me or
	// workspace); KeyTrailingDays how many days of spent dates an
	// incremental pass re-lists where no updated-since filter exists.
	KeyScope        Key = "scope"
	KeyTrailingDays Key = "trailing_days"
	// KeyPlan is common to every kind; a kind without Plans refuses it.
	KeyPlan Key = "plan"
)

// Settings is what a kind sees of one configured source.
type Settings struct {
	Name        string
	BaseURL     string
	Token       string
	AccountID   string
	WorkspaceID string
	UserIDs     []string
	Resources   []clients.Resource
	RateLimit   httpx.RateLimit
	Overlap     time.Duration
	// Timeout bounds one HTTP request.
	Timeout   time.Duration
	Simulated Simulated
	// Scope and TrailingDays: see KeyScope and KeyTrailingDays ("" and 0
	// when not configured; the kind applies its defaults).
	Scope        string
	TrailingDays int
	// Plan is the source's plan (one of its kind's Plans; "" when the kind
	// declares none).
	Plan string
}

// Account names whose answers a source's memos hold: a truncated SHA-256
// of the token, the API root and the account and workspace, so that a
// memo outlives none of them, and the token never leaves the process.
func (s Settings) Account() string {
	h := sha256.New()
	for _, v := range []string{s.Token, s.BaseURL, s.AccountID, s.WorkspaceID} {
		fmt.Fprintf(h, "%d:%s;", len(v), v)
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// Simulated configures the built-in simulated tracker (kind simulated).
type Simulated struct {
	Seed             int64
	Users, Days      int
	MutationsPerTick int
	Every            time.Duration
	VisibilityDelay  time.Duration
	LateEvery        int
}

// Env is what the process gives every source it builds.
type Env struct {
	Contact, Version string
	Logger           zerolog.Logger
	// OnResponse and OnWait observe the source's HTTP client (metrics, the
	// waits shown by `tidemark cursors`); nil: none.
	OnResponse func(status int, took time.Duration)
	OnWait     func(reason string, d time.Duration)
	// Pacer, when set, keeps the source's rate limit across processes
	// (httpx.Config.Pacer).
	Pacer httpx.Pacer
	// Memo, when set, keeps small answers that save requests across
	// processes (Toggl's GET /me once a day).
	Memo Memo
}

// Memo keeps a source's small answers (JSON, never a credential) where the
// next process finds them.
type Memo interface {
	Get(ctx context.Context, key string) (value []byte, age time.Duration, ok bool, err error)
	Put(ctx context.Context, key string, value []byte) error
}

// Defaults are a kind's values for keys left out of the configuration.
type Defaults struct {
	BaseURL   string
	RateLimit httpx.RateLimit
	// ReconcileSchedule is on unless configured otherwise ("" for none).
	ReconcileSchedule string
}

// FieldError says which key of a source is wrong and why.
type FieldError struct {
	Key Key
	Msg string
}

func (e *FieldError) Error() string { return string(e.Key) + ": " + e.Msg }

// Fieldf returns a FieldError for key.
func Fieldf(key Key, format string, args ...any) *FieldError {
	return &FieldError{Key: key, Msg: fmt.Sprintf(format, args...)}
}

// Built is a constructed source and what to close when done with it.
type Built struct {
	Source clients.Source
	// Close, when set, frees what the kind started (the simulated tracker).
	Close func()
}

// Kind is one provider's registration.
type Kind struct {
	// Name is the `kind:` value.
	Name string
	// Doc is one line for messages and docs.
	Doc string
	// Keys are the kind-specific keys it takes; a source of this kind that
	// sets another kind's key is refused, naming the key.
	Keys []Key
	// Required are the keys it cannot do without.
	Required []Key
	Defaults Defaults
	// Resources are what it can serve, in pass order; the default of a
	// source that names none.
	Resources []clients.Resource
	// Validate checks (and may normalize) a source's settings after the
	// defaults were applied; nil: nothing more to check.
	Validate func(*Settings) *FieldError
	// New builds the source.
	New func(ctx context.Context, s Settings, env Env) (Built, error)
	// Plans are the provider's plans, smallest first: each one's budget is
	// the default of a source on it. None: the kind takes no `plan:` and
	// its budget is Defaults.RateLimit.
	Plans []Plan
	// DefaultPlan is the plan of a source that names none.
	DefaultPlan string
	// PassCost is what one incremental pass of a resource costs (see
	// Cost); nil: one request per resource per pass.
	PassCost func(r clients.Resource, p PassShape, s Settings) Cost
}

// Plan is a provider plan's budget.
type Plan struct {
	// Name is the `plan:` value.
	Name string
	// RateLimit is the per-request budget: the default rate_limit of a
	// source on this plan (an explicit rate_limit wins).
	RateLimit httpx.RateLimit
	// Hourly is the requests an hour the plan allows in total; 0: none
	// beyond RateLimit.
	Hourly int
	// Caps are narrower hourly caps on some of the requests (Toggl's /me
	// calls: 30 an hour on every plan), by name.
	Caps map[string]int
	// Doc says where the numbers come from.
	Doc string
}

// PassShape is what the cost of an incremental pass depends on.
type PassShape struct {
	// Span is the window one incremental pass reads: the time since the
	// previous pass plus the overlap.
	Span time.Duration
	// Projects and Users are the counts assumed for listings made per
	// project or per user (the planner cannot know them; at least 1).
	Projects, Users int
	// Reconcile asks for one reconcile run instead of an incremental
	// pass: resources listed by date list Days spent days (lookback_days
	// and the week ahead), the others are listed whole.
	Reconcile bool
	Days      int
}

// Cost is what one incremental pass of a resource costs at least: one page
// per listing.
type Cost struct {
	// Requests are made on every pass.
	Requests int
	// Daily are made at most once a day (Toggl's /me for the user's time
	// zone); the planner counts them in the busiest hour.
	Daily int
	// Churn are made besides Requests in a pass during which records
	// changed (Toggl's workspace scope: a search by id for entries gone
	// from their day); the planner counts them in every pass, a source
	// being edited while it is polled.
	Churn int
	// Fallback is what the pass costs instead when the resource's usual
	// way is unavailable (Clockify's feed: GET users and one listing per
	// user); 0: no fallback.
	Fallback int
	// Cap names the Plan cap all of this resource's requests also count
	// against ("" none).
	Cap string
	// Note says what the requests are.
	Note string
}

// PlanOf returns the plan called name (the kind's DefaultPlan when name is
// ""), or an error on the `plan` key naming the plans there are.
func (k Kind) PlanOf(name string) (string, Plan, *FieldError) {
	if len(k.Plans) == 0 {
		if name != "" {
			return "", Plan{}, Fieldf(KeyPlan, "kind %s has no plans (its budget is rate_limit); remove plan", k.Name)
		}
		return "", Plan{RateLimit: k.Defaults.RateLimit}, nil
	}
	if name == "" {
		name = k.DefaultPlan
	}
	for _, p := range k.Plans {
		if p.Name == name {
			return name, p, nil
		}
	}
	return "", Plan{}, Fieldf(KeyPlan, "%q: kind %s has plans %s", name, k.Name, strings.Join(k.PlanNames(), ", "))
}

// PlanNames lists the kind's plans, in its order.
func (k Kind) PlanNames() []string {
	out := make([]string, len(k.Plans))
	for i, p := range k.Plans {
		out[i] = p.Name
	}
	return out
}

var (
	mu    sync.RWMutex
	kinds = map[string]Kind{}
)

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// Register adds a kind. It refuses a second kind of the same name and an
// incomplete registration.
func Register(k Kind) error {
	switch {
	case !nameRE.MatchString(k.Name):
		return fmt.Errorf("provider: kind name %q: want lower-case letters, digits and _", k.Name)
	case k.New == nil:
		return fmt.Errorf("provider %s: no constructor", k.Name)
	case len(k.Resources) == 0:
		return fmt.Errorf("provider %s: serves no resources", k.Name)
	case len(k.Plans) > 0 && k.DefaultPlan == "":
		return fmt.Errorf("provider %s: plans but no default plan", k.Name)
	}
	if len(k.Plans) > 0 && !slices.Contains(k.PlanNames(), k.DefaultPlan) {
		return fmt.Errorf("provider %s: default plan %q is not one of its plans", k.Name, k.DefaultPlan)
	}
	for _, p := range k.Plans {
		if !nameRE.MatchString(p.Name) || p.RateLimit.Requests < 1 || p.RateLimit.Per <= 0 || p.Hourly < 0 {
			return fmt.Errorf("provider %s: plan %q: want a lower-case name, a rate limit and an hourly budget >= 0", k.Name, p.Name)
		}
	}
	for _, r := range k.Required {
		if !slices.Contains(k.Keys, r) && r != KeyToken {
			return fmt.Errorf("provider %s: required key %s is not one of its keys", k.Name, r)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if _, dup := kinds[k.Name]; dup {
		return fmt.Errorf("provider: kind %q registered twice", k.Name)
	}
	kinds[k.Name] = k
	return nil
}

// MustRegister is Register for package init functions.
func MustRegister(k Kind) {
	if err := Register(k); err != nil {
		panic(err)
	}
}

// ErrUnknownKind is returned (wrapped) by Lookup.
var ErrUnknownKind = errors.New("unknown kind")

// Lookup returns the kind called name.
func Lookup(name string) (Kind, error) {
	mu.RLock()
	defer mu.RUnlock()
	k, ok := kinds[name]
	if !ok {
		return Kind{}, fmt.Errorf("%w %q; one of %s", ErrUnknownKind, name, strings.Join(namesLocked(), ", "))
	}
	return k, nil
}

// Names lists the registered kinds, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	return namesLocked()
}

func namesLocked() []string {
	out := make([]string, 0, len(kinds))
	for n := range kinds {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Takes reports whether the kind takes key.
func (k Kind) Takes(key Key) bool { return key == KeyToken || slices.Contains(k.Keys, key) }

// Serves reports whether the kind can serve r.
func (k Kind) Serves(r clients.Resource) bool { return slices.Contains(k.Resources, r) }

// Check applies what a kind says of a source's settings: kind-specific keys
// it does not take (set reports which keys are set), required keys, the
// resources it serves, then its own validation. Defaults are applied by the
// caller, which knows which keys were left out.
func (k Kind) Check(s *Settings, set func(Key) bool) *FieldError {
	for _, key := range []Key{KeyAccountID, KeyWorkspaceID, KeyUserIDs, KeySimulated, KeyScope, KeyTrailingDays} {
		if set(key) && !k.Takes(key) {
			return Fieldf(key, "kind %s does not take %s%s", k.Name, key, takesList(k))
		}
	}
	for _, key := range k.Required {
		switch {
		case set(key):
		case key == KeyToken:
			return Fieldf(key, "missing; give it as ${VAR}, e.g. token: ${%s_TOKEN}", strings.ToUpper(k.Name))
		default:
			return Fieldf(key, "missing; kind %s needs it", k.Name)
		}
	}
	for _, r := range s.Resources {
		if !k.Serves(r) {
			return Fieldf("resources", "kind %s does not serve %s (it serves %s)", k.Name, r, joinResources(k.Resources))
		}
	}
	if k.Validate != nil {
		return k.Validate(s)
	}
	return nil
}

func takesList(k Kind) string {
	var ks []string
	for _, key := range k.Keys {
		if key != KeyBaseURL {
			ks = append(ks, string(key))
		}
	}
	if len(ks) == 0 {
		return ""
	}
	return " (it takes " + strings.Join(ks, ", ") + ")"
}

func joinResources(rs []clients.Resource) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

// HTTPClient builds a source's HTTP client from a provider's own config
// (its auth headers, its default waits) and the common settings: the
// per-request timeout and the observers.
func HTTPClient(hc httpx.Config, s Settings) *httpx.Client {
	if s.Timeout > 0 {
		hc.Timeout = s.Timeout
	}
	return httpx.New(hc)
}
