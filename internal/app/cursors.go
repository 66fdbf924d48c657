package app

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/cursor"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/lease"
	"github.com/tidemarkhq/tidemark/poller"
	"github.com/tidemarkhq/tidemark/webhooks"
)

// CursorRow is one (source, resource) as `tidemark cursors --json` prints it
// and the status page shows it (a contract: add fields, rename none).
type CursorRow struct {
	Source            string        `json:"source"`
	Resource          string        `json:"resource"`
	HighWater         *time.Time    `json:"high_water"`
	LagSeconds        *float64      `json:"lag_seconds"`
	UpdatedBy         string        `json:"updated_by,omitempty"`
	LastRunID         string        `json:"last_run_id,omitempty"`
	LastRunKind       string        `json:"last_run_kind,omitempty"`
	LastRunStatus     string        `json:"last_run_status"`
	LastRunStartedAt  *time.Time    `json:"last_run_started_at"`
	LastRunFinishedAt *time.Time    `json:"last_run_finished_at"`
	LastRunError      string        `json:"last_run_error,omitempty"`
	LastRunCounts     cursor.Counts `json:"last_run_counts"`
	LastOKAt          *time.Time    `json:"last_ok_at"`
	NextRunAt         *time.Time    `json:"next_run_at"`
	// WaitingUntil and WaitingReason are set while the source makes us wait
	// (reason "quota": Toggl's hourly quota is spent).
	WaitingUntil  *time.Time `json:"waiting_until,omitempty"`
	WaitingReason string     `json:"waiting_reason,omitempty"`
	// BackoffUntil, Failures and BackoffError are set while this resource's
	// passes back off after failures (each resource backs off on its own).
	BackoffUntil *time.Time `json:"backoff_until,omitempty"`
	Failures     int        `json:"failures,omitempty"`
	BackoffError string     `json:"backoff_error,omitempty"`
	// State says, while the resource backs off because its listing stays
	// capped or unstable (clients.ErrCapped), why, until when, and the
	// command that retries it now (issue 22).
	State string `json:"state,omitempty"`
	// Quarantined counts the resource's records that could not be stored
	// (record_quarantine); QuarantineNote names the first and its error.
	Quarantined    int    `json:"quarantined,omitempty"`
	QuarantineNote string `json:"quarantine_note,omitempty"`
	// ReconcileDueSince is set while a scheduled reconcile has not run yet.
	ReconcileDueSince *time.Time `json:"reconcile_due_since,omitempty"`
	// ReadMode says how the source reads the resource when it has more than
	// one way (Clockify: "feed", or "listing: <why>" while the feed is
	// unusable).
	ReadMode string `json:"read_mode,omitempty"`
	// Owner is the fleet member that owns the source now ("" when none
	// does, or the owner predates membership).
	Owner string `json:"owner,omitempty"`
	// BehindSeconds is how far the mirror is behind the source: the time
	// since the last complete pass (null before the first). Late: more than
	// the schedule explains (lag.go). LagSeconds, the age of the newest
	// change, is no health signal: an idle resource's grows forever.
	BehindSeconds *float64 `json:"behind_seconds"`
	Late          bool     `json:"late,omitempty"`
	// LastWebhookAt is when the source's last signed webhook arrived
	// (issue 14; webhooks.go).
	LastWebhookAt *time.Time `json:"last_webhook_at,omitempty"`
	// Unserved says why nobody polls the source while a fleet runs
	// (issue 25): NoOwner or NotServed; "" when it is served.
	Unserved string `json:"unserved,omitempty"`
}

// Why a source is not polled (CursorRow.Unserved).
const (
	// NoOwner: a live replica has the source configured, none owns it.
	NoOwner = "no live replica serves it"
	// NotServed: the database knows the source, no live replica has it
	// configured (`tidemark cursor retire` drops a retired one).
	NotServed = "not served by any live replica"
)

// CursorRows lists every configured (source, resource), then those the
// database knows of sources no longer configured, with their cursor, last
// run, waits, back-off and next run.
func (a *App) CursorRows(ctx context.Context, only string, now time.Time) ([]CursorRow, error) {
	cfg := a.cfg()
	sts, err := cursor.New(a.Pool).List(ctx, only)
	if err != nil {
		return nil, err
	}
	waits, err := cursor.New(a.Pool).Waits(ctx, only)
	if err != nil {
		return nil, err
	}
	waitOf := map[string]cursor.Wait{}
	for _, w := range waits {
		if w.Until.After(now) {
			waitOf[w.Source] = w
		}
	}
	passes, err := cursor.New(a.Pool).PassStates(ctx, only)
	if err != nil {
		return nil, err
	}
	quarantined, err := cursor.New(a.Pool).QuarantinedRecords(ctx, only)
	if err != nil {
		return nil, err
	}
	qOf := map[string][]cursor.Quarantined{}
	for _, q := range quarantined {
		qOf[q.Source+"/"+q.Resource] = append(qOf[q.Source+"/"+q.Resource], q)
	}
	passOf := map[string][]cursor.PassState{}
	for _, ps := range passes {
		passOf[ps.Source+"/"+ps.Resource] = append(passOf[ps.Source+"/"+ps.Resource], ps)
	}
	byKey := map[string]cursor.Status{}
	for _, s := range sts {
		byKey[s.Source+"/"+s.Resource] = s
	}
	// Who can serve each source: the live members that have it
	// configured. With no live member (no daemon runs) nothing is judged.
	peers, err := lease.LivePeers(ctx, a.Pool, a.fleetTTL())
	if err != nil {
		return nil, err
	}
	servers := lease.Servers(peers)
	retired, err := cursor.New(a.Pool).Retired(ctx)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for i := range cfg.Sources {
		names[cfg.Sources[i].Name] = true
	}
	for _, s := range sts {
		names[s.Source] = true
	}
	for name := range servers {
		names[name] = true
	}
	var leases []string
	for name := range names {
		leases = append(leases, poller.OwnerLease(name))
	}
	owners, err := lease.Holders(ctx, a.Pool, leases)
	if err != nil {
		return nil, err
	}
	unserved := func(source string) string {
		switch {
		case len(peers) == 0:
			return ""
		case len(servers[source]) == 0:
			return NotServed
		case owners[poller.OwnerLease(source)] == "":
			return NoOwner
		}
		return ""
	}
	hooks, err := webhooks.LastDelivery(ctx, a.Pool)
	if err != nil {
		return nil, err
	}
	var out []CursorRow
	add := func(st cursor.Status, sc *config.Source) {
		row := CursorRow{Source: st.Source, Resource: st.Resource, UpdatedBy: st.UpdatedBy, LastOKAt: st.LastOK,
			Owner: owners[poller.OwnerLease(st.Source)], LastWebhookAt: utcPtr(hooks, st.Source),
			Unserved: unserved(st.Source)}
		if w, ok := waitOf[st.Source]; ok {
			until := w.Until
			row.WaitingUntil, row.WaitingReason = &until, w.Reason
		}
		if qs := qOf[st.Source+"/"+st.Resource]; len(qs) > 0 {
			row.Quarantined = len(qs)
			row.QuarantineNote = fmt.Sprintf("%d records could not be stored (first: id %s since %s: %s); each pass retries them",
				len(qs), qs[0].ID, qs[0].FirstFailed.UTC().Format(time.RFC3339), firstLine(qs[0].Error))
		}
		for _, ps := range passOf[st.Source+"/"+st.Resource] {
			if ps.BackoffUntil != nil && ps.BackoffUntil.After(now) && (row.BackoffUntil == nil || ps.BackoffUntil.After(*row.BackoffUntil)) {
				row.BackoffUntil, row.Failures, row.BackoffError = ps.BackoffUntil, ps.Failures, ps.LastError
				row.State = cappedState(st.Source, st.Resource, ps)
			}
			if ps.Kind == cursor.KindReconcile && ps.DueSince != nil {
				row.ReconcileDueSince = ps.DueSince
			}
			if ps.Kind == cursor.KindIncremental && ps.Mode != "" {
				row.ReadMode = ps.Mode
			}
		}
		if !st.HighWater.IsZero() {
			hw := st.HighWater.UTC()
			row.HighWater = &hw
			lag := now.Sub(hw).Seconds()
			row.LagSeconds = &lag
		}
		if r := st.LastRun; r != nil {
			started := r.StartedAt.UTC()
			row.LastRunID, row.LastRunKind, row.LastRunStatus = r.RunID, r.Kind, r.Status
			row.LastRunStartedAt, row.LastRunFinishedAt = &started, r.FinishedAt
			row.LastRunError, row.LastRunCounts = r.Error, r.Counts
		}
		spec := ""
		if sc != nil {
			spec = sc.Schedule
		}
		setBehind(&row, spec, now)
		if sc != nil {
			if sched, err := config.CronParser.Parse(sc.Schedule); err == nil {
				next := sched.Next(now.UTC())
				row.NextRunAt = &next
			}
		}
		out = append(out, row)
	}
	// Configured sources first, every resource shown even before its first run.
	for i := range cfg.Sources {
		sc := &cfg.Sources[i]
		if only != "" && sc.Name != only {
			continue
		}
		for _, r := range sc.Resources {
			key := sc.Name + "/" + r
			st, ok := byKey[key]
			if !ok {
				st = cursor.Status{Source: sc.Name, Resource: r}
			}
			delete(byKey, key)
			add(st, sc)
		}
	}
	// Then what the database knows of sources no longer configured here
	// (less those retired that no live replica has configured again).
	shown := map[string]bool{}
	for _, st := range sts {
		if _, ok := byKey[st.Source+"/"+st.Resource]; ok && (!retired[st.Source] || len(servers[st.Source]) > 0) {
			add(st, nil)
		}
		shown[st.Source] = true
	}
	// And the sources other replicas have configured that nobody owns,
	// even before their first pass: they are in no list above.
	var others []string
	for name := range servers {
		if _, err := cfg.Source(name); err != nil && !shown[name] && (only == "" || name == only) && unserved(name) != "" {
			others = append(others, name)
		}
	}
	slices.Sort(others)
	for _, name := range others {
		add(cursor.Status{Source: name, Resource: "-"}, nil)
	}
	return out, nil
}

// ScheduleGap is the longest gap between the next scheduled runs of a cron
// spec (over a week at most): "*/5 * * * *" is 5 minutes, "0 3 * * *" a day.
// 0 for a spec that does not parse.
func ScheduleGap(spec string, from time.Time) time.Duration {
	sched, err := config.CronParser.Parse(spec)
	if err != nil {
		return 0
	}
	var gap time.Duration
	prev := sched.Next(from.UTC())
	for range 64 {
		next := sched.Next(prev)
		gap = max(gap, next.Sub(prev))
		if next.Sub(from) > 7*24*time.Hour {
			break
		}
		prev = next
	}
	return gap
}

// cappedState is the State of a resource backing off after a capped or
// unstable listing ("" for any other back-off).
func cappedState(source, resource string, ps cursor.PassState) string {
	if !strings.Contains(ps.LastError, clients.ErrCapped.Error()) || ps.BackoffUntil == nil {
		return ""
	}
	_, why, _ := strings.Cut(firstLine(ps.LastError), clients.ErrCapped.Error())
	why = strings.TrimLeft(why, ": ")
	return fmt.Sprintf("capped: %s; retry at %s; run `tidemark sync --source %s --resource %s` to retry now",
		cmp.Or(why, "the listing could not be walked whole"), ps.BackoffUntil.UTC().Format(time.RFC3339), source, resource)
}
