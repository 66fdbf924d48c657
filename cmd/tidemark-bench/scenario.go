package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/harvest"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/provider"
	"github.com/tidemarkhq/tidemark/poller"
	"github.com/tidemarkhq/tidemark/upsert"
)

// maxConns is cmd/tidemark's pool bound.
const maxConns = 8

// result is what a scenario child prints as its last stdout line.
type result struct {
	Records   int64   `json:"records"`
	Pages     int     `json:"pages"`
	WallSec   float64 `json:"wall_s"`
	Requests  int     `json:"requests"`
	Status429 int     `json:"status_429"`
	MaxWindow int     `json:"max_window"`
	PeakRSS   int64   `json:"peak_rss"` // bytes, VmHWM of the child
	// Extra holds scenario-specific figures.
	Extra map[string]float64 `json:"extra,omitempty"`
	// Note is a human remark (counts of outcomes).
	Note string `json:"note,omitempty"`
}

// scenarioArgs are the flags of the hidden `scenario` subcommand.
type scenarioArgs struct {
	kind              string
	dbURL             string
	sim               simInfo
	limited           bool
	sample            int
	overlap           time.Duration
	cpuprofile, memfp string
}

// runScenario is the hidden `scenario` subcommand: one measurement in its
// own process, so that its peak RSS (VmHWM) and CPU time are its own.
func runScenario(args []string) error {
	if slices.Contains(args, "daemon") { // -kind daemon: daemon.go
		return scenarioDaemon(args)
	}
	fs := flag.NewFlagSet("scenario", flag.ExitOnError)
	var a scenarioArgs
	var simJSON string
	fs.StringVar(&a.kind, "kind", "", "backfill | reference | redelivery | events (daemon: daemon.go)")
	fs.StringVar(&a.dbURL, "db", "", "database URL")
	fs.StringVar(&simJSON, "sim", "", "serve-sim info (JSON)")
	fs.BoolVar(&a.limited, "limited", false, "client under Harvest's limit (else unlimited)")
	fs.IntVar(&a.sample, "sample", 200_000, "reference: records to pre-fetch and apply")
	fs.DurationVar(&a.overlap, "overlap", 2*time.Hour, "redelivery: the source's overlap")
	fs.StringVar(&a.cpuprofile, "cpuprofile", "", "write a CPU profile here")
	fs.StringVar(&a.memfp, "memprofile", "", "write an allocation profile here")
	_ = fs.Parse(args)
	if err := json.Unmarshal([]byte(simJSON), &a.sim); err != nil {
		return fmt.Errorf("-sim: %w", err)
	}
	if a.cpuprofile != "" {
		f, err := os.Create(a.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	ctx := context.Background()
	pc, err := pgxpool.ParseConfig(a.dbURL)
	if err != nil {
		return err
	}
	pc.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return err
	}
	defer pool.Close()

	var res result
	switch a.kind {
	case "backfill":
		res, err = scenarioBackfill(ctx, pool, a)
	case "reference":
		res, err = scenarioReference(ctx, pool, a)
	case "first-sync":
		res, err = scenarioFirstSync(ctx, pool, a)
	case "redelivery":
		res, err = scenarioRedelivery(ctx, pool, a)
	case "events":
		res, err = scenarioEvents(ctx, pool, a)
	case "history":
		res, err = scenarioHistory(ctx, pool, a)
	default:
		err = fmt.Errorf("unknown scenario kind %q", a.kind)
	}
	if err != nil {
		return err
	}
	res.PeakRSS = peakRSS()
	if a.memfp != "" {
		f, err := os.Create(a.memfp)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			return err
		}
	}
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
	return nil
}

// harvestSource builds the real Harvest client on the simulated tracker.
// Unlimited (lifted) unless limited: then Harvest's 100 per 15 s.
func harvestSource(a scenarioArgs, name string, log zerolog.Logger) (*harvest.Client, error) {
	p := harvest.Params{
		Base: provider.Base{Name: name, BaseURL: a.sim.URL, Token: a.sim.Token,
			Env: provider.Env{Contact: "bench@tidemark.invalid", Version: "bench", Logger: log}},
		AccountID: a.sim.AccountID,
	}
	hc := harvest.HTTPConfig(p)
	if !a.limited {
		hc.RateLimit = httpx.RateLimit{}
	}
	p.HTTP = httpx.New(hc)
	return harvest.New(p)
}

func (a scenarioArgs) dates() (clients.Date, clients.Date, error) {
	from, err := clients.ParseDate(a.sim.From)
	if err != nil {
		return clients.Date{}, clients.Date{}, fmt.Errorf("sim from: %w", err)
	}
	to, err := clients.ParseDate(a.sim.To)
	return from, to, err
}

// scenarioBackfill runs poller.Backfill of time entries over the whole
// generated range.
func scenarioBackfill(ctx context.Context, pool *pgxpool.Pool, a scenarioArgs) (result, error) {
	p, err := benchPoller(pool, a)
	if err != nil {
		return result{}, err
	}
	defer p.Close()
	from, to, err := a.dates()
	if err != nil {
		return result{}, err
	}
	if err := resetLog(a.sim); err != nil {
		return result{}, err
	}
	start := time.Now()
	r, err := p.Backfill(ctx, poller.BackfillParams{Source: "bench", Resource: clients.TimeEntries, From: from, To: to})
	wall := time.Since(start)
	if err != nil {
		return result{}, err
	}
	res := result{Records: r.Counts.Fetched, Pages: r.Pages, WallSec: wall.Seconds(),
		Note: fmt.Sprintf("inserted=%d", r.Counts.Inserted)}
	return res, fillRequests(&res, a.sim, harvest.DefaultRateLimit.Per)
}

// benchPoller is a poller over the one source "bench" on the simulated
// tracker.
func benchPoller(pool *pgxpool.Pool, a scenarioArgs) (*poller.Poller, error) {
	src, err := harvestSource(a, "bench", zerolog.Nop())
	if err != nil {
		return nil, err
	}
	return poller.New(poller.Params{Pool: pool, Sources: []poller.Source{{Source: src}}})
}

// scenarioFirstSync runs one incremental pass of every resource the source
// serves into an empty mirror: the whole account, through one client and
// so one rate budget.
func scenarioFirstSync(ctx context.Context, pool *pgxpool.Pool, a scenarioArgs) (result, error) {
	p, err := benchPoller(pool, a)
	if err != nil {
		return result{}, err
	}
	defer p.Close()
	if err := resetLog(a.sim); err != nil {
		return result{}, err
	}
	start := time.Now()
	rs, err := p.Incremental(ctx, "bench")
	wall := time.Since(start)
	if err != nil {
		return result{}, err
	}
	res := result{WallSec: wall.Seconds()}
	var other int64
	for _, r := range rs {
		res.Records += r.Counts.Fetched
		res.Pages += r.Pages
		if r.Resource != clients.TimeEntries {
			other += r.Counts.Fetched
		}
	}
	res.Note = fmt.Sprintf("%d resources, %d records besides time entries", len(rs), other)
	return res, fillRequests(&res, a.sim, harvest.DefaultRateLimit.Per)
}

// prefetch lists time entries until a.sample records (untimed) and returns
// the pages and the number of records.
func prefetch(ctx context.Context, a scenarioArgs) ([][]clients.Record, int, error) {
	src, err := harvestSource(a, "bench", zerolog.Nop())
	if err != nil {
		return nil, 0, err
	}
	from, to, err := a.dates()
	if err != nil {
		return nil, 0, err
	}
	var pages [][]clients.Record
	n := 0
	err = src.List(ctx, clients.TimeEntries, clients.Window{From: from, To: to}, func(_ context.Context, pg clients.Page) error {
		pages = append(pages, pg.Records)
		n += len(pg.Records)
		if n >= a.sample {
			return errEnough
		}
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return nil, 0, err
	}
	return pages, n, nil
}

// errEnough stops a listing once the sample is complete.
var errEnough = errors.New("enough")

// scenarioReference pre-fetches pages (untimed), then applies them with
// upsert.Apply, one transaction per page as the poller does: the rate the
// database side alone reaches on the same rows.
func scenarioReference(ctx context.Context, pool *pgxpool.Pool, a scenarioArgs) (result, error) {
	pages, n, err := prefetch(ctx, a)
	if err != nil {
		return result{}, err
	}
	runtime.GC()
	start := time.Now()
	var c upsert.Counts
	for _, recs := range pages {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			pc, err := upsert.Apply(ctx, tx, "bench", clients.TimeEntries, recs)
			c.Add(pc)
			return err
		})
		if err != nil {
			return result{}, err
		}
	}
	wall := time.Since(start)
	return result{Records: int64(n), Pages: len(pages), WallSec: wall.Seconds(),
		Note: fmt.Sprintf("inserted=%d", c.Inserted)}, nil
}

// scenarioRedelivery applies entries new with a first incremental pass (the
// reference), then runs a second pass whose overlap re-delivers all of them
// unchanged. WAL bytes of each pass come from pg_current_wal_lsn.
func scenarioRedelivery(ctx context.Context, pool *pgxpool.Pool, a scenarioArgs) (result, error) {
	src, err := harvestSource(a, "bench", zerolog.Nop())
	if err != nil {
		return result{}, err
	}
	p, err := poller.New(poller.Params{Pool: pool, Sources: []poller.Source{{Source: src, Overlap: a.overlap}}})
	if err != nil {
		return result{}, err
	}
	defer p.Close()
	pass := func() (poller.Result, time.Duration, float64, error) {
		lsn, err := walLSN(ctx, pool)
		if err != nil {
			return poller.Result{}, 0, 0, err
		}
		start := time.Now()
		rs, err := p.Incremental(ctx, "bench", clients.TimeEntries)
		wall := time.Since(start)
		if err != nil {
			return poller.Result{}, 0, 0, err
		}
		wal, err := walSince(ctx, pool, lsn)
		return rs[0], wall, wal, err
	}
	r1, w1, wal1, err := pass()
	if err != nil {
		return result{}, err
	}
	if err := resetLog(a.sim); err != nil {
		return result{}, err
	}
	r2, w2, wal2, err := pass()
	if err != nil {
		return result{}, err
	}
	res := result{Records: r2.Counts.Fetched, Pages: r2.Pages, WallSec: w2.Seconds(),
		Extra: map[string]float64{
			"new_records": float64(r1.Counts.Fetched), "new_wall_s": w1.Seconds(),
			"new_wal": wal1, "redelivered_wal": wal2,
		},
		Note: fmt.Sprintf("first pass inserted=%d; second pass unchanged=%d updated=%d inserted=%d",
			r1.Counts.Inserted, r2.Counts.Unchanged, r2.Counts.Updated, r2.Counts.Inserted),
	}
	return res, fillRequests(&res, a.sim, harvest.DefaultRateLimit.Per)
}

func walLSN(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	var lsn string
	err := pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn)
	return lsn, err
}

func walSince(ctx context.Context, pool *pgxpool.Pool, from string) (float64, error) {
	var n float64
	err := pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)`, from).Scan(&n)
	return n, err
}

func resetLog(s simInfo) error {
	resp, err := http.Post(s.Control+"/reset", "", nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

func fetchLog(s simInfo) ([]loggedRequest, error) {
	resp, err := http.Get(s.Control + "/requests")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out []loggedRequest
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// fillRequests sets the request figures from the fake's log: how many, how
// many 429s, and the most requests in any window of length per.
func fillRequests(res *result, s simInfo, per time.Duration) error {
	reqs, err := fetchLog(s)
	if err != nil {
		return err
	}
	res.Requests = len(reqs)
	ats := make([]int64, 0, len(reqs))
	for _, r := range reqs {
		if r.Status == http.StatusTooManyRequests {
			res.Status429++
		}
		ats = append(ats, r.At)
	}
	res.MaxWindow = maxInWindow(ats, per)
	return nil
}

// maxInWindow returns the most timestamps (sorted ascending) that fall in
// one half-open window of length per.
func maxInWindow(ats []int64, per time.Duration) int {
	best, i := 0, 0
	for j := range ats {
		for ats[j]-ats[i] >= int64(per) {
			i++
		}
		best = max(best, j-i+1)
	}
	return best
}

// peakRSS reads VmHWM (the peak resident set) of this process.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return -1
}

// cpuTime is the user plus system CPU time of this process.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
