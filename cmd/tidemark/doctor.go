package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	tmapp "github.com/tidemarkhq/tidemark/internal/app"
	"github.com/tidemarkhq/tidemark/internal/budget"
	"github.com/tidemarkhq/tidemark/internal/config"
)

func newDoctorCmd(g *globals) *cobra.Command {
	var cfgPath, source string
	var asJSON bool
	var assume budget.Assume
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Check each source's request budget: one pass's requests and the busiest hour's against the plan's hourly quota",
		Long: "Prints, per source, what one incremental pass costs (at least one page per listing), how many passes the schedule\n" +
			"runs in its busiest hour, the hourly total against the plan's quota (or the rate limit's, when less), and a verdict:\n" +
			"fits, tight or does not fit. Exits 2 when a source cannot fit even one pass an hour (`run` refuses those).",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfgPath == "" {
				return usagef("--config FILE is required")
			}
			cfg, err := config.Load(cfgPath)
			if err != nil {
				return err
			}
			if source != "" {
				s, err := cfg.Source(source)
				if err != nil {
					return usageError{err}
				}
				cfg.Sources = []config.Source{*s}
			}
			reps, err := tmapp.Budgets(cfg, assume)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(g.stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(reps); err != nil {
					return err
				}
			} else {
				for i, r := range reps {
					if i > 0 {
						fmt.Fprintln(g.stdout)
					}
					printBudget(g, r)
				}
			}
			for _, r := range reps {
				if r.Refuse {
					return usagef("source %s: even one pass an hour (%d requests) does not fit %d requests/h (%s)", r.Source, r.MinPassRequests, r.Quota, r.QuotaFrom)
				}
			}
			return nil
		},
	}
	c.Flags().StringVar(&cfgPath, "config", "", "configuration file (YAML)")
	c.Flags().StringVar(&source, "source", "", "only this source")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	c.Flags().IntVar(&assume.Projects, "projects", 1, "projects to assume for listings made per project (Clockify tasks)")
	c.Flags().IntVar(&assume.Users, "users", 1, "users to assume for listings made per user")
	return c
}

func printBudget(g *globals, r budget.Report) {
	plan := r.Plan
	if plan == "" {
		plan = "-"
	}
	fmt.Fprintf(g.stdout, "source %s (%s, plan %s): %s\n", r.Source, r.Kind, plan, strings.ToUpper(string(r.Verdict)))
	w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "  schedule\t%s\tup to %d passes/h, every %s at the shortest; a pass reads %s\n", r.Schedule, r.PassesPerHour, r.Interval, r.Span)
	fmt.Fprintf(w, "  one pass\t%d requests\tat least\n", r.PassRequests)
	for _, l := range r.Resources {
		n := fmt.Sprint(l.Requests)
		if l.Daily > 0 {
			n += fmt.Sprintf(" +%d/day", l.Daily)
		}
		fmt.Fprintf(w, "    %s\t%s\t%s\n", l.Resource, n, l.Note)
	}
	if r.Quota > 0 {
		fmt.Fprintf(w, "  busiest hour\t%d requests\tagainst %d/h (%s)\n", r.HourlyRequests, r.Quota, r.QuotaFrom)
	} else {
		fmt.Fprintf(w, "  busiest hour\t%d requests\tno hourly quota\n", r.HourlyRequests)
	}
	if r.ReconcileRequests > 0 {
		fmt.Fprintf(w, "  reconcile\t%d requests\t%q, once per run\n", r.ReconcileRequests, r.ReconcileSchedule)
		for _, l := range r.Reconcile {
			fmt.Fprintf(w, "    %s\t%d\t%s\n", l.Resource, l.Requests, l.Note)
		}
		fmt.Fprintf(w, "  reconcile hour\t%d requests\tthe busiest hour with a reconcile run in it (judged)\n", r.PeakHourlyRequests)
	}
	for _, c := range r.Caps {
		fmt.Fprintf(w, "  %s calls\t%d requests\tagainst %d/h\n", c.Name, c.Hourly, c.Quota)
	}
	if r.FallbackVerdict != "" {
		fmt.Fprintf(w, "  feed unusable\t%d requests\ta pass by the fallback listings; %d in the busiest hour: %s\n", r.FallbackPassRequests, r.FallbackHourlyRequests, r.FallbackVerdict)
	}
	fmt.Fprintf(w, "  one pass an hour\t%d requests\t%s\n", r.MinPassRequests, map[bool]string{true: "does not fit: `run` refuses this source", false: "fits"}[r.Refuse])
	if r.Suggest != "" {
		fmt.Fprintf(w, "  suggest\tschedule: %q\tthe most frequent schedule that fits\n", r.Suggest)
	}
	w.Flush()
	fmt.Fprintf(g.stdout, "  assumed: %s\n", strings.Join(r.Assumptions, "; "))
}
