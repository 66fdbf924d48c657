package app

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/migrations"
)

// Check is one finding of `tidemark doctor`: what was checked, how it went
// and, when it did not go well, how to fix it.
type Check struct {
	Subject string `json:"subject"` // "database" or a source's name
	Name    string `json:"check"`
	Status  string `json:"status"` // ok, warn or fail
	Detail  string `json:"detail"`
	Fix     string `json:"fix,omitempty"`
}

// Statuses of a Check.
const (
	CheckOK   = "ok"
	CheckWarn = "warn"
	CheckFail = "fail"
)

// MaxSkew is the clock difference to a source beyond which doctor warns.
// Cursors follow the source's clock, so skew never loses records; it only
// shifts what is shown on our clock and the spent dates a reconcile picks.
const MaxSkew = time.Minute

// CheckDatabase checks that the database answers, is migrated to this
// binary's schema and lets the role read and write every table.
func (a *App) CheckDatabase(ctx context.Context) []Check {
	c := func(name, status, detail, fix string) Check {
		return Check{Subject: "database", Name: name, Status: status, Detail: detail, Fix: fix}
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := a.Pool.Ping(pctx); err != nil {
		return []Check{c("reachable", CheckFail, redactErr(err),
			"check database_url (or DATABASE_URL, --database-url), that PostgreSQL runs and accepts this host and role")}
	}
	out := []Check{c("reachable", CheckOK, "connected", "")}
	cur, latest, err := migrations.Versions(ctx, a.DBURL)
	switch {
	case err != nil:
		out = append(out, c("migrated", CheckFail, redactErr(err), "run `tidemark migrate`"))
	case cur < latest:
		out = append(out, c("migrated", CheckFail, fmt.Sprintf("schema version %d, this binary needs %d", cur, latest),
			"run `tidemark migrate` (safe while daemons run)"))
	case cur > latest:
		out = append(out, c("migrated", CheckWarn, fmt.Sprintf("schema version %d is newer than this binary's %d", cur, latest),
			"upgrade this binary to the fleet's version"))
	default:
		out = append(out, c("migrated", CheckOK, fmt.Sprintf("schema version %d", cur), ""))
	}
	missing, err := migrations.MissingRights(ctx, a.DBURL)
	switch {
	case err != nil:
		out = append(out, c("rights", CheckFail, redactErr(err), ""))
	case len(missing) > 0:
		var parts []string
		for _, t := range slices.Sorted(maps.Keys(missing)) {
			parts = append(parts, t+": "+missing[t])
		}
		out = append(out, c("rights", CheckFail, "the role lacks "+strings.Join(parts, "; "),
			"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO <role> (as the tables' owner)"))
	default:
		out = append(out, c("rights", CheckOK, "the role reads and writes every table", ""))
	}
	return out
}

// errProbed stops a probe after its first page.
var errProbed = errors.New("probed")

// CheckSources makes one cheap request per source (the first page of its
// cheapest resource, updated since now): the token is accepted, and the
// source's Date header gives the clock skew.
func (a *App) CheckSources(ctx context.Context, only string) ([]Check, error) {
	srcs, err := a.Sources(ctx, only)
	if err != nil {
		return nil, err
	}
	var out []Check
	for _, s := range srcs {
		name := s.Name()
		rs := s.Resources
		if len(rs) == 0 {
			rs = s.Source.Resources()
		}
		// Whole listings of small resources first: one request each.
		r := rs[0]
		for _, pref := range []clients.Resource{"clients", "users", "projects"} {
			if slices.Contains(rs, pref) {
				r = pref
				break
			}
		}
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		var srcTime, sent, got time.Time
		sent = time.Now()
		err := s.List(pctx, r, clients.Window{UpdatedSince: sent.Add(-time.Minute)}, func(_ context.Context, p clients.Page) error {
			srcTime, got = p.SourceTime, time.Now()
			return errProbed
		})
		cancel()
		if err != nil && !errors.Is(err, errProbed) {
			out = append(out, probeFailure(name, r, err))
			continue
		}
		out = append(out, Check{Subject: name, Name: "token", Status: CheckOK, Detail: fmt.Sprintf("GET %s answered", r)})
		if srcTime.IsZero() {
			out = append(out, Check{Subject: name, Name: "clock", Status: CheckWarn, Detail: "the source sent no Date header",
				Fix: "the cursor cannot be capped by the source's clock; report it if the provider is a proxy you run"})
			continue
		}
		// The Date was stamped between sending and receiving; it has
		// one-second precision.
		mid := sent.Add(got.Sub(sent) / 2)
		skew := srcTime.Sub(mid).Round(time.Second)
		ck := Check{Subject: name, Name: "clock", Status: CheckOK, Detail: fmt.Sprintf("source clock %+v from ours", skew)}
		if skew > MaxSkew || skew < -MaxSkew {
			ck.Status = CheckWarn
			ck.Fix = "sync this machine's clock (NTP); cursors follow the source's clock, so no record is lost, but times shown on our clock and reconcile's date range are off"
		}
		out = append(out, ck)
	}
	return out, nil
}

func probeFailure(source string, r clients.Resource, err error) Check {
	ck := Check{Subject: source, Name: "token", Status: CheckFail, Detail: fmt.Sprintf("GET %s: %v", r, err)}
	var he *httpx.Error
	switch {
	case errors.As(err, &he) && (he.Status == 401 || he.Status == 403):
		ck.Detail = fmt.Sprintf("the source refused the token (%d on %s)", he.Status, r)
		ck.Fix = "check the source's token (and account_id or workspace_id): a personal access token of a user who can read " + string(r)
	case errors.As(err, &he) && he.Status == 0:
		ck.Name = "reachable"
		ck.Fix = "check base_url and that this host reaches the provider (proxy, firewall)"
	default:
		ck.Fix = "see the error; `tidemark sync --source " + source + "` shows the same request with logs"
	}
	return ck
}
