package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/cursor"
	"github.com/tidemarkhq/tidemark/poller"
	"github.com/tidemarkhq/tidemark/schema"
)

func parseResources(rs []string) ([]clients.Resource, error) {
	var out []clients.Resource
	for _, r := range rs {
		t, err := schema.Parse(r)
		if err != nil {
			return nil, usagef("--resource: %v", err)
		}
		out = append(out, t.Name)
	}
	return out, nil
}

func newSyncCmd(g *globals) *cobra.Command {
	f := appFlags{sourceRequired: true}
	var resources []string
	var rs []clients.Resource
	c := appCommand(g, &f, &cobra.Command{
		Use:   "sync",
		Short: "Run one incremental pass of a source now",
		PreRunE: func(*cobra.Command, []string) (err error) {
			rs, err = parseResources(resources)
			return err
		},
	}, func(ctx context.Context, a *app) error {
		p, err := a.Poller(ctx, f.source)
		if err != nil {
			return err
		}
		// A daemon that owns the source polls it under the source's one
		// rate budget; a second client here would spend a second one.
		release, err := p.TakeOwnership(ctx, f.source)
		if errors.Is(err, poller.ErrBusy) {
			return fmt.Errorf("source %s is owned by a running daemon (or a backfill): it syncs on its schedule; see tidemark cursors", f.source)
		}
		if err != nil {
			return err
		}
		defer release()
		results, err := p.Incremental(ctx, f.source, rs...)
		for _, r := range results {
			fmt.Fprintf(g.stdout, "%s/%s: %d fetched, %d inserted, %d updated, %d unchanged, %d stale; high water %s\n",
				r.Source, r.Resource, r.Counts.Fetched, r.Counts.Inserted, r.Counts.Updated,
				r.Counts.Unchanged, r.Counts.Stale, fmtTime(r.HighWaterAfter))
		}
		return err
	})
	c.Flags().StringSliceVar(&resources, "resource", nil, "only these resources (repeatable)")
	return c
}

func newBackfillCmd(g *globals) *cobra.Command {
	f := appFlags{sourceRequired: true}
	var from, to string
	var resources []string
	var windowDays int
	var base poller.BackfillParams
	var gate *termGate
	c := appCommand(g, &f, &cobra.Command{
		Use:   "backfill",
		Short: "List a spent-date range window by window (resumable; never moves the cursor)",
		Long: `backfill lists a spent-date range window by window. --resource takes one or
more resources (repeat it or separate them with commas), or "all" for every
resource the source mirrors; without it, time_entries only. Several
resources run one after the other in pass order (parents first), under the
source's one rate budget.`,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			for flag, v := range map[string]string{"--from": from, "--to": to} {
				if v == "" {
					return usagef("%s is required: the first and last spent date, YYYY-MM-DD", flag)
				}
			}
			fd, err := clients.ParseDate(from)
			if err != nil {
				return usagef("--from: %v", err)
			}
			td, err := clients.ParseDate(to)
			if err != nil {
				return usagef("--to: %v", err)
			}
			if td.Before(fd) {
				return usagef("--to %s is before --from %s", td, fd)
			}
			for _, r := range resources {
				if r == "all" {
					continue
				}
				if _, err := schema.Parse(r); err != nil {
					return usagef("--resource: %v", err)
				}
			}
			base = poller.BackfillParams{Source: f.source, From: fd, To: td, WindowDays: windowDays}
			gate = gateStderr(g) // before the app's logger: log lines go above the bar, never into it
			// On a terminal the bar shows the progress: only warnings and
			// errors go above it, not a line per window.
			if gate != nil && !cmd.Flags().Changed("log-level") {
				g.logLevel = "warn"
			}
			return nil
		},
	}, func(ctx context.Context, a *app) error {
		if gate != nil {
			defer gate.Done()
		}
		sc, err := a.Config.Source(f.source)
		if err != nil {
			return err
		}
		rs, err := backfillResources(resources, sc.Resources)
		if err != nil {
			return err
		}
		p, err := a.Poller(ctx, f.source)
		if err != nil {
			return err
		}
		// One owner per source, one rate budget (DESIGN.md, Scale-out):
		// when a daemon owns the source, it runs the backfill and we
		// follow; otherwise we run it here and own the source meanwhile.
		release, err := p.TakeOwnership(ctx, f.source)
		owned := err == nil
		if err != nil && !errors.Is(err, poller.ErrBusy) {
			return err
		}
		if owned {
			defer release()
		}
		for _, r := range rs {
			bp := base
			bp.Resource = r
			bar := newBackfillBar(gate, bp.Source+"/"+string(r))
			if bar != nil {
				bp.Progress = bar.progress
			}
			if !owned {
				if err := followQueued(ctx, g, a, p, bp, bar); err != nil {
					return err
				}
				continue
			}
			res, err := p.Backfill(ctx, bp)
			bar.close()
			if err != nil {
				return err
			}
			printBackfill(g, bp, res)
		}
		return nil
	})
	c.Flags().StringVar(&from, "from", "", "first spent date, YYYY-MM-DD (required)")
	c.Flags().StringVar(&to, "to", "", "last spent date, YYYY-MM-DD, inclusive (required)")
	c.Flags().StringSliceVar(&resources, "resource", nil, `resources to backfill, repeatable or comma-separated; "all": every resource of the source (default time_entries)`)
	c.Flags().IntVar(&windowDays, "window-days", 0, "days per window (default: the source's backfill.window_days)")
	return c
}

// backfillResources resolves --resource against the source's resources:
// none is time_entries, "all" every one the source mirrors; the result is
// in pass order (parents before their children), each once.
func backfillResources(given, mirrored []string) ([]clients.Resource, error) {
	if len(given) == 0 {
		given = []string{string(clients.TimeEntries)}
	}
	want := map[clients.Resource]bool{}
	for _, r := range given {
		if r == "all" {
			for _, m := range mirrored {
				want[clients.Resource(m)] = true
			}
			continue
		}
		t, err := schema.Parse(r)
		if err != nil {
			return nil, usagef("--resource: %v", err)
		}
		if !slices.Contains(mirrored, string(t.Name)) {
			return nil, usagef("--resource: the source does not mirror %s (its resources: %s)", t.Name, strings.Join(mirrored, ", "))
		}
		want[t.Name] = true
	}
	var out []clients.Resource
	for _, r := range schema.Resources() {
		if want[r] {
			out = append(out, r)
		}
	}
	return out, nil
}

// printBackfill prints the counts of a backfill run here, on two lines
// when one does not fit the terminal.
func printBackfill(g *globals, bp poller.BackfillParams, res poller.Result) {
	c := res.Counts
	fmt.Fprintln(g.stdout, fitLines(termWidth(g.stdout), backfillHead(bp),
		fmt.Sprintf(strings.ReplaceAll("%d fetched, %d inserted, %d updated, %d unchanged, %d stale in %s", "d ", "d"+nbsp),
			c.Fetched, c.Inserted, c.Updated, c.Unchanged, c.Stale, res.Took.Round(time.Millisecond))))
}

// backfillHead opens a backfill's summary: "backfill acme/users 2026-01-01..2026-01-31:".
func backfillHead(bp poller.BackfillParams) string {
	return fmt.Sprintf("backfill %s/%s %s..%s:", bp.Source, bp.Resource, bp.From, bp.To)
}

// followQueued queues a backfill for the daemon that owns the source and
// follows its progress until it ends.
// bar (nil off a terminal) is closed before anything is printed on stdout.
func followQueued(ctx context.Context, g *globals, a *app, p *poller.Poller, bp poller.BackfillParams, bar *backfillBar) error {
	sc, err := a.Config.Source(bp.Source)
	if err != nil {
		return err
	}
	wd := cmp.Or(bp.WindowDays, sc.Backfill.WindowDays)
	store := cursor.New(a.Pool)
	b, err := store.QueueBackfill(ctx, cursor.BackfillParams{Source: bp.Source, Resource: string(bp.Resource),
		From: bp.From, To: bp.To, WindowDays: wd})
	if err != nil {
		return err
	}
	fmt.Fprintln(g.stderr, fitLines(termWidth(g.stderr), fmt.Sprintf("a daemon owns source %s: backfill %d is queued for it", bp.Source, b.ID),
		"(one rate budget per source); following its progress"))
	a.Log.Info().Str("source", bp.Source).Str("resource", string(bp.Resource)).Int64("backfill_id", b.ID).Msg("backfill queued for the daemon that owns the source")
	start, last, lastStatus := time.Now(), -1, ""
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopped following backfill %d; the daemon goes on with it (see tidemark runs)", b.ID)
		case <-t.C:
		}
		cur, err := store.Backfill(ctx, b.ID)
		if err != nil {
			return err
		}
		if bp.Progress != nil && cur.WindowsDone != last {
			bp.Progress(poller.BackfillProgress{Backfill: cur, WindowsDone: cur.WindowsDone, WindowsTotal: cur.WindowsTotal,
				Records: cur.Records, Elapsed: time.Since(start)})
		} else if cur.WindowsDone != last {
			a.Log.Info().Int64("backfill_id", b.ID).Str("status", cur.Status).Int("windows_done", cur.WindowsDone).
				Int("windows_total", cur.WindowsTotal).Int64("records", cur.Records).Msg("backfill progress")
		}
		last = cur.WindowsDone
		if cur.Status == cursor.BackfillRequeued && lastStatus != cursor.BackfillRequeued {
			fmt.Fprintln(g.stderr, fitLines(termWidth(g.stderr), fmt.Sprintf("backfill %d was interrupted in the daemon (%s);", b.ID, cur.Error),
				"it is queued again for the source's owner"))
		}
		lastStatus = cur.Status
		if cur.Status == cursor.BackfillQueued || cur.Status == cursor.BackfillRequeued {
			// The owner may be another CLI backfill, which never serves the
			// queue: once the source is free, run it here.
			if release, err := p.TakeOwnership(ctx, bp.Source); err == nil {
				defer release()
				fmt.Fprintf(g.stderr, "source %s is free now: running backfill %d here\n", bp.Source, b.ID)
				res, err := p.Backfill(ctx, bp)
				bar.close()
				if err != nil {
					return err
				}
				printBackfill(g, bp, res)
				return nil
			}
		}
		switch cur.Status {
		case cursor.BackfillDone:
			bar.close()
			fmt.Fprintln(g.stdout, fitLines(termWidth(g.stdout), backfillHead(bp),
				fmt.Sprintf("done by the daemon: %d%srecords in %d%swindows", cur.Records, nbsp, cur.WindowsDone, nbsp)))
			return nil
		case cursor.StatusFailed, cursor.StatusCancelled:
			// Final: a daemon that is interrupted requeues instead.
			return fmt.Errorf("backfill %d %s in the daemon: %s", b.ID, cur.Status, cur.Error)
		}
	}
}

func isTerminal(w any) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format(time.RFC3339)
}
