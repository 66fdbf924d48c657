package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/rs/zerolog"

	"github.com/spf13/cobra"

	tmapp "github.com/tidemarkhq/tidemark/internal/app"
	"github.com/tidemarkhq/tidemark/internal/budget"
	"github.com/tidemarkhq/tidemark/internal/config"
)

func newDoctorCmd(g *globals) *cobra.Command {
	var cfgPath, source string
	var asJSON, budgetOnly bool
	var assume budget.Assume
	var db dbFlags
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Check the config, the database, each source's token and clock, and each source's request budget",
		Long: "Checks the configuration; the database (reachable, migrated, the role's rights on every table); each source's token\n" +
			"with one cheap request, and its clock skew from the response's Date; and each source's request budget: what one\n" +
			"incremental pass costs (at least one page per listing), how many passes the schedule runs in its busiest hour, the\n" +
			"hourly total against the plan's quota (or the rate limit's, when less), and a verdict: fits, tight or does not fit.\n" +
			"Prints what is wrong and how to fix it. Exits 0 only when all is well, 1 when a check fails, 2 when a source cannot\n" +
			"fit even one pass an hour (`run` refuses those). --budget-only plans the budgets alone, offline.",
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
			if !budgetOnly {
				return doctorAll(cmd.Context(), g, cfg, &db, source, reps, asJSON)
			}
			if asJSON {
				if err := writeJSON(g.stdout, reps); err != nil {
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
	c.Flags().BoolVar(&budgetOnly, "budget-only", false, "only plan the request budgets (no database, no requests)")
	db.register(c, false)
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
		fmt.Fprintf(w, "  reconcile\t%d requests\t%q, per run; up to %d runs/h\n", r.ReconcileRequests, r.ReconcileSchedule, r.ReconcilesPerHour)
		for _, l := range r.Reconcile {
			fmt.Fprintf(w, "    %s\t%d\t%s\n", l.Resource, l.Requests, l.Note)
		}
		fmt.Fprintf(w, "  reconcile hour\t%d requests\tthe busiest hour with its reconcile runs (judged)\n", r.PeakHourlyRequests)
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

// doctorAll runs every check: the database, each source's token and clock,
// the budgets. It prints each finding (and the fix of each that is not ok)
// and fails unless all is well.
func doctorAll(ctx context.Context, g *globals, cfg *config.Config, db *dbFlags, only string, reps []budget.Report, asJSON bool) error {
	checks := []tmapp.Check{{Subject: "config", Name: "valid", Status: tmapp.CheckOK,
		Detail: fmt.Sprintf("%s: %d sources", cfg.Path, len(cfg.Sources))}}
	var budgets []tmapp.Check
	for _, r := range reps {
		ck := tmapp.Check{Subject: r.Source, Name: "budget", Status: tmapp.CheckOK, Detail: r.Summary()}
		switch {
		case r.Refuse || r.Verdict == budget.DoesNotFit:
			ck.Status, ck.Fix = tmapp.CheckFail, "a slower schedule, fewer resources or a larger plan; `tidemark doctor --budget-only` shows the numbers"
			if r.Suggest != "" {
				ck.Fix = fmt.Sprintf("schedule: %q fits (or fewer resources, a larger plan); `tidemark doctor --budget-only` shows the numbers", r.Suggest)
			}
		case r.Verdict == budget.Tight:
			ck.Status, ck.Fix = tmapp.CheckWarn, "above 80 % of the quota: a retry or a busy hour may wait for the next window"
		}
		budgets = append(budgets, ck)
	}
	u, err := db.resolve(cfg)
	if err != nil {
		checks = append(checks, tmapp.Check{Subject: "database", Name: "configured", Status: tmapp.CheckFail,
			Detail: "no database URL", Fix: "pass --database-url, set DATABASE_URL, or set database_url in the config"})
		u = "postgres://127.0.0.1:1/none" // the sources are still checked
	}
	log, err := g.logger()
	if err != nil {
		return err
	}
	a, err := tmapp.Open(ctx, cfg, u, version, log.Level(zerolog.ErrorLevel))
	if err != nil {
		return err
	}
	defer a.Close()
	if checks[len(checks)-1].Subject != "database" {
		checks = append(checks, a.CheckDatabase(ctx)...)
	}
	srcChecks, err := a.CheckSources(ctx, only)
	if err != nil {
		return err
	}
	checks = append(append(checks, srcChecks...), budgets...)
	slices.SortStableFunc(checks, func(x, y tmapp.Check) int {
		return cmp.Compare(subjectRank(cfg, x.Subject), subjectRank(cfg, y.Subject))
	})

	failed := 0
	for _, c := range checks {
		if c.Status == tmapp.CheckFail {
			failed++
		}
	}
	if asJSON {
		if err := writeJSON(g.stdout, checks); err != nil {
			return err
		}
	} else {
		w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
		for _, c := range checks {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", strings.ToUpper(c.Status), c.Subject, c.Name, c.Detail)
			if c.Fix != "" && c.Status != tmapp.CheckOK {
				fmt.Fprintf(w, "\t\t\tfix: %s\n", c.Fix)
			}
		}
		w.Flush()
	}
	for _, r := range reps {
		if r.Refuse {
			return usagef("source %s: even one pass an hour (%d requests) does not fit %d requests/h (%s)", r.Source, r.MinPassRequests, r.Quota, r.QuotaFrom)
		}
	}
	if failed > 0 {
		return fmt.Errorf("doctor: %d checks failed", failed)
	}
	if !asJSON {
		fmt.Fprintln(g.stdout, "all is well")
	}
	return nil
}

// subjectRank orders findings: config, database, then sources in config order.
func subjectRank(cfg *config.Config, subject string) int {
	switch subject {
	case "config":
		return -2
	case "database":
		return -1
	}
	for i, s := range cfg.Sources {
		if s.Name == subject {
			return i
		}
	}
	return len(cfg.Sources)
}
