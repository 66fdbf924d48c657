package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidemarkhq/tidemark/configs"
	tmapp "github.com/tidemarkhq/tidemark/internal/app"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/pgcluster"
	"github.com/tidemarkhq/tidemark/internal/redact"
	"github.com/tidemarkhq/tidemark/internal/verify"
	"github.com/tidemarkhq/tidemark/migrations"
	"github.com/tidemarkhq/tidemark/poller"
	"github.com/tidemarkhq/tidemark/schema"
)

func newDemoCmd(g *globals) *cobra.Command {
	var interval time.Duration
	var db demoDB
	c := &cobra.Command{
		Use:   "demo",
		Short: "Run the whole system on this machine: a simulated tracker, a real Postgres, the daemon",
		Long: `demo starts the built-in simulated tracker (Harvest dialect, with a stream of
creates, edits and deletes), starts a throwaway PostgreSQL from the local
server binaries, migrates it, and runs the daemon with configs/simulated.yaml.
Every few seconds it prints the cursors, the row counts and a
mirror-versus-source check. Ctrl-C stops it and removes the throwaway
database.

It never joins a fleet by accident: DATABASE_URL is used only with
--use-database-url, and then a database that holds other sources or live
tidemark daemons is refused (exit 2) unless --allow-shared-database is
given. On a database it did not create, it removes the rows it wrote when it
stops (--keep leaves them, and says so).`,
	}
	untilSignal(c, func(ctx context.Context, sigs <-chan os.Signal) error {
		// The status printed every few seconds is what a newcomer should
		// read; the daemon's info lines would bury it (--log-level info
		// brings them back).
		if !c.Flags().Changed("log-level") {
			g.logLevel = "warn"
		}
		return runDemo(ctx, g, interval, sigs, db)
	})
	c.Flags().DurationVar(&interval, "every", 5*time.Second, "how often to print the status")
	c.Flags().BoolVar(&db.use, "use-database-url", false, "use the database in DATABASE_URL instead of a throwaway PostgreSQL")
	c.Flags().BoolVar(&db.shared, "allow-shared-database", false, "with --use-database-url: run even on a database that holds other sources or live tidemark daemons")
	c.Flags().BoolVar(&db.foreign, "allow-foreign-tables", false, "with --use-database-url: run even on a database holding tables Tidemark's schema does not declare (another application's; the demo never touches them)")
	c.Flags().BoolVar(&db.keep, "keep", false, "with --use-database-url: leave the demo's rows in that database when it stops")
	return c
}

// demoDB is how the demo may use a database it did not create.
type demoDB struct{ use, shared, foreign, keep bool }

func runDemo(ctx context.Context, g *globals, interval time.Duration, sigs <-chan os.Signal, db demoDB) error {
	log, dl, err := demoLogger(g) // demoframe.go
	if err != nil {
		return err
	}
	dbURL := os.Getenv("DATABASE_URL")
	switch {
	case db.use && dbURL == "":
		return usagef("--use-database-url: DATABASE_URL is not set")
	case !db.use && (db.shared || db.keep || db.foreign):
		return usagef("--allow-shared-database, --allow-foreign-tables and --keep go with --use-database-url")
	case db.use:
		// The first line says which database gets the demo's rows.
		fmt.Fprintf(g.stdout, "Using the database in DATABASE_URL (%s): not a throwaway; the demo writes its source's rows there.\n", dbLabel(dbURL))
		if err := demoMayShare(ctx, dbURL, db.foreign); err != nil {
			return err
		}
		if err := demoMayUse(ctx, dbURL, db.shared); err != nil {
			return err
		}
		if db.keep {
			defer fmt.Fprintf(g.stdout, "Left the demo's rows (source %s) in %s (--keep).\n", demoSources(), dbLabel(dbURL))
		} else {
			defer func() {
				n, err := removeDemoRows(context.WithoutCancel(ctx), dbURL)
				if err != nil {
					fmt.Fprintf(g.stdout, "Could not remove the demo's rows (source %s) from %s: %v\n", demoSources(), dbLabel(dbURL), err)
					return
				}
				fmt.Fprintf(g.stdout, "Removed the demo's %d rows (source %s) from %s.\n", n, demoSources(), dbLabel(dbURL))
			}()
		}
	default:
		if dbURL != "" {
			fmt.Fprintln(g.stdout, "DATABASE_URL is set, but the demo uses a throwaway PostgreSQL of its own (--use-database-url uses that database instead).")
		}
		var stop func()
		var err error
		dbURL, sigs, stop, err = startThrowaway(ctx, g, sigs)
		if err != nil {
			return err
		}
		defer stop()
		fmt.Fprintf(g.stdout, "PostgreSQL is at %s (removed when the demo ends)\n", redact.URL(dbURL))
	}
	if _, err := migrations.Up(ctx, dbURL); err != nil {
		return err
	}
	cfg, err := config.Parse("configs/simulated.yaml", configs.Simulated, func(k string) (string, bool) {
		if k == "DATABASE_URL" {
			return dbURL, true
		}
		return os.LookupEnv(k)
	})
	if err != nil {
		return err
	}
	ta, err := tmapp.Open(ctx, cfg, dbURL, version, log)
	if err != nil {
		return err
	}
	a := &app{App: ta, g: g}
	defer a.Close()
	listen := cfg.Listen
	if l, err := net.Listen("tcp", listen); err != nil {
		listen = "" // taken (another demo?): run without the ops endpoints
	} else {
		// Held until the daemon serves on it: probing and closing let a
		// second demo take it in between, and one of them exited 2.
		ta.OpsListener = l
		fmt.Fprintf(g.stdout, "Status page: http://%s/ (metrics at /metrics)\n", listen)
	}
	fmt.Fprintf(g.stdout, "Running the daemon with configs/simulated.yaml. Ctrl-C to stop.\n\n")

	if dl == nil {
		return a.RunDaemon(ctx, listen, sigs, exitFailed, func(p *poller.Poller) {
			go every(ctx, interval, func() { printDemoStatus(ctx, g, a) })
		})
	}
	// On a terminal: one screen, redrawn in place and on resize.
	s := &demoScreen{g: g, a: a, log: dl}
	if listen != "" {
		s.statusURL = "http://" + listen + "/"
	}
	defer s.close(g.stderr)
	return a.RunDaemon(ctx, listen, sigs, exitFailed, func(p *poller.Poller) {
		go every(ctx, interval, func() { s.draw(ctx) })
		go onResize(ctx, func() { s.draw(ctx) })
	})
}

// demoCheck is one resource's mirror-versus-source line of the demo.
type demoCheck struct {
	Key  string
	Line string
	// Short is Line's state in a few words (the demo's screen); Live the
	// live rows of the mirror.
	Short string
	Live  int
	// Diverged is a divergence the design does not explain: missing or
	// stale records older than what the next pass's overlap fetches again.
	Diverged bool
	// Agrees: compared, and in sync or caught up (nothing to look at).
	Agrees bool
}

// demoChecks compares each simulated source's mirror with its ground
// truth up to the cursor. Records changed after the high water are not
// expected yet, and missing or stale records within the overlap before it
// (late-visible writes, or writes in the high water's own second) are what
// the next pass's window fetches by design: both count as pending, not as
// divergence.
func demoChecks(ctx context.Context, a *app, rows []cursorJSON) []demoCheck {
	hw := map[string]time.Time{}
	for _, r := range rows {
		if r.HighWater != nil {
			hw[r.Source+"/"+r.Resource] = *r.HighWater
		}
	}
	var out []demoCheck
	for _, sc := range a.Config.Sources {
		tr, ok := a.Simulated[sc.Name]
		if !ok {
			continue
		}
		truth := tr.Truth()
		for _, r := range schema.Resources() {
			key := sc.Name + "/" + string(r)
			asOf, ok := hw[key]
			if !ok {
				out = append(out, demoCheck{Key: key, Line: "waiting for the first pass", Short: "waiting for the first pass"})
				continue
			}
			rep, err := verify.CompareOverlap(ctx, a.Pool, sc.Name, r, truth.Versions(r), asOf, sc.Overlap.D())
			if err != nil {
				out = append(out, demoCheck{Key: key, Line: err.Error(), Short: "check failed: " + err.Error(), Diverged: true})
				continue
			}
			c := demoCheck{Key: key, Diverged: rep.Missing+rep.Stale+rep.Ahead > 0, Live: rep.Live}
			c.Agrees = !c.Diverged
			c.Short, c.Line = checkWords(rep, c.Diverged)
			out = append(out, c)
		}
	}
	return out
}

// checkWords words a comparison: "in sync" only when nothing is left to
// fetch; "caught up" when the mirror holds all the last pass saw and the
// source has changed since (to fetch by the next pass) or deleted records
// (for the reconcile): "in sync, 734 pending" read as a contradiction.
func checkWords(rep verify.Report, diverged bool) (short, line string) {
	fetch, reconcile := rep.Pending+rep.InOverlap, rep.Undeleted
	head := "in sync"
	short = head
	switch {
	case diverged:
		head = "NOT in sync"
		short = fmt.Sprintf("NOT in sync: %d missing, %d stale", rep.Missing, rep.Stale+rep.Ahead)
	case fetch > 0 || reconcile > 0:
		head = "caught up to the last pass"
		var due []string
		if fetch > 0 {
			due = append(due, fmt.Sprintf("%d to fetch", fetch))
		}
		if reconcile > 0 {
			due = append(due, fmt.Sprintf("%d to reconcile", reconcile))
		}
		short = "caught up; " + strings.Join(due, ", ")
	}
	line = fmt.Sprintf("%s: %d live, %d missing, %d stale; to fetch by the next pass: %d changed since the cursor, %d late-visible within the overlap; %d deleted at the source, for the reconcile",
		head, rep.Live, rep.Missing, rep.Stale+rep.Ahead, rep.Pending, rep.InOverlap, rep.Undeleted)
	return short, line
}

// printDemoStatus appends the cursors and the checks, as a log would (off
// a terminal; on one, demoScreen draws).
func printDemoStatus(ctx context.Context, g *globals, a *app) {
	var b strings.Builder
	fmt.Fprintf(&b, "── %s ── tidemark demo (Ctrl-C to stop)\n", time.Now().Format(time.TimeOnly))
	rows, err := cursorRows(ctx, a, "", time.Now())
	if err != nil {
		fmt.Fprintf(g.stdout, "status: %v\n", err)
		return
	}
	writeCursorTable(&b, rows)
	for _, c := range demoChecks(ctx, a, rows) {
		fmt.Fprintf(&b, "%-24s %s\n", c.Key, c.Line)
	}
	if h := demoHistory(ctx, a); h != "" {
		fmt.Fprintln(&b, h)
	}
	fmt.Fprintln(g.stdout, b.String())
}

// noteSignal relays sigs and remembers the first signal relayed: the
// demo says what stopped it.
func noteSignal(sigs <-chan os.Signal) (<-chan os.Signal, func() os.Signal) {
	out := make(chan os.Signal, 1)
	var first atomic.Value
	go func() {
		for s := range sigs {
			first.CompareAndSwap(nil, s)
			out <- s
		}
		close(out)
	}()
	return out, func() os.Signal {
		s, _ := first.Load().(os.Signal)
		return s
	}
}

// signalName is how a person names a stop signal.
func signalName(s os.Signal) string {
	switch s {
	case os.Interrupt:
		return "Ctrl-C"
	case syscall.SIGHUP:
		return "SIGHUP (terminal closed)"
	}
	return s.String()
}

// startThrowaway starts the demo's own PostgreSQL. stop removes it and
// says so, naming the signal that stopped the demo when one did (sigs
// relays them).
func startThrowaway(ctx context.Context, g *globals, sigs <-chan os.Signal) (dbURL string, relayed <-chan os.Signal, stop func(), err error) {
	fmt.Fprintln(g.stdout, "Starting a throwaway PostgreSQL...")
	// Owner "demo": this start first removes the clusters of demos that
	// were killed before they could (SIGKILL), so none piles up.
	cl, err := pgcluster.Start(ctx, pgcluster.Options{Owner: "demo"})
	if err != nil {
		return "", nil, nil, fmt.Errorf("start PostgreSQL: %w", err)
	}
	for _, dir := range cl.Reaped {
		fmt.Fprintf(g.stdout, "Removed the PostgreSQL of an earlier demo that was killed: %s\n", dir)
	}
	relayed, stopper := noteSignal(sigs)
	stop = func() {
		if err := cl.Stop(); err != nil {
			fmt.Fprintf(g.stdout, "Could not stop the throwaway PostgreSQL (%s): %v\n", cl.Dir, err)
			return
		}
		// Said last, so that a newcomer knows nothing is left running.
		by := "Stopped"
		if s := stopper(); s != nil {
			by = "Stopped by " + signalName(s)
		}
		fmt.Fprintf(g.stdout, "%s: removed the demo's throwaway PostgreSQL and its data (%s).\n", by, cl.Dir)
	}
	return cl.URL("postgres"), relayed, stop, nil
}

// demoHistory says, in one line, how many versions the demo's history kept
// and the latest late edit the audit view found (README, "History"); ""
// when the demo keeps none yet.
func demoHistory(ctx context.Context, a *app) string {
	var versions int64
	var edit *string
	err := a.Pool.QueryRow(ctx, demoHistorySQL, strings.Split(demoSources(), ", ")).Scan(&versions, &edit)
	if err != nil || versions == 0 {
		return ""
	}
	line := fmt.Sprintf("history: %d versions kept", versions)
	if edit != nil {
		line += " · late edit: " + *edit
	}
	return line
}

// demoHistorySQL counts the versions of the demo's histories and words the
// latest late edit, when the tables exist.
const demoHistorySQL = `SELECT
  CASE WHEN to_regclass('time_entries_history') IS NULL THEN 0
    ELSE (SELECT count(*) FROM time_entries_history WHERE source = ANY($1)) END
  + CASE WHEN to_regclass('invoices_history') IS NULL THEN 0
    ELSE (SELECT count(*) FROM invoices_history WHERE source = ANY($1)) END,
  CASE WHEN to_regclass('time_entry_late_edits') IS NOT NULL THEN (
    SELECT format('entry %s %s h after %s (%s)', id, to_char(hours_change, 'SG990.00'),
      array_to_string(reasons, ', '), to_char(edited_at AT TIME ZONE 'UTC', 'HH24:MI:SS'))
    FROM time_entry_late_edits WHERE source = ANY($1) ORDER BY edited_at DESC LIMIT 1) END`
