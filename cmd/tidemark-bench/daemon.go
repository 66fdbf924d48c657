package main

// The idle and fleet scenarios (issue 15): the production daemon
// (internal/app's RunDaemon, what `tidemark run` runs: fleet membership,
// metrics, wait recorder and all) in one child process per replica, on
// sources that have nothing new. Measured over whole minutes of its
// schedule: the CPU of the daemon process and of the Postgres backends it
// uses (its connections, by application_name), its peak RSS (VmHWM) and its
// connections.

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients/harvest"
	tmapp "github.com/tidemarkhq/tidemark/internal/app"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/lease"
	"github.com/tidemarkhq/tidemark/poller"
)

// idleResources are the resources each idle source mirrors: the five a
// Harvest source had when issue 15 set its targets ("all": the 21 since
// issue 12, about four times the work per source).
var idleResources = []string{"clients", "users", "projects", "tasks", "time_entries"}

func resourcesOf(spec string) []string {
	if spec == "all" {
		var out []string
		for _, r := range harvest.Resources {
			out = append(out, string(r))
		}
		return out
	}
	return idleResources
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat times
// (100 on every Linux Go supports).
const clockTicks = 100

// daemonReplica is what one replica child reports.
type daemonReplica struct {
	WindowSec    float64 `json:"window_s"`
	DaemonCPU    float64 `json:"daemon_cpu_s"`
	BackendCPU   float64 `json:"backend_cpu_s"` // -1: not on this machine
	PeakRSS      int64   `json:"peak_rss"`      // whole life, first sync included
	WindowRSS    int64   `json:"window_rss"`    // peak within the window
	MaxConns     int     `json:"max_conns"`     // its own connections, at any sample
	Owned        int     `json:"owned"`         // sources whose owner lease it holds at the end
	HeapInuse    uint64  `json:"heap_inuse"`
	AllocBytes   uint64  `json:"alloc_bytes"` // allocated within the window
	GCCycles     uint32  `json:"gc_cycles"`   // collections within the window
	Goroutines   int     `json:"goroutines"`
	SourcesTotal int     `json:"sources"`
	OneP         float64 `json:"one_p"` // share of the window on one P (internal/procs)
}

// runDaemons runs one daemon scenario: replicas children on one fresh
// database and one simulated tracker, each scheduling the same sources.
func (b *bench) runDaemons(ctx context.Context, name string, replicas, sources int, profile []string) (line, error) {
	o := b.o
	// History ending an hour ago: nothing within the sources' 10-minute
	// overlap, so every pass is idle (no page to apply).
	sim, stopSim, err := b.startSim("-entries", "10", "-users", "2", "-days", "7", "-age", "1h")
	if err != nil {
		return line{}, err
	}
	defer stopSim()
	var si simInfo
	if err := json.Unmarshal([]byte(sim), &si); err != nil {
		return line{}, err
	}
	db, drop, err := b.freshDB(ctx)
	if err != nil {
		return line{}, err
	}
	defer drop()
	window := o.daemonFor
	minuteTicks := o.daemonSchedule == "* * * * *"
	if minuteTicks {
		// Whole minutes starting at second 30: the window holds exactly
		// that many ticks, each with its work inside it.
		window = max(window.Truncate(time.Minute), time.Minute)
	}
	type child struct {
		cmd *exec.Cmd
		in  io.WriteCloser
		out *bufio.Reader
	}
	var kids []child
	defer func() {
		for _, k := range kids {
			_ = k.cmd.Process.Kill()
			_ = k.cmd.Wait()
		}
	}()
	for r := range replicas {
		args := []string{"scenario", "-kind", "daemon", "-db", db, "-sim", sim, "-sources", fmt.Sprint(sources),
			"-daemon-schedule", o.daemonSchedule, "-daemon-for", window.String(), "-app", fmt.Sprintf("tidemark-bench-r%d", r),
			"-resources", o.idleResources}
		if replicas == 1 {
			args = append(args, profile...)
		}
		cmd := exec.Command(b.self, args...)
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			return line{}, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return line{}, err
		}
		if err := cmd.Start(); err != nil {
			return line{}, err
		}
		kids = append(kids, child{cmd: cmd, in: in, out: bufio.NewReader(out)})
	}
	// All replicas start at once, as a deployment rolls them out: each
	// says "running" once its daemon has started.
	for r, k := range kids {
		if s, err := k.out.ReadString('\n'); err != nil || strings.TrimSpace(s) != "running" {
			return line{}, fmt.Errorf("replica %d did not start: %q %v", r, s, err)
		}
	}
	// The daemons' first passes (run at start) take every source from
	// nothing to its high water; the window starts once they are done.
	t0 := time.Now()
	nres := len(resourcesOf(o.idleResources))
	if err := waitSynced(ctx, db, sources*nres, 15*time.Minute); err != nil {
		return line{}, err
	}
	sync := time.Since(t0)
	start := time.Now().Add(3 * time.Second)
	if minuteTicks {
		start = start.Truncate(time.Minute).Add(30 * time.Second)
		if time.Until(start) < 3*time.Second {
			start = start.Add(time.Minute)
		}
	}
	for _, k := range kids {
		if _, err := fmt.Fprintln(k.in, start.UnixNano()); err != nil {
			return line{}, err
		}
	}
	time.Sleep(time.Until(start))
	if err := resetLog(si); err != nil {
		return line{}, err
	}
	// The backends and connections are sampled here, not in the measured
	// process: the sampling (a query and a /proc read per backend every
	// half second) is the benchmark's cost, not the daemon's.
	bks, err := sampleBackends(ctx, db, replicas, window)
	if err != nil {
		return line{}, err
	}
	reqs, err := fetchLog(si)
	if err != nil {
		return line{}, err
	}
	var reps []daemonReplica
	for i, k := range kids {
		outb, err := io.ReadAll(k.out)
		if err != nil {
			return line{}, err
		}
		if err := k.cmd.Wait(); err != nil {
			return line{}, fmt.Errorf("replica %d: %w", i, err)
		}
		var dr daemonReplica
		lines := strings.Split(strings.TrimSpace(string(outb)), "\n")
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &dr); err != nil {
			return line{}, fmt.Errorf("replica %d output %q: %w", i, lines[len(lines)-1], err)
		}
		dr.BackendCPU, dr.MaxConns = bks[i].cpu.seconds(), bks[i].maxConns
		reps = append(reps, dr)
	}
	kids = nil

	ticks := window.Seconds() / 60
	if !minuteTicks {
		ticks = 0
	}
	x := map[string]float64{"sources": float64(sources), "replicas": float64(replicas), "resources": float64(nres), "window_s": window.Seconds(),
		"ticks": ticks, "requests": float64(len(reqs)), "first_sync_s": sync.Seconds()}
	var owned, each []string
	for i, r := range reps {
		x["daemon_cpu_pct"] += 100 * r.DaemonCPU / r.WindowSec
		x["backend_cpu_pct"] += 100 * r.BackendCPU / r.WindowSec
		x["peak_rss_mb"] = max(x["peak_rss_mb"], float64(r.PeakRSS)/(1<<20))
		x["window_rss_mb"] = max(x["window_rss_mb"], float64(r.WindowRSS)/(1<<20))
		x["max_conns"] = max(x["max_conns"], float64(r.MaxConns))
		x["heap_inuse_mb"] = max(x["heap_inuse_mb"], float64(r.HeapInuse)/(1<<20))
		x["alloc_mb_per_min"] += float64(r.AllocBytes) / (1 << 20) / (r.WindowSec / 60)
		x["gc_per_min"] += float64(r.GCCycles) / (r.WindowSec / 60)
		x["goroutines"] = max(x["goroutines"], float64(r.Goroutines))
		x["one_p_pct"] += 100 * r.OneP / float64(len(reps))
		owned = append(owned, fmt.Sprint(r.Owned))
		each = append(each, fmt.Sprintf("%d: peak %.1f, window %.1f, heap %.1f MiB", r.Owned,
			float64(r.PeakRSS)/(1<<20), float64(r.WindowRSS)/(1<<20), float64(r.HeapInuse)/(1<<20)))
		if r.BackendCPU < 0 {
			return line{}, fmt.Errorf("replica %d: the Postgres backends' CPU is readable only when PostgreSQL runs on this machine (unset DATABASE_URL)", i)
		}
	}
	x["total_cpu_pct"] = x["daemon_cpu_pct"] + x["backend_cpu_pct"]
	l := line{name: name, res: result{Requests: len(reqs), WallSec: window.Seconds(), PeakRSS: int64(x["peak_rss_mb"] * (1 << 20)), Extra: x}}
	if ticks > 0 {
		l.ratio = float64(len(reqs)) / (float64(sources) * float64(nres) * ticks)
		l.ratioText = "requests ÷ (sources × resources × ticks)"
	}
	x["ratio"] = l.ratio
	l.extra = fmt.Sprintf("owned per replica: %s", strings.Join(owned, "/"))
	if replicas > 1 {
		// Each replica's memory against its share (the max above is the
		// first one up, which owned every source until the others joined).
		l.extra += "; per replica (owned: RSS): " + strings.Join(each, "; ")
	}
	return l, nil
}

// daemonLine renders a daemon scenario's figures (the median of each over
// the repetitions).
func daemonLine(name string, ls []line) string {
	med := func(k string) float64 {
		v := make([]float64, len(ls))
		for i, l := range ls {
			v[i] = l.res.Extra[k]
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	per1000 := 1000 / med("sources")
	return fmt.Sprintf("%-17s sources=%.0f×%.0f resources replicas=%.0f window=%.0fs (%.0f ticks) cpu: daemon=%.2f%% backends=%.2f%% total=%.2f%% of one core (%.2f%% per 1,000 sources) peak_rss=%.1fMB window_rss=%.1fMB heap_inuse=%.1fMB allocated=%.0fMB/min gc=%.0f/min goroutines=%.0f one_p=%.0f%% max_conns=%.0f requests÷(sources×resources×ticks)=%.2f first_sync=%.0fs | %s",
		name, med("sources"), med("resources"), med("replicas"), med("window_s"), med("ticks"), med("daemon_cpu_pct"), med("backend_cpu_pct"),
		med("total_cpu_pct"), med("total_cpu_pct")*per1000, med("peak_rss_mb"), med("window_rss_mb"), med("heap_inuse_mb"),
		med("alloc_mb_per_min"), med("gc_per_min"), med("goroutines"), med("one_p_pct"), med("max_conns"), med("ratio"), med("first_sync_s"), ls[len(ls)/2].extra)
}

// waitSynced waits until the database holds want cursors.
func waitSynced(ctx context.Context, db string, want int, limit time.Duration) error {
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(limit)
	for {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM cursors`).Scan(&n); err != nil {
			return err
		}
		if n >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("first sync: %d of %d cursors after %s", n, want, limit)
		}
		time.Sleep(time.Second)
	}
}

// scenarioDaemon is the child of one replica: it runs the daemon as
// `tidemark run` does, says "running", reads the window's start (unix ns)
// from stdin, measures the window, stops the daemon and prints a
// daemonReplica.
func scenarioDaemon(args []string) error {
	fs := flag.NewFlagSet("daemon", flag.ExitOnError)
	var dbURL, simJSON, schedule, appName, cpuprofile, memprofile, kind string
	var sources int
	var window time.Duration
	fs.StringVar(&kind, "kind", "daemon", "")
	var resSpec string
	fs.StringVar(&resSpec, "resources", "", `"all" or the five of issue 15`)
	fs.StringVar(&dbURL, "db", "", "database URL")
	fs.StringVar(&simJSON, "sim", "", "serve-sim info (JSON)")
	fs.IntVar(&sources, "sources", 1000, "sources")
	fs.StringVar(&schedule, "daemon-schedule", "* * * * *", "schedule")
	fs.DurationVar(&window, "daemon-for", 2*time.Minute, "window")
	fs.StringVar(&appName, "app", "tidemark-bench", "application_name of the daemon's connections")
	fs.StringVar(&cpuprofile, "cpuprofile", "", "CPU profile of the window")
	fs.StringVar(&memprofile, "memprofile", "", "heap profile (in use) at the end of the window, to …-heap.pprof")
	_ = fs.Parse(args)
	var si simInfo
	if err := json.Unmarshal([]byte(simJSON), &si); err != nil {
		return fmt.Errorf("-sim: %w", err)
	}
	ctx := context.Background()

	var y strings.Builder
	y.WriteString("contact: bench@tidemark.invalid\nsources:\n")
	for i := range sources {
		fmt.Fprintf(&y, "  - {name: src%05d, kind: harvest, base_url: %q, account_id: %q, token: \"${TOKEN}\", schedule: %q, resources: [%s]}\n",
			i, si.URL, si.AccountID, schedule, strings.Join(resourcesOf(resSpec), ", "))
	}
	cfg, err := config.Parse("bench.yaml", []byte(y.String()), func(k string) (string, bool) {
		return si.Token, k == "TOKEN"
	})
	if err != nil {
		return err
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		return err
	}
	q := u.Query()
	q.Set("application_name", appName)
	u.RawQuery = q.Encode()
	log := zerolog.New(io.Discard).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	a, err := tmapp.Open(ctx, cfg, u.String(), "bench", log)
	if err != nil {
		return err
	}
	defer a.Close()
	sigs := make(chan os.Signal, 1)
	done := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		done <- a.RunDaemon(ctx, "", sigs, 1, func(*poller.Poller) { close(started) })
	}()
	select {
	case <-started:
	case err := <-done:
		return fmt.Errorf("daemon: %w", err)
	}
	fmt.Println("running")
	s, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil {
		return fmt.Errorf("window start: %w", err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return fmt.Errorf("window start %q: %w", s, err)
	}
	time.Sleep(time.Until(time.Unix(0, ns)))

	var r daemonReplica
	r.SourcesTotal = sources
	peakBefore := peakRSS()
	// Reset VmHWM to the current RSS: the window's own peak.
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	if memprofile != "" {
		// The allocations of the window: pprof -base this one.
		if err := writeHeap(strings.TrimSuffix(memprofile, ".pprof") + "-heap-start.pprof"); err != nil {
			return err
		}
	}
	var ms0 runtimeMem
	ms0.read()
	t0, cpu0 := time.Now(), cpuTime()
	var samples, oneP int
	tk := time.NewTicker(time.Second)
	end := time.After(window)
wait:
	for {
		select {
		case <-tk.C:
			samples++
			if runtime.GOMAXPROCS(0) == 1 {
				oneP++
			}
		case <-end:
			break wait
		case err := <-done:
			return fmt.Errorf("daemon stopped: %v", err)
		}
	}
	tk.Stop()
	r.DaemonCPU, r.WindowSec = (cpuTime() - cpu0).Seconds(), time.Since(t0).Seconds()
	r.OneP = float64(oneP) / float64(max(samples, 1))
	if cpuprofile != "" {
		pprof.StopCPUProfile()
	}
	r.WindowRSS = peakRSS()
	r.PeakRSS = max(peakBefore, r.WindowRSS)
	var ms runtimeMem
	ms.read()
	r.HeapInuse, r.Goroutines = ms.heapInuse, ms.goroutines
	r.AllocBytes, r.GCCycles = ms.allocated-ms0.allocated, ms.gcs-ms0.gcs
	if memprofile != "" {
		if err := writeHeap(strings.TrimSuffix(memprofile, ".pprof") + "-heap.pprof"); err != nil {
			return err
		}
	}
	// Which sources this replica owns now (member id as internal/app
	// names it: host/pid).
	mon, err := pgx.Connect(ctx, dbURL) // not the daemon's application_name
	if err != nil {
		return err
	}
	defer mon.Close(ctx)
	host, _ := os.Hostname()
	me := fmt.Sprintf("%s/%d", host, os.Getpid())
	names := make([]string, sources)
	for i := range names {
		names[i] = poller.OwnerLease(fmt.Sprintf("src%05d", i))
	}
	holders, err := lease.Holders(ctx, mon, names)
	if err != nil {
		return err
	}
	for _, h := range holders {
		if h == me {
			r.Owned++
		}
	}
	sigs <- syscall.SIGTERM
	if err := <-done; err != nil {
		return err
	}
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
	return nil
}

// replicaBackends is what the parent samples of one replica's
// connections over the window.
type replicaBackends struct {
	cpu      backendCPU
	maxConns int
}

// sampleBackends samples, every half second over the window, the Postgres
// backends of each replica's connections (by application_name
// tidemark-bench-r<i>): their CPU time and how many there are.
func sampleBackends(ctx context.Context, db string, replicas int, window time.Duration) ([]replicaBackends, error) {
	mon, err := pgx.Connect(ctx, db)
	if err != nil {
		return nil, err
	}
	defer mon.Close(ctx)
	out := make([]replicaBackends, replicas)
	for i := range out {
		out[i].cpu = backendCPU{first: map[int]float64{}, last: map[int]float64{}}
	}
	sample := func(initial bool) error {
		for i := range out {
			rows, err := mon.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, fmt.Sprintf("tidemark-bench-r%d", i))
			if err != nil {
				return err
			}
			pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
			if err != nil {
				return err
			}
			out[i].maxConns = max(out[i].maxConns, len(pids))
			out[i].cpu.observe(pids, initial)
		}
		return nil
	}
	if err := sample(true); err != nil {
		return nil, err
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(window); time.Now().Before(end); {
		<-tick.C
		if err := sample(false); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// backendCPU sums the CPU time of Postgres backends from /proc/<pid>/stat:
// for each pid, its last reading less its reading at the window's start (0
// for a backend started within it).
type backendCPU struct {
	first, last map[int]float64
	missing     bool // a backend's /proc entry could not be read (remote server)
}

func (b *backendCPU) observe(pids []int32, initial bool) {
	for _, p := range pids {
		t, ok := procCPU(int(p))
		if !ok {
			b.missing = true
			continue
		}
		if _, seen := b.first[int(p)]; !seen {
			b.first[int(p)] = 0
			if initial {
				b.first[int(p)] = t
			}
		}
		b.last[int(p)] = t
	}
}

func (b *backendCPU) seconds() float64 {
	if b.missing && len(b.last) == 0 {
		return -1
	}
	var s float64
	for p, t := range b.last {
		s += t - b.first[p]
	}
	return s
}

// procCPU reads utime+stime of a process, in seconds.
func procCPU(pid int) (float64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseFloat(f[11], 64) // field 14 of stat(5)
	st, err2 := strconv.ParseFloat(f[12], 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return (ut + st) / clockTicks, true
}

// runtimeMem is what the Go runtime says of the process at the end.
// writeHeap writes the heap profile (in use and allocated so far) to path.
func writeHeap(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("heap").WriteTo(f, 0)
}

type runtimeMem struct {
	heapInuse  uint64
	goroutines int
	allocated  uint64 // total bytes allocated so far
	gcs        uint32
}

func (m *runtimeMem) read() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.heapInuse, m.goroutines = ms.HeapInuse, runtime.NumGoroutine()
	m.allocated, m.gcs = ms.TotalAlloc, ms.NumGC
}
