package app

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/poller"
)

// BenchmarkSourceFootprint reports what a daemon keeps per configured
// Harvest source before any pass: its config, its source (a slot in a
// replica that does not own it, or a built client) and its schedule and
// state. BENCHMARKS.md, "Each replica holds its share".
func BenchmarkSourceFootprint(b *testing.B) {
	const n = 3000
	y := sourcesYAML(n)
	heap := func() int64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	for _, share := range []bool{true, false} {
		name := map[bool]string{true: "not-owned", false: "client-built"}[share]
		b.Run(name, func(b *testing.B) {
			var cfgB, srcB, daemonB int64
			for range b.N {
				h0 := heap()
				cfg, err := config.Parse("bench.yaml", []byte(y), func(string) (string, bool) { return "", false })
				if err != nil {
					b.Fatal(err)
				}
				h1 := heap()
				a, err := Open(context.Background(), cfg, "postgres://bench@127.0.0.1:1/none", "bench", zerolog.Nop())
				if err != nil {
					b.Fatal(err)
				}
				a.share = share
				p, err := a.Poller(context.Background(), "")
				if err != nil {
					b.Fatal(err)
				}
				h2 := heap()
				d := benchDaemon(b, p, cfg)
				h3 := heap()
				cfgB, srcB, daemonB = cfgB+h1-h0, srcB+h2-h1, daemonB+h3-h2
				runtime.KeepAlive(d)
				a.Close()
			}
			per := float64(b.N * n)
			b.ReportMetric(float64(cfgB)/per, "config-B/source")
			b.ReportMetric(float64(srcB)/per, "source-B/source")
			b.ReportMetric(float64(daemonB)/per, "daemon-B/source")
			b.ReportMetric(float64(cfgB+srcB+daemonB)/per, "total-B/source")
		})
	}
}

// BenchmarkDaemonStart: what `tidemark run` does with 10,000 sources before
// its first pass (parse the config, check every source's budget, build the
// poller and the daemon), per phase. Checking the budgets walked a week of
// each source's schedule: 70 s before its answers were kept by spec.
func BenchmarkDaemonStart(b *testing.B) {
	y := sourcesYAML(10000)
	var parse, budgets, build time.Duration
	for range b.N {
		t0 := time.Now()
		cfg, err := config.Parse("bench.yaml", []byte(y), func(string) (string, bool) { return "", false })
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		a, err := Open(context.Background(), cfg, "postgres://bench@127.0.0.1:1/none", "bench", zerolog.Nop())
		if err != nil {
			b.Fatal(err)
		}
		if err := a.CheckBudgets(); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		a.share = true
		p, err := a.Poller(context.Background(), "")
		if err != nil {
			b.Fatal(err)
		}
		d := benchDaemon(b, p, cfg)
		d.JoinFleet(a.fleetParams())
		a.shareSources(d)
		t3 := time.Now()
		parse, budgets, build = parse+t1.Sub(t0), budgets+t2.Sub(t1), build+t3.Sub(t2)
		a.Close()
	}
	b.ReportMetric(parse.Seconds()/float64(b.N), "parse-s/op")
	b.ReportMetric(budgets.Seconds()/float64(b.N), "budgets-s/op")
	b.ReportMetric(build.Seconds()/float64(b.N), "build-s/op")
}

// sourcesYAML is a configuration of n Harvest sources on one schedule.
func sourcesYAML(n int) string {
	var y strings.Builder
	y.WriteString("contact: bench@tidemark.invalid\nsources:\n")
	for i := range n {
		fmt.Fprintf(&y, "  - {name: src%05d, kind: harvest, base_url: \"http://127.0.0.1:1/v2\", account_id: \"1\", token: \"x\", schedule: \"* * * * *\", resources: [clients, users, projects, tasks, time_entries]}\n", i)
	}
	return y.String()
}

// benchDaemon is the daemon of cfg's incremental schedules over p.
func benchDaemon(b *testing.B, p *poller.Poller, cfg *config.Config) *poller.Daemon {
	var scheds []poller.Schedule
	for _, s := range cfg.Sources {
		scheds = append(scheds, poller.Schedule{Source: s.Name, Incremental: s.Schedule})
	}
	d, err := poller.NewDaemon(p, config.CronParser, scheds)
	if err != nil {
		b.Fatal(err)
	}
	return d
}
