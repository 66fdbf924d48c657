package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/cursor"
	tmapp "github.com/tidemarkhq/tidemark/internal/app"
	"github.com/tidemarkhq/tidemark/lease"
	"github.com/tidemarkhq/tidemark/poller"
	"github.com/tidemarkhq/tidemark/schema"
)

// cursorJSON is one element of `cursors --json` (a contract: add fields,
// rename none); internal/app builds it, for the status page too.
type cursorJSON = tmapp.CursorRow

// runJSON is one element of `runs --json` (a contract like cursorJSON: add
// fields, rename none). Times are RFC 3339 in UTC; dates are YYYY-MM-DD.
type runJSON struct {
	RunID           string        `json:"run_id"`
	Source          string        `json:"source"`
	Resource        string        `json:"resource"`
	Kind            string        `json:"kind"`
	Status          string        `json:"status"`
	Error           string        `json:"error,omitempty"`
	Actor           string        `json:"actor,omitempty"`
	StartedAt       time.Time     `json:"started_at"`
	FinishedAt      *time.Time    `json:"finished_at"`
	WindowSince     *time.Time    `json:"window_since,omitempty"`
	WindowFrom      string        `json:"window_from,omitempty"`
	WindowTo        string        `json:"window_to,omitempty"`
	HighWaterBefore *time.Time    `json:"high_water_before"`
	HighWaterAfter  *time.Time    `json:"high_water_after"`
	Pages           int           `json:"pages"`
	Counts          cursor.Counts `json:"counts"`
}

func newRunJSON(r cursor.Run) runJSON {
	utc := func(t *time.Time) *time.Time {
		if t == nil {
			return nil
		}
		u := t.UTC()
		return &u
	}
	date := func(d clients.Date) string {
		if d.IsZero() {
			return ""
		}
		return d.String()
	}
	return runJSON{
		RunID: r.RunID, Source: r.Source, Resource: r.Resource, Kind: r.Kind, Status: r.Status,
		Error: r.Error, Actor: r.Actor, StartedAt: r.StartedAt.UTC(), FinishedAt: utc(r.FinishedAt),
		WindowSince: utc(r.WindowSince), WindowFrom: date(r.WindowFrom), WindowTo: date(r.WindowTo),
		HighWaterBefore: utc(r.HighWaterBefore), HighWaterAfter: utc(r.HighWaterAfter),
		Pages: r.Pages, Counts: r.Counts,
	}
}

func newCursorsCmd(g *globals) *cobra.Command {
	var f appFlags
	var asJSON bool
	c := appCommand(g, &f, &cobra.Command{Use: "cursors", Short: "Show the cursor and last pass of every source and resource"},
		func(ctx context.Context, a *app) error {
			rows, err := cursorRows(ctx, a, f.source, time.Now())
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(g.stdout, rows)
			}
			writeCursorTable(g.stdout, rows)
			writeLastWebhooks(g.stdout, rows, time.Now())
			return nil
		})
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON (an array of objects)")
	return c
}

func cursorRows(ctx context.Context, a *app, only string, now time.Time) ([]cursorJSON, error) {
	return a.CursorRows(ctx, only, now)
}

func writeCursorTable(w io.Writer, rows []cursorJSON) {
	_ = printTable(w, "SOURCE\tRESOURCE\tHIGH WATER\tBEHIND\tNEWEST CHANGE\tLAST RUN\tSTATUS\tAT\tFETCHED\tINS\tUPD\tUNCH\tSTALE\tTOMB\tNEXT RUN\tOWNER", rows, cursorCells)
}

func cursorCells(r cursorJSON) []any {
	hw := "never"
	if r.HighWater != nil {
		hw = r.HighWater.Format(time.RFC3339)
	}
	behind, newest := lagCells(r)
	at := "-"
	if r.LastRunFinishedAt != nil {
		at = r.LastRunFinishedAt.UTC().Format(time.RFC3339)
	} else if r.LastRunStartedAt != nil {
		at = r.LastRunStartedAt.Format(time.RFC3339)
	}
	next := "-"
	if r.NextRunAt != nil {
		next = r.NextRunAt.Format(time.RFC3339)
	}
	c := r.LastRunCounts
	status := cmp.Or(r.LastRunStatus, "-")
	if r.WaitingUntil != nil {
		what := "quota"
		if r.WaitingReason != "quota" {
			what = "rate limit"
		}
		status = fmt.Sprintf("waiting for %s until %s", what, r.WaitingUntil.UTC().Format(time.RFC3339))
	} else if r.State != "" {
		status = fmt.Sprintf("%s, %s", status, r.State)
	} else if r.BackoffUntil != nil {
		status = fmt.Sprintf("%s, backing off until %s after %d failures", status, r.BackoffUntil.UTC().Format(time.RFC3339), r.Failures)
	}
	if r.Quarantined > 0 {
		status += fmt.Sprintf(", %d records quarantined", r.Quarantined)
	}
	if r.ReconcileDueSince != nil {
		status += ", reconcile due"
	}
	if r.ReadMode != "" && r.ReadMode != "feed" {
		status += ", read by " + r.ReadMode
	}
	return []any{r.Source, r.Resource, hw, behind, newest, cmp.Or(r.LastRunKind, "-"), status, at,
		c.Fetched, c.Inserted, c.Updated, c.Unchanged, c.Stale, c.Tombstoned, next, owner(r)}
}

// owner is the OWNER cell: the fleet member, or why nobody polls it.
func owner(r cursorJSON) string {
	if r.Unserved != "" {
		return "NONE: " + r.Unserved
	}
	return cmp.Or(r.Owner, "-")
}

// lagCells are a row's BEHIND (since the last complete pass, LATE past what
// the schedule explains) and NEWEST CHANGE (the high water's age): apart,
// since an idle resource is not a broken one.
func lagCells(r cursorJSON) (behind, newest string) {
	behind, newest = "-", "-"
	if r.BehindSeconds != nil {
		behind = tmapp.Ago(time.Duration(*r.BehindSeconds * float64(time.Second)))
		if r.Late {
			behind = "LATE " + behind
		}
	}
	if r.LagSeconds != nil {
		newest = tmapp.Ago(time.Duration(*r.LagSeconds*float64(time.Second))) + " ago"
	}
	return behind, newest
}

func actor() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + cmp.Or(host, "unknown")
}

// confirm asks on a terminal; elsewhere it requires --yes.
func confirm(g *globals, yes bool, in io.Reader, question string) error {
	if yes {
		return nil
	}
	if !isTerminal(in) || !isTerminal(g.stderr) {
		return usagef("%s: not on a terminal, so pass --yes to confirm", question)
	}
	fmt.Fprintf(g.stderr, "%s [y/N] ", question)
	line, _ := bufio.NewReader(in).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
		return fmt.Errorf("not confirmed; nothing changed")
	}
	return nil
}

// lockPasses holds the source's pass lease while an operator moves its
// cursor, so that a pass in flight cannot advance over the change.
func lockPasses(ctx context.Context, a *app, source string) (*lease.Lease, func(), error) {
	l := lease.New(a.DBURL)
	// A daemon gives a pass lease back up to a second after its pass
	// (lease.ReleaseSoon): a few tries before calling it busy.
	held, err := l.TryAcquire(ctx, poller.PassLease(source))
	for try := 0; errors.Is(err, lease.ErrBusy) && try < 6 && ctx.Err() == nil; try++ {
		time.Sleep(500 * time.Millisecond)
		held, err = l.TryAcquire(ctx, poller.PassLease(source))
	}
	if errors.Is(err, lease.ErrBusy) {
		l.Close()
		return nil, nil, fmt.Errorf("a pass of source %s is running; nothing changed: try again in a moment", source)
	}
	if err != nil {
		l.Close()
		return nil, nil, err
	}
	return held, func() { held.Release(); l.Close() }, nil
}

// fenceOf makes a lease the fence of an operator's cursor change.
func fenceOf(held *lease.Lease) func(context.Context, pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error { return held.Check(ctx, tx) }
}

func newCursorCmd(g *globals) *cobra.Command {
	return group("cursor", "Operator repair of a cursor: set or reset (recorded in sync_runs); retire a source nobody serves",
		newCursorSetCmd(g), newCursorResetCmd(g), newCursorRetireCmd(g))
}

// newCursorRetireCmd drops a source that no live replica serves any more
// from `cursors`, the status page and the count of sources not served
// (issue 25). Its rows and cursors stay; configured again, it shows again.
func newCursorRetireCmd(g *globals) *cobra.Command {
	var f appFlags
	var name string
	c := appCommand(g, &f, &cobra.Command{
		Use:   "retire SOURCE",
		Short: "Drop a source no live replica serves any more from the view (cursors, status page, alerts); its rows stay",
		Args:  cobra.ExactArgs(1),
		PreRunE: func(_ *cobra.Command, args []string) error {
			name = args[0]
			return nil
		},
	}, func(ctx context.Context, a *app) error {
		peers, err := lease.LivePeers(ctx, a.Pool, 3*poller.DefaultHeartbeat)
		if err != nil {
			return err
		}
		if ids := lease.Servers(peers)[name]; len(ids) > 0 {
			return usagef("source %s is configured on live replicas %s: remove it from their configs (and reload them) first", name, strings.Join(ids, ", "))
		}
		ok, err := cursor.New(a.Pool).Retire(ctx, name, actor())
		if err != nil {
			return err
		}
		if !ok {
			return usagef("source %s: the database has no cursor of it (see tidemark cursors)", name)
		}
		fmt.Fprintf(g.stdout, "source %s retired: no longer shown nor counted as not served; its rows stay\n", name)
		return nil
	})
	return c
}

func newCursorSetCmd(g *globals) *cobra.Command {
	var f appFlags
	var resource, to string
	var t time.Time
	var yes bool
	c := appCommand(g, &f, &cobra.Command{
		Use:   "set",
		Short: "Move a cursor to a time (even backward); the next pass starts there minus the overlap",
		PreRunE: func(*cobra.Command, []string) error {
			if f.source == "" || resource == "" || to == "" {
				return usagef("--source, --resource and --to are required")
			}
			if _, err := schema.Parse(resource); err != nil {
				return usagef("--resource: %v", err)
			}
			var err error
			if t, err = time.Parse(time.RFC3339, to); err != nil {
				return usagef("--to %q: want RFC 3339, e.g. 2026-01-31T00:00:00Z", to)
			}
			return nil
		},
	}, func(ctx context.Context, a *app) error {
		if err := confirm(g, yes, os.Stdin, fmt.Sprintf("set cursor %s/%s to %s", f.source, resource, t.UTC().Format(time.RFC3339))); err != nil {
			return err
		}
		held, release, err := lockPasses(ctx, a, f.source)
		if err != nil {
			return err
		}
		defer release()
		prev, err := cursor.New(a.Pool).Set(ctx, cursor.SetParams{Source: f.source, Resource: resource, To: t,
			Actor: actor(), Fence: fenceOf(held)})
		if err != nil {
			return err
		}
		fmt.Fprintf(g.stdout, "cursor %s/%s: %s -> %s\n", f.source, resource, fmtTime(prev.HighWater), fmtTime(t))
		return nil
	})
	c.Flags().StringVar(&resource, "resource", "", "resource")
	c.Flags().StringVar(&to, "to", "", "new high water, RFC 3339")
	c.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	return c
}

func newCursorResetCmd(g *globals) *cobra.Command {
	f := appFlags{sourceRequired: true}
	var resource string
	var yes bool
	c := appCommand(g, &f, &cobra.Command{Use: "reset", Short: "Forget a cursor: the next pass lists everything again"}, func(ctx context.Context, a *app) error {
		sc, _ := a.Config.Source(f.source)
		rs := sc.Resources
		if resource != "" {
			if _, err := schema.Parse(resource); err != nil {
				return usagef("--resource: %v", err)
			}
			rs = []string{resource}
		}
		if err := confirm(g, yes, os.Stdin, fmt.Sprintf("reset cursors of %s: %s", f.source, strings.Join(rs, ", "))); err != nil {
			return err
		}
		held, release, err := lockPasses(ctx, a, f.source)
		if err != nil {
			return err
		}
		defer release()
		for _, r := range rs {
			prev, err := cursor.New(a.Pool).Reset(ctx, cursor.ResetParams{Source: f.source, Resource: r,
				Actor: actor(), Fence: fenceOf(held)})
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "cursor %s/%s: %s -> never\n", f.source, r, fmtTime(prev.HighWater))
		}
		return nil
	})
	c.Flags().StringVar(&resource, "resource", "", "only this resource (default: all of the source's)")
	c.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	return c
}

func newRunsCmd(g *globals) *cobra.Command {
	var f appFlags
	var asJSON bool
	var limit int
	var resource string
	c := appCommand(g, &f, &cobra.Command{Use: "runs", Short: "Show recent passes and operator changes, newest first"},
		func(ctx context.Context, a *app) error {
			runs, err := cursor.New(a.Pool).Runs(ctx, cursor.RunsParams{Source: f.source, Resource: resource, Limit: limit})
			if err != nil {
				return err
			}
			if asJSON {
				out := make([]runJSON, 0, len(runs))
				for _, r := range runs {
					out = append(out, newRunJSON(r))
				}
				return writeJSON(g.stdout, out)
			}
			return printTable(g.stdout, "STARTED\tKIND\tSOURCE\tRESOURCE\tSTATUS\tTOOK\tPAGES\tFETCHED\tINS\tUPD\tUNCH\tSTALE\tTOMB\tACTOR/ERROR",
				runs, runCells)
		})
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	c.Flags().IntVar(&limit, "limit", 50, "how many runs")
	c.Flags().StringVar(&resource, "resource", "", "only this resource")
	return c
}

func runCells(r cursor.Run) []any {
	took := "-"
	if r.FinishedAt != nil {
		took = r.FinishedAt.Sub(r.StartedAt).Round(time.Millisecond).String()
	}
	note := r.Actor
	if r.Error != "" {
		note = strings.ReplaceAll(r.Error, "\n", "; ")
		if len(note) > 120 {
			note = note[:117] + "..."
		}
	}
	c := r.Counts
	if c.Quarantined > 0 {
		// Records that could not be stored (the rest of their pages went in).
		note = strings.TrimPrefix(fmt.Sprintf("%s; %d records quarantined", note, c.Quarantined), "; ")
	}
	return []any{r.StartedAt.UTC().Format(time.RFC3339), r.Kind, r.Source, r.Resource, r.Status, took, r.Pages,
		c.Fetched, c.Inserted, c.Updated, c.Unchanged, c.Stale, c.Tombstoned, note}
}
