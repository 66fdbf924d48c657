// Package budget plans a source's requests against its provider's budget
// (issue 10, section 3): what one incremental pass of each resource costs
// (each kind's provider.Kind.PassCost; one request per resource when it
// declares none), how many passes the schedule runs in its busiest hour, and
// the hourly total against the plan's hourly quota, or against what the
// rate limit lets through in an hour when that is less.
//
// The numbers are lower bounds: one page per listing, and the counts
// (projects, users) that listings made per project or per user depend on
// are assumed (Assume). A verdict of "does not fit" therefore means the
// schedule cannot fit whatever the data; "fits" means it fits if the data
// stays that small.
package budget

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/provider"
	"github.com/tidemarkhq/tidemark/internal/config"
)

// Verdict says whether a schedule fits its hourly budget.
type Verdict string

// Verdicts.
const (
	Fits       Verdict = "fits"
	Tight      Verdict = "tight"
	DoesNotFit Verdict = "does not fit"
)

// TightShare is the share of an hourly budget above which a schedule is
// tight: a few more pages than one per listing spend it.
const TightShare = 0.8

// Assume are the counts the planner cannot know.
type Assume struct {
	// Projects and Users: for listings made per project or per user
	// (default 1 each).
	Projects, Users int
}

// Line is one resource's cost per pass.
type Line struct {
	Resource string `json:"resource"`
	// Requests per pass; Daily at most once a day (counted in the busiest
	// hour).
	Requests int    `json:"requests"`
	Daily    int    `json:"daily,omitempty"`
	Cap      string `json:"cap,omitempty"`
	Note     string `json:"note"`
}

// CapUse is the busiest hour's use of a narrower hourly cap.
type CapUse struct {
	Name   string `json:"name"`
	Hourly int    `json:"hourly"`
	Quota  int    `json:"quota"`
}

// Report is a source's budget.
type Report struct {
	Source   string `json:"source"`
	Kind     string `json:"kind"`
	Plan     string `json:"plan,omitempty"`
	Schedule string `json:"schedule"`
	// PassesPerHour is the most passes the schedule starts in any 60
	// minutes; Interval the shortest time between two; Span what one pass
	// reads (Interval plus the overlap).
	PassesPerHour int           `json:"passes_per_hour"`
	Interval      time.Duration `json:"-"`
	Span          time.Duration `json:"-"`
	// IntervalSeconds and SpanSeconds are Interval and Span for JSON.
	IntervalSeconds float64 `json:"interval_seconds"`
	SpanSeconds     float64 `json:"span_seconds"`
	Resources       []Line  `json:"resources"`
	// PassRequests is one pass of every resource (without Daily ones);
	// HourlyRequests the busiest hour.
	PassRequests   int `json:"pass_requests"`
	HourlyRequests int `json:"hourly_requests"`
	// Quota is the hourly budget (0: none): the plan's hourly quota, or
	// what the rate limit lets through in an hour when that is less;
	// QuotaFrom says which.
	// Reconcile is one reconcile run of every resource (on
	// ReconcileSchedule, over the lookback days); PeakHourlyRequests the
	// busiest hour with a reconcile run in it, which the verdict judges.
	// ReconcilesPerHour is the most reconcile runs ReconcileSchedule
	// starts in any 60 minutes, each of ReconcileRequests.
	ReconcileSchedule  string `json:"reconcile_schedule,omitempty"`
	Reconcile          []Line `json:"reconcile,omitempty"`
	ReconcileRequests  int    `json:"reconcile_requests"`
	ReconcilesPerHour  int    `json:"reconciles_per_hour,omitempty"`
	PeakHourlyRequests int    `json:"peak_hourly_requests"`
	// FallbackPassRequests and FallbackHourlyRequests are a pass and the
	// busiest hour when a resource's usual way is unavailable (Clockify's
	// feed); FallbackVerdict judges that hour. Zero: no fallback.
	FallbackPassRequests   int      `json:"fallback_pass_requests,omitempty"`
	FallbackHourlyRequests int      `json:"fallback_hourly_requests,omitempty"`
	FallbackVerdict        Verdict  `json:"fallback_verdict,omitempty"`
	Quota                  int      `json:"hourly_quota"`
	QuotaFrom              string   `json:"quota_from"`
	Caps                   []CapUse `json:"caps,omitempty"`
	// MinPassRequests is one pass on a schedule of once an hour (with its
	// Daily requests): the least an hour can hold.
	MinPassRequests int     `json:"min_pass_requests"`
	Verdict         Verdict `json:"verdict"`
	// Refuse: even the minimum pass does not fit the hour.
	Refuse bool `json:"refuse"`
	// Suggest is the most frequent schedule that fits ("" when the
	// configured one does, or none does).
	Suggest     string   `json:"suggest,omitempty"`
	Assumptions []string `json:"assumptions"`
}

// Input is what the planner needs of a source.
type Input struct {
	Kind     provider.Kind
	Settings provider.Settings
	Schedule string
	// ReconcileSchedule ("" none) and LookbackDays: the reconcile runs.
	ReconcileSchedule string
	LookbackDays      int
	Assume            Assume
}

// ForSource plans a configured source (config.Load has validated it).
func ForSource(s *config.Source, a Assume) (Report, error) {
	k, err := provider.Lookup(s.Kind)
	if err != nil {
		return Report{}, err
	}
	return Plan(Input{Kind: k, Settings: s.Settings(), Schedule: s.Schedule,
		ReconcileSchedule: s.Reconcile.Schedule, LookbackDays: s.Reconcile.LookbackDays, Assume: a})
}

// Plan computes the report.
func Plan(in Input) (Report, error) { return plan(in, true) }

func plan(in Input, withSuggest bool) (Report, error) {
	a := in.Assume
	a.Projects, a.Users = max(a.Projects, 1), max(a.Users, 1)
	s := in.Settings
	name, pl, fe := in.Kind.PlanOf(s.Plan)
	if fe != nil {
		return Report{}, fe
	}
	passes, gap, err := Passes(in.Schedule)
	if err != nil {
		return Report{}, err
	}
	r := Report{
		Source: s.Name, Kind: in.Kind.Name, Plan: name, Schedule: in.Schedule,
		PassesPerHour: passes, Interval: gap, Span: gap + s.Overlap,
		IntervalSeconds: gap.Seconds(), SpanSeconds: (gap + s.Overlap).Seconds(),
		Assumptions: []string{
			"one page per listing (a listing of more pages costs more)",
			fmt.Sprintf("%d project(s) and %d user(s) for listings made per project or per user", a.Projects, a.Users),
		},
	}
	r.Quota, r.QuotaFrom = quota(pl, name, s.RateLimit)
	var fallback []Line
	cost := func(shape provider.PassShape) []Line {
		shape.Projects, shape.Users = a.Projects, a.Users
		var ls []Line
		fallback = nil
		for _, res := range s.Resources {
			c := provider.Cost{Requests: 1, Note: "one listing"}
			if in.Kind.PassCost != nil {
				c = in.Kind.PassCost(res, shape, s)
			}
			// Churn counted in every pass: a source is polled because it
			// is being edited.
			l := Line{Resource: string(res), Requests: c.Requests + c.Churn, Daily: c.Daily, Cap: c.Cap, Note: c.Note}
			ls = append(ls, l)
			if c.Fallback > 0 {
				l.Requests = c.Fallback + c.Churn
			}
			fallback = append(fallback, l)
		}
		return ls
	}
	r.Resources = cost(provider.PassShape{Span: r.Span})
	fallbackLines := fallback
	hourly, caps := total(r.Resources, passes)
	for _, l := range r.Resources {
		r.PassRequests += l.Requests
	}
	r.HourlyRequests = hourly
	if in.ReconcileSchedule != "" {
		// Counted per run of its own schedule: a reconcile every minute
		// is 60 runs an hour, not one (issue 23).
		if r.ReconcilesPerHour, _, err = Passes(in.ReconcileSchedule); err != nil {
			return Report{}, fmt.Errorf("reconcile: %w", err)
		}
		r.ReconcileSchedule = in.ReconcileSchedule
		r.Reconcile = cost(provider.PassShape{Reconcile: true, Days: in.LookbackDays + 8})
	}
	peakCaps := maps.Clone(caps)
	for _, l := range r.Reconcile {
		r.ReconcileRequests += l.Requests
		if l.Cap != "" {
			peakCaps[l.Cap] += r.ReconcilesPerHour * l.Requests
		}
	}
	r.PeakHourlyRequests = hourly + r.ReconcilesPerHour*r.ReconcileRequests
	minHourly, minCaps := total(cost(provider.PassShape{Span: time.Hour + s.Overlap}), 1)
	r.MinPassRequests = minHourly
	r.Refuse = r.Quota > 0 && minHourly > r.Quota
	for _, n := range capNames(pl) {
		r.Caps = append(r.Caps, CapUse{Name: n, Hourly: peakCaps[n], Quota: pl.Caps[n]})
		r.Refuse = r.Refuse || minCaps[n] > pl.Caps[n]
	}
	r.Verdict = judge(r.PeakHourlyRequests, r.Quota, pl, peakCaps)
	if fh, fcaps := total(fallbackLines, passes); fh != hourly {
		for _, l := range fallbackLines {
			r.FallbackPassRequests += l.Requests
		}
		r.FallbackHourlyRequests = fh
		r.FallbackVerdict = judge(fh, r.Quota, pl, fcaps)
	}
	if withSuggest && r.Verdict == DoesNotFit && !r.Refuse {
		r.Suggest = suggest(in, a)
	}
	return r, nil
}

// judge says whether an hour of hourly requests (caps: per cap) fits quota
// and the plan's caps.
func judge(hourly, quota int, pl provider.Plan, caps map[string]int) Verdict {
	over, tight := quota > 0 && hourly > quota, quota > 0 && float64(hourly) > TightShare*float64(quota)
	for n, q := range pl.Caps {
		over = over || caps[n] > q
		tight = tight || float64(caps[n]) > TightShare*float64(q)
	}
	switch {
	case over:
		return DoesNotFit
	case tight:
		return Tight
	}
	return Fits
}

// quota is the hourly budget: the plan's, or the rate limit's hourly
// capacity when that is less.
func quota(p provider.Plan, name string, rl httpx.RateLimit) (int, string) {
	capacity := 0
	if rl.Requests > 0 && rl.Per > 0 {
		capacity = int(float64(rl.Requests) * float64(time.Hour) / float64(rl.Per))
	}
	rlDoc := fmt.Sprintf("rate_limit %d per %s", rl.Requests, rl.Per)
	switch {
	case p.Hourly > 0 && (capacity == 0 || p.Hourly <= capacity):
		return p.Hourly, "plan " + name
	case capacity > 0:
		return capacity, rlDoc
	}
	return 0, "none"
}

// total is the busiest hour of passes passes: every pass's requests and
// the daily ones once, in all and per cap.
func total(ls []Line, passes int) (int, map[string]int) {
	n, caps := 0, map[string]int{}
	for _, l := range ls {
		h := passes*l.Requests + l.Daily
		n += h
		if l.Cap != "" {
			caps[l.Cap] += h
		}
	}
	return n, caps
}

func capNames(p provider.Plan) []string {
	var ns []string
	for n := range p.Caps {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return ns
}

// candidates are the schedules suggest tries, most frequent first.
var candidates = []string{
	"* * * * *", "*/2 * * * *", "*/5 * * * *", "*/10 * * * *", "*/15 * * * *", "*/20 * * * *", "*/30 * * * *",
	"0 * * * *", "0 */2 * * *", "0 */3 * * *", "0 */6 * * *", "0 */12 * * *", "0 0 * * *",
}

// suggest returns the most frequent candidate schedule that fits ("" when
// none does).
func suggest(in Input, a Assume) string {
	for _, c := range candidates {
		in.Schedule, in.Assume = c, a
		if r, err := plan(in, false); err == nil && r.Verdict == Fits {
			return c
		}
	}
	return ""
}

// week is how far Passes looks; from is a Monday at midnight UTC.
var (
	from = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	week = 7 * 24 * time.Hour
)

// Passes returns the most passes spec starts in any 60 minutes of a week
// and the shortest time between two passes (a week when it starts at most
// one a week). A spec that starts none in a week counts as one pass.
// Answers are kept by spec: walking a week of "* * * * *" takes about 7 ms,
// and a daemon checks every source's plan at start (10,000 sources on one
// schedule took 70 s).
func Passes(spec string) (int, time.Duration, error) {
	if p, ok := passesBySpec.Load(spec); ok {
		p := p.(passes)
		return p.most, p.gap, nil
	}
	most, gap, err := walkPasses(spec)
	if err == nil {
		passesBySpec.Store(spec, passes{most, gap})
	}
	return most, gap, err
}

type passes struct {
	most int
	gap  time.Duration
}

var passesBySpec sync.Map // spec → passes

func walkPasses(spec string) (int, time.Duration, error) {
	sched, err := config.CronParser.Parse(spec)
	if err != nil {
		return 0, 0, fmt.Errorf("schedule %q: %w", spec, err)
	}
	var ts []time.Time
	end := from.Add(week)
	for t := sched.Next(from.Add(-time.Nanosecond)); !t.IsZero() && t.Before(end) && len(ts) < 1_000_000; t = sched.Next(t) {
		ts = append(ts, t)
	}
	if len(ts) <= 1 {
		return 1, week, nil
	}
	most, gap := 0, week
	j := 0
	for i, t := range ts {
		for ts[j].Add(time.Hour).Compare(t) <= 0 {
			j++
		}
		most = max(most, i-j+1)
		if i > 0 {
			gap = min(gap, t.Sub(ts[i-1]))
		}
	}
	return most, gap, nil
}

// Summary is the report in one line.
func (r Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "source %s (%s", r.Source, r.Kind)
	if r.Plan != "" {
		fmt.Fprintf(&b, ", plan %s", r.Plan)
	}
	fmt.Fprintf(&b, "): schedule %q runs up to %d passes/h; a pass costs at least %d requests", r.Schedule, r.PassesPerHour, r.PassRequests)
	var parts []string
	for _, l := range r.Resources {
		p := fmt.Sprintf("%s %d", l.Resource, l.Requests)
		if l.Daily > 0 {
			p += fmt.Sprintf(" +%d/day", l.Daily)
		}
		parts = append(parts, p)
	}
	fmt.Fprintf(&b, " (%s); %d requests in the busiest hour", strings.Join(parts, ", "), r.HourlyRequests)
	if r.ReconcileRequests > 0 {
		runs := "a reconcile run"
		if r.ReconcilesPerHour > 1 {
			runs = fmt.Sprintf("%d reconcile runs", r.ReconcilesPerHour)
		}
		fmt.Fprintf(&b, ", %d with %s (%q, %d requests each)", r.PeakHourlyRequests, runs, r.ReconcileSchedule, r.ReconcileRequests)
	}
	if r.Quota > 0 {
		fmt.Fprintf(&b, " against %d/h (%s)", r.Quota, r.QuotaFrom)
	} else {
		b.WriteString(" (no hourly quota)")
	}
	for _, c := range r.Caps {
		fmt.Fprintf(&b, "; %s calls %d of %d/h", c.Name, c.Hourly, c.Quota)
	}
	fmt.Fprintf(&b, ": %s", r.Verdict)
	if r.FallbackVerdict != "" {
		fmt.Fprintf(&b, "; without the change feed (fallback listings) a pass costs %d, %d in the busiest hour: %s", r.FallbackPassRequests, r.FallbackHourlyRequests, r.FallbackVerdict)
	}
	if r.Refuse {
		fmt.Fprintf(&b, "; even one pass an hour (%d requests) does not fit", r.MinPassRequests)
	} else if r.Suggest != "" {
		fmt.Fprintf(&b, "; %q fits", r.Suggest)
	}
	return b.String()
}
