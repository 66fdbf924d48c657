package main

import (
	"fmt"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/poller"
)

func parseResources(rs []string) ([]clients.Resource, error) {
	var out []clients.Resource
	for _, r := range rs {
		rr, err := clients.ParseResource(r)
		if err != nil {
			return nil, usagef("--resource: %v", err)
		}
		out = append(out, rr)
	}
	return out, nil
}

func newSyncCmd(g *globals) *cobra.Command {
	var f appFlags
	var resources []string
	c := &cobra.Command{
		Use:   "sync",
		Short: "Run one incremental pass of a source now",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.source == "" {
				return usagef("--source is required")
			}
			rs, err := parseResources(resources)
			if err != nil {
				return err
			}
			a, err := newApp(cmd.Context(), g, &f)
			if err != nil {
				return err
			}
			defer a.Close()
			p, err := a.poller(cmd.Context(), f.source)
			if err != nil {
				return err
			}
			results, err := p.Incremental(cmd.Context(), f.source, rs...)
			for _, r := range results {
				fmt.Fprintf(g.stdout, "%s/%s: %d fetched, %d inserted, %d updated, %d unchanged, %d stale; high water %s\n",
					r.Source, r.Resource, r.Counts.Fetched, r.Counts.Inserted, r.Counts.Updated,
					r.Counts.Unchanged, r.Counts.Stale, fmtTime(r.HighWaterAfter))
			}
			return err
		},
	}
	f.register(c, true)
	c.Flags().StringSliceVar(&resources, "resource", nil, "only these resources (repeatable)")
	return c
}

func newBackfillCmd(g *globals) *cobra.Command {
	var f appFlags
	var from, to, resource string
	var windowDays int
	c := &cobra.Command{
		Use:   "backfill",
		Short: "List a spent-date range window by window (resumable; never moves the cursor)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.source == "" {
				return usagef("--source is required")
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
			r, err := clients.ParseResource(resource)
			if err != nil {
				return usagef("--resource: %v", err)
			}
			a, err := newApp(cmd.Context(), g, &f)
			if err != nil {
				return err
			}
			defer a.Close()
			p, err := a.poller(cmd.Context(), f.source)
			if err != nil {
				return err
			}
			bp := poller.BackfillParams{Source: f.source, Resource: r, From: fd, To: td, WindowDays: windowDays}
			var bar *progressbar.ProgressBar
			if isTerminal(g.stderr) {
				bp.Progress = func(pr poller.BackfillProgress) {
					if bar == nil {
						bar = progressbar.NewOptions(pr.WindowsTotal,
							progressbar.OptionSetWriter(g.stderr),
							progressbar.OptionSetDescription(fmt.Sprintf("%s/%s windows", f.source, r)),
							progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true),
							progressbar.OptionThrottle(200*time.Millisecond))
					}
					rate := float64(pr.Records) / max(pr.Elapsed.Seconds(), 0.001)
					bar.Describe(fmt.Sprintf("%s/%s: %d records, %.0f records/s", f.source, r, pr.Records, rate))
					_ = bar.Set(pr.WindowsDone)
				}
			}
			res, err := p.Backfill(cmd.Context(), bp)
			if bar != nil {
				_ = bar.Finish()
				fmt.Fprintln(g.stderr)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "backfill %s/%s %s..%s: %d fetched, %d inserted, %d updated, %d unchanged, %d stale in %s\n",
				f.source, r, fd, td, res.Counts.Fetched, res.Counts.Inserted, res.Counts.Updated,
				res.Counts.Unchanged, res.Counts.Stale, res.Took.Round(time.Millisecond))
			return nil
		},
	}
	f.register(c, true)
	c.Flags().StringVar(&from, "from", "", "first spent date, YYYY-MM-DD (required)")
	c.Flags().StringVar(&to, "to", "", "last spent date, YYYY-MM-DD, inclusive (required)")
	c.Flags().StringVar(&resource, "resource", string(clients.TimeEntries), "resource to backfill")
	c.Flags().IntVar(&windowDays, "window-days", 0, "days per window (default: the source's backfill.window_days)")
	return c
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
