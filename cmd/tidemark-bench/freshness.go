package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/toggl/toggltest"
	"github.com/tidemarkhq/tidemark/internal/app"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
	"github.com/tidemarkhq/tidemark/webhooks"
)

// freshnessMode is one way of keeping the mirror fresh.
type freshnessMode struct {
	name     string
	schedule string
	webhooks bool
	extra    string // top-level config
}

// freshnessModes: the schedule alone (every minute, twice what Toggl's
// /me budget of 30 an hour sustains, so the most a schedule can do), and
// webhooks on a 15-minute schedule, triggering passes within the spare
// /me budget, with and without webhooks.apply.
var freshnessModes = []freshnessMode{
	{name: "schedule", schedule: "* * * * *"},
	{name: "webhooks", schedule: "*/15 * * * *", webhooks: true},
	{name: "webhooks+apply", schedule: "*/15 * * * *", webhooks: true, extra: "webhooks: {apply: true}"},
}

// freshnessResult is one mode's measurement.
type freshnessResult struct {
	mode                   string
	changes, seen          int
	median, p99, max       time.Duration
	requests, me, limited  int
	maxPerSecond           int
	deliveries, duplicates int
}

func (r freshnessResult) String() string {
	return fmt.Sprintf("%s: %d changes, %d in the mirror, median %.2fs p99 %.2fs max %.2fs; requests %d (/me %d), most in any 1s %d, 429/402 %d; deliveries %d (resends %d)",
		r.mode, r.changes, r.seen, r.median.Seconds(), r.p99.Seconds(), r.max.Seconds(), r.requests, r.me, r.maxPerSecond, r.limited, r.deliveries, r.duplicates)
}

// freshness measures the time from a change at the Toggl fake to its row
// in the mirror, for each mode, with the daemon in this process. The fake
// enforces Toggl's budget (a leaky bucket of 1 request per second, answering
// 429; an hourly quota of 600, answering 402) and sends webhooks late
// (0.3 s + up to 1.5 s), out of order and 5 % of them twice.
func (b *bench) freshness(ctx context.Context) (line, error) {
	var rs []freshnessResult
	for _, m := range freshnessModes {
		r, err := b.freshnessRun(ctx, m)
		if err != nil {
			return line{}, fmt.Errorf("%s: %w", m.name, err)
		}
		fmt.Fprintln(os.Stderr, "  "+r.String())
		rs = append(rs, r)
	}
	base, best := rs[0], rs[len(rs)-1]
	var parts []string
	for _, r := range rs {
		parts = append(parts, r.String())
	}
	l := line{name: "freshness", res: result{Records: int64(best.seen), WallSec: b.o.freshFor.Seconds(), Requests: best.requests, Status429: best.limited, MaxWindow: best.maxPerSecond},
		ratio:     base.median.Seconds() / max(best.median.Seconds(), 1e-3),
		ratioText: fmt.Sprintf("median schedule ÷ median %s", best.mode), extra: strings.Join(parts, "; ")}
	return l, nil
}

func (b *bench) freshnessRun(ctx context.Context, m freshnessMode) (freshnessResult, error) {
	res := freshnessResult{mode: m.name}
	dbURL, drop, err := b.freshDB(ctx)
	if err != nil {
		return res, err
	}
	defer drop()
	tg := toggltest.New(toggltest.Options{Bucket: httpx.RateLimit{Requests: 1, Per: time.Second}, Quota: 600})
	defer tg.Close()
	tg.Hooks().SetOptions(fakeapi.HookOptions{Delay: 300 * time.Millisecond, Jitter: 1500 * time.Millisecond,
		DuplicateRate: 0.05, Retry: 2 * time.Second, Seed: 14})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	listen := l.Addr().String()
	l.Close()
	key := "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // a throwaway key for the bench's throwaway database
	os.Setenv(webhooks.KeyEnv, key)
	seal, err := webhooks.NewSealer(key)
	if err != nil {
		return res, err
	}
	yaml := fmt.Sprintf(`database_url: %s
listen: %s
%s
sources:
%s`, dbURL, listen, m.extra, tg.SourceConfig("tg", "plan: premium", fmt.Sprintf("schedule: %q", m.schedule),
		"rate_limit: {requests: 1, per: 1s}", "resources: [time_entries]"))
	cfg, err := config.Parse("freshness.yaml", []byte(yaml), os.LookupEnv)
	if err != nil {
		return res, err
	}
	a, err := app.Open(ctx, cfg, dbURL, "bench", zerolog.Nop())
	if err != nil {
		return res, err
	}
	sigs := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() { done <- a.RunDaemon(ctx, listen, sigs, 3, nil) }()
	defer func() {
		sigs <- os.Interrupt
		<-done
		a.Close()
	}()
	if err := waitHTTP("http://"+listen+"/healthz", 10*time.Second); err != nil {
		return res, err
	}
	if m.webhooks {
		_, err := webhooks.Register(ctx, webhooks.RegisterParams{Source: "tg", Kind: "toggl", BaseURL: tg.URL(),
			WorkspaceID: fmt.Sprint(tg.WorkspaceID()), Token: tg.Token(), URL: "http://" + listen + "/webhooks/tg",
			Resources: []clients.Resource{clients.TimeEntries}, UserAgent: "tidemark-bench", Store: a.WebhookStore(), Seal: seal})
		if err != nil {
			return res, err
		}
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return res, err
	}
	defer pool.Close()
	time.Sleep(2 * time.Second) // the start-up pass and the PING
	tg.ResetRequests()

	// A new entry every 0.5 s for freshFor; each one's latency is from its
	// write at the fake to its row (polled every 50 ms).
	var mu sync.Mutex
	made := map[string]time.Time{}
	var lat []time.Duration
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopWatch:
				return
			case <-t.C:
			}
			rows, err := pool.Query(ctx, `SELECT notes FROM time_entries WHERE source = 'tg' AND notes LIKE 'chg-%'`)
			if err != nil {
				continue
			}
			now := time.Now()
			for rows.Next() {
				var n string
				if rows.Scan(&n) == nil {
					mu.Lock()
					if at, ok := made[n]; ok {
						lat = append(lat, now.Sub(at))
						delete(made, n)
					}
					mu.Unlock()
				}
			}
			rows.Close()
		}
	}()
	every := 500 * time.Millisecond
	end := time.Now().Add(b.o.freshFor)
	for i := 0; time.Now().Before(end); i++ {
		notes := fmt.Sprintf("chg-%d", i)
		start := tg.Now().UTC().Add(-time.Hour).Truncate(time.Second)
		stop := start.Add(30 * time.Minute)
		mu.Lock()
		made[notes] = time.Now()
		mu.Unlock()
		tg.PutTimeEntry(toggltest.TimeEntry{ID: int64(1 + i), UserID: 7, Description: &notes, Start: start, Stop: &stop, Duration: 1800})
		res.changes++
		time.Sleep(every)
	}
	grace := time.Now().Add(75 * time.Second)
	for time.Now().Before(grace) {
		mu.Lock()
		left := len(made)
		mu.Unlock()
		if left == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(stopWatch)
	<-watched
	mu.Lock()
	res.seen = len(lat)
	for range made { // never seen within the grace: counted at the grace
		lat = append(lat, 75*time.Second)
	}
	mu.Unlock()
	slices.Sort(lat)
	if len(lat) > 0 {
		res.median = lat[len(lat)/2]
		res.p99 = lat[min(len(lat)-1, len(lat)*99/100)]
		res.max = lat[len(lat)-1]
	}
	var ats []int64
	for _, r := range tg.Requests() {
		res.requests++
		if strings.HasPrefix(r.Path, "/me") {
			res.me++
		}
		if r.Status == http.StatusTooManyRequests || r.Status == http.StatusPaymentRequired {
			res.limited++
		}
		ats = append(ats, r.At.UnixNano())
	}
	res.maxPerSecond = maxInWindow(ats, time.Second)
	for _, at := range tg.Hooks().Attempts() {
		if at.Event == "ping" {
			continue
		}
		res.deliveries++
		if at.Resend {
			res.duplicates++
		}
	}
	return res, nil
}

func waitHTTP(u string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		resp, err := http.Get(u)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %w", u, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
