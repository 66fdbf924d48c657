// Command tidemark-bench measures tidemark end to end: the real Harvest
// client, poller and upsert against the simulated tracker and a real
// PostgreSQL, one line per scenario (issue 5).
//
//	go run ./cmd/tidemark-bench            # every scenario at full size
//	go run ./cmd/tidemark-bench -quick     # scaled down, about a minute
//	go run ./cmd/tidemark-bench -scenarios backfill-lifted -count 3 -cpuprofile /tmp/prof
//
// The simulated tracker runs in a child process (the same binary, hidden
// subcommand serve-sim), and so does each measurement (hidden subcommand
// scenario): the peak RSS printed (VmHWM) is that of a process doing only
// the connector's work of one scenario. PostgreSQL is DATABASE_URL when set
// (the role needs CREATEDB), else a throwaway cluster on disk; every
// measurement gets a fresh, migrated database.
package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemarkhq/tidemark/internal/pgcluster"
	"github.com/tidemarkhq/tidemark/migrations"
)

func main() {
	var err error
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "serve-sim":
			err = serveSim(os.Args[2:])
		case "scenario":
			err = runScenario(os.Args[2:])
		default:
			err = orchestrate(os.Args[1:])
		}
	} else {
		err = orchestrate(nil)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tidemark-bench:", err)
		os.Exit(1)
	}
}

var allScenarios = []string{"backfill-lifted", "backfill-ceiling", "first-sync", "idle", "fleet", "redelivery", "events", "history", "history-asof", "freshness"}

type options struct {
	quick                        bool
	scenarios                    []string
	count                        int
	liftedEntries, refSample     int
	ceilingEntries               int
	firstSyncEntries             int
	idleSources                  int
	fleetSources, fleetReplicas  int
	idleResources                string
	daemonFor                    time.Duration
	daemonSchedule               string
	redeliveryEntries            int
	eventsEntries                int
	freshFor                     time.Duration // freshness.go
	cpuprofile, memprofile, keep string
}

func orchestrate(args []string) error {
	fs := flag.NewFlagSet("tidemark-bench", flag.ExitOnError)
	var o options
	var scen string
	fs.BoolVar(&o.quick, "quick", false, "scale every scenario down (about a minute in all)")
	fs.StringVar(&scen, "scenarios", strings.Join(allScenarios, ","), "comma-separated scenarios to run")
	fs.IntVar(&o.count, "count", 1, "repetitions of each scenario; the line shows the median")
	fs.IntVar(&o.liftedEntries, "lifted-entries", 0, "backfill-lifted entries (default 1,000,000; -quick 100,000)")
	fs.IntVar(&o.refSample, "ref-sample", 0, "upsert-only reference rows (default 200,000; -quick 50,000)")
	fs.IntVar(&o.ceilingEntries, "ceiling-entries", 0, "backfill-ceiling entries (default 200,000; -quick 20,000)")
	fs.IntVar(&o.firstSyncEntries, "first-sync-entries", 0, "first-sync time entries, with the rest of the account (default 1,000,000; -quick 50,000)")
	fs.IntVar(&o.idleSources, "idle-sources", 0, "idle sources (default 1,000; -quick 100)")
	fs.IntVar(&o.fleetSources, "fleet-sources", 0, "fleet: idle sources over the replicas (default 10,000; -quick 600)")
	fs.IntVar(&o.fleetReplicas, "fleet-replicas", 3, "fleet: daemons on one database")
	fs.StringVar(&o.idleResources, "idle-resources", "five", `idle, fleet: the resources of each source: "five" (clients, users, projects, tasks, time entries: issue 15's targets) or "all"`)
	fs.DurationVar(&o.daemonFor, "daemon-for", 0, "idle, fleet: the measured window, whole minutes of the schedule \"* * * * *\" (default 2m; -quick 25s)")
	fs.StringVar(&o.daemonSchedule, "daemon-schedule", "", `the idle daemon's schedule (default "* * * * *"; -quick "@every 10s")`)
	fs.IntVar(&o.redeliveryEntries, "redelivery-entries", 0, "redelivery entries (default 100,000; -quick 20,000)")
	fs.IntVar(&o.eventsEntries, "events-entries", 0, "events: entries applied with events off and on (default 100,000; -quick 20,000)")
	fs.DurationVar(&o.freshFor, "fresh-for", 0, "how long each freshness mode makes changes (default 2m; -quick 40s)")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write CPU profiles to PREFIX-<scenario>[-<rep>].pprof")
	fs.StringVar(&o.memprofile, "memprofile", "", "write allocation profiles to PREFIX-<scenario>[-<rep>].pprof")
	_ = fs.Parse(args)
	pick := func(v, full, quick int) int {
		if v > 0 {
			return v
		}
		if o.quick {
			return quick
		}
		return full
	}
	o.liftedEntries = pick(o.liftedEntries, 1_000_000, 100_000)
	o.refSample = pick(o.refSample, 200_000, 50_000)
	o.ceilingEntries = pick(o.ceilingEntries, 200_000, 20_000)
	o.firstSyncEntries = pick(o.firstSyncEntries, 1_000_000, 50_000)
	o.idleSources = pick(o.idleSources, 1000, 100)
	o.fleetSources = pick(o.fleetSources, 10_000, 600)
	o.redeliveryEntries = pick(o.redeliveryEntries, 100_000, 20_000)
	o.eventsEntries = pick(o.eventsEntries, 100_000, 20_000)
	if o.daemonFor == 0 {
		o.daemonFor = 2 * time.Minute
		if o.quick {
			o.daemonFor = 25 * time.Second
		}
	}
	if o.daemonSchedule == "" {
		o.daemonSchedule = "* * * * *"
		if o.quick {
			o.daemonSchedule = "@every 10s"
		}
	}
	if o.freshFor == 0 {
		o.freshFor = 2 * time.Minute
		if o.quick {
			o.freshFor = 40 * time.Second
		}
	}
	o.count = max(o.count, 1)
	for s := range strings.SplitSeq(scen, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !slices.Contains(allScenarios, s) {
			return fmt.Errorf("unknown scenario %q (have %s)", s, strings.Join(allScenarios, ", "))
		}
		o.scenarios = append(o.scenarios, s)
	}

	ctx := context.Background()
	admin := os.Getenv("DATABASE_URL")
	if admin == "" {
		fmt.Fprintln(os.Stderr, "starting a throwaway PostgreSQL on disk (set DATABASE_URL to use yours)")
		cl, err := pgcluster.Start(ctx, pgcluster.Options{})
		if err != nil {
			return fmt.Errorf("start PostgreSQL: %w", err)
		}
		defer cl.Stop()
		admin = cl.URL("postgres")
	}
	b := &bench{o: o, admin: admin}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	b.self = self

	fmt.Printf("tidemark-bench %s  (GOMAXPROCS=%d; medians of %d)\n", time.Now().UTC().Format(time.RFC3339), procs(), o.count)
	for _, s := range o.scenarios {
		var lines []line
		for rep := range o.count {
			l, err := b.run(ctx, s, rep)
			if err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
			if o.count > 1 {
				fmt.Fprintf(os.Stderr, "  rep %d: %s\n", rep+1, l.String())
			}
			lines = append(lines, l)
		}
		if s == "idle" || s == "fleet" {
			fmt.Println(daemonLine(s, lines))
			continue
		}
		fmt.Println(median(lines).String())
	}
	return nil
}

type bench struct {
	o     options
	admin string
	self  string
	dbSeq int
}

// line is one scenario's printed result.
type line struct {
	name      string
	res       result
	ratio     float64
	ratioText string // how the ratio reads, e.g. "× upsert-only 31,200/s"
	extra     string
}

func (l line) rate() float64 {
	if l.res.WallSec == 0 {
		return 0
	}
	return float64(l.res.Records) / l.res.WallSec
}

func (l line) String() string {
	r := l.res
	s := fmt.Sprintf("%-17s records=%-8d wall=%7.2fs rate=%7.0f/s requests=%-5d 429s=%d max/15s=%-4d peak_rss=%5.1fMB ratio=%.2f %s",
		l.name, r.Records, r.WallSec, l.rate(), r.Requests, r.Status429, r.MaxWindow, float64(r.PeakRSS)/(1<<20), l.ratio, l.ratioText)
	if l.extra != "" {
		s += " | " + l.extra
	}
	return s
}

// median picks the repetition with the median ratio.
func median(ls []line) line {
	s := slices.Clone(ls)
	slices.SortFunc(s, func(a, b line) int { return cmp.Compare(a.ratio, b.ratio) })
	return s[len(s)/2]
}

func (b *bench) run(ctx context.Context, name string, rep int) (line, error) {
	o := b.o
	prof := func(kind string) []string {
		var a []string
		suffix := name
		if kind != "" {
			suffix += "-" + kind
		}
		if o.count > 1 {
			suffix += fmt.Sprintf("-%d", rep+1)
		}
		if o.cpuprofile != "" {
			a = append(a, "-cpuprofile", o.cpuprofile+"-"+suffix+".pprof")
		}
		if o.memprofile != "" {
			a = append(a, "-memprofile", o.memprofile+"-"+suffix+".pprof")
		}
		return a
	}
	switch name {
	case "backfill-lifted":
		sim, stop, err := b.startSim("-entries", fmt.Sprint(o.liftedEntries))
		if err != nil {
			return line{}, err
		}
		defer stop()
		ref, err := b.scenario(ctx, sim, append([]string{"-kind", "reference", "-sample", fmt.Sprint(o.refSample)}, prof("reference")...)...)
		if err != nil {
			return line{}, fmt.Errorf("reference: %w", err)
		}
		res, err := b.scenario(ctx, sim, append([]string{"-kind", "backfill"}, prof("")...)...)
		if err != nil {
			return line{}, err
		}
		l := line{name: name, res: res}
		refRate := float64(ref.Records) / ref.WallSec
		l.ratio = l.rate() / refRate
		l.ratioText = fmt.Sprintf("× upsert-only %.0f/s (%d rows, peak_rss %.1fMB)", refRate, ref.Records, float64(ref.PeakRSS)/(1<<20))
		l.extra = res.Note
		return l, nil
	case "backfill-ceiling":
		return b.underLimit(ctx, name, "backfill", o.ceilingEntries, "ceiling", prof(""))
	case "first-sync":
		// Every resource of a large account from an empty mirror, under
		// Harvest's limit: one budget for all of them.
		return b.underLimit(ctx, name, "first-sync", o.firstSyncEntries, "sliding-window floor", prof(""))
	case "idle":
		return b.runDaemons(ctx, name, 1, o.idleSources, prof("")) // daemon.go
	case "fleet":
		return b.runDaemons(ctx, name, o.fleetReplicas, o.fleetSources, nil)
	case "redelivery":
		sim, stop, err := b.startSim("-entries", fmt.Sprint(o.redeliveryEntries), "-days", "30", "-recent", "90m")
		if err != nil {
			return line{}, err
		}
		defer stop()
		res, err := b.scenario(ctx, sim, append([]string{"-kind", "redelivery", "-overlap", "2h"}, prof("")...)...)
		if err != nil {
			return line{}, err
		}
		newRate := res.Extra["new_records"] / res.Extra["new_wall_s"]
		l := line{name: name, res: res}
		l.ratio = l.rate() / newRate
		l.ratioText = fmt.Sprintf("× applied-new %.0f/s (%.0f rows)", newRate, res.Extra["new_records"])
		l.extra = fmt.Sprintf("WAL new=%s (%.0f B/row) redelivered=%s (%.1f B/row); %s",
			bytesText(res.Extra["new_wal"]), res.Extra["new_wal"]/res.Extra["new_records"],
			bytesText(res.Extra["redelivered_wal"]), res.Extra["redelivered_wal"]/float64(max(res.Records, 1)), res.Note)
		return l, nil
	case "events":
		return b.runEvents(ctx, prof(""))
	case "history":
		return b.runHistory(ctx, prof("")) // history.go
	case "history-asof":
		return b.runHistoryAsOf(ctx) // history_asof.go
	case "freshness":
		return b.freshness(ctx)
	}
	return line{}, fmt.Errorf("unknown scenario %q", name)
}

// underLimit runs scenario kind on a tracker of entries time entries that
// enforces Harvest's limit, with the client under it: the ratio is wall ÷
// the least time the window allows the requests made (requests × 15 s /
// 100), called what.
func (b *bench) underLimit(ctx context.Context, name, kind string, entries int, what string, prof []string) (line, error) {
	sim, stop, err := b.startSim("-entries", fmt.Sprint(entries), "-limited")
	if err != nil {
		return line{}, err
	}
	defer stop()
	res, err := b.scenario(ctx, sim, append([]string{"-kind", kind, "-limited"}, prof...)...)
	if err != nil {
		return line{}, err
	}
	floor := float64(res.Requests) * 15 / 100
	return line{name: name, res: res, ratio: res.WallSec / floor,
		ratioText: fmt.Sprintf("wall ÷ %s %.2fs (%d requests × 15 s / 100)", what, floor, res.Requests), extra: res.Note}, nil
}

func bytesText(n float64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMB", n/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fkB", n/(1<<10))
	}
	return fmt.Sprintf("%.0fB", n)
}

// startSim starts a serve-sim child and reads where it listens.
func (b *bench) startSim(args ...string) (string, func(), error) {
	cmd := exec.Command(b.self, append([]string{"serve-sim"}, args...)...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() {
		in.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	first, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("serve-sim: %w", err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return strings.TrimSpace(first), stop, nil
}

// scenario runs one measurement in a child process on a fresh database and
// returns what it printed last.
func (b *bench) scenario(ctx context.Context, sim string, args ...string) (result, error) {
	db, drop, err := b.freshDB(ctx)
	if err != nil {
		return result{}, err
	}
	defer drop()
	cmd := exec.Command(b.self, append([]string{"scenario", "-db", db, "-sim", sim}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return result{}, err
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var res result
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		return result{}, fmt.Errorf("scenario output %q: %w", lines[len(lines)-1], err)
	}
	return res, nil
}

// freshDB creates and migrates a database for one measurement.
func (b *bench) freshDB(ctx context.Context) (string, func(), error) {
	b.dbSeq++
	name := fmt.Sprintf("tidemark_bench_%d_%d", os.Getpid(), b.dbSeq)
	conn, err := pgx.Connect(ctx, b.admin)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", nil, fmt.Errorf("create database: %w", err)
	}
	u, err := url.Parse(b.admin)
	if err != nil {
		return "", nil, fmt.Errorf("DATABASE_URL must be a URL (postgres://…): %w", err)
	}
	u.Path = "/" + name
	dbURL := u.String()
	drop := func() {
		c, err := pgx.Connect(context.Background(), b.admin)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	}
	if _, err := migrations.Up(ctx, dbURL); err != nil {
		drop()
		return "", nil, fmt.Errorf("migrate: %w", err)
	}
	return dbURL, drop, nil
}

func procs() int { return runtime.GOMAXPROCS(0) }
