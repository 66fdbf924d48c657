package main

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/events"
	"github.com/tidemarkhq/tidemark/upsert"
)

// runEvents is the change feed scenario (issue 13): the same pages applied
// with events off and on, page by page in turn so that both see the same
// load; then all of them again (re-delivery); then single changes timed
// from commit to a consumer's fn, woken by NOTIFY only.
func (b *bench) runEvents(ctx context.Context, prof []string) (line, error) {
	sim, stop, err := b.startSim("-entries", fmt.Sprint(b.o.eventsEntries))
	if err != nil {
		return line{}, err
	}
	defer stop()
	res, err := b.scenario(ctx, sim, append([]string{"-kind", "events", "-sample", fmt.Sprint(b.o.eventsEntries)}, prof...)...)
	if err != nil {
		return line{}, err
	}
	x := res.Extra
	l := line{name: "events", res: res}
	l.ratio = x["on_rate"] / x["off_rate"]
	l.ratioText = fmt.Sprintf("apply rate events on ÷ off (%.0f/s ÷ %.0f/s)", x["on_rate"], x["off_rate"])
	l.extra = fmt.Sprintf("WAL on/off=%.2f (%.0f vs %.0f B/row); re-delivery WAL off=%s on=%s, events appended %.0f; commit→fn median=%.1fms p95=%.1fms (%.0f changes, NOTIFY only); %s",
		x["on_wal"]/x["off_wal"], x["on_wal"]/x["rows"], x["off_wal"]/x["rows"],
		bytesText(x["redeliver_wal_off"]), bytesText(x["redeliver_wal_on"]), x["redeliver_events"],
		x["latency_median_ms"], x["latency_p95_ms"], x["latency_n"], res.Note)
	return l, nil
}

// scenarioEvents is the child side of runEvents.
func scenarioEvents(ctx context.Context, pool *pgxpool.Pool, a scenarioArgs) (result, error) {
	pages, n, err := prefetch(ctx, a)
	if err != nil {
		return result{}, err
	}
	runtime.GC()
	// Each page goes to source "off" and to source "on" (same rows, two
	// sources of one table), alternating which goes first.
	apply := func(recs []clients.Record, on bool) (time.Duration, float64, upsert.Counts, error) {
		lsn, err := walLSN(ctx, pool)
		if err != nil {
			return 0, 0, upsert.Counts{}, err
		}
		source := "off"
		if on {
			source = "on"
		}
		start := time.Now()
		var c upsert.Counts
		err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			c, err = upsert.Apply(ctx, tx, source, clients.TimeEntries, recs, upsert.WithEvents(on))
			return err
		})
		wall := time.Since(start)
		if err != nil {
			return 0, 0, c, err
		}
		wal, err := walSince(ctx, pool, lsn)
		return wall, wal, c, err
	}
	var wall [2]time.Duration
	var wal [2]float64
	var counts [2]upsert.Counts
	round := func() error {
		wall, wal, counts = [2]time.Duration{}, [2]float64{}, [2]upsert.Counts{}
		for i, recs := range pages {
			for k := range 2 {
				on := (i+k)%2 == 1
				w, b, c, err := apply(recs, on)
				if err != nil {
					return err
				}
				j := 0
				if on {
					j = 1
				}
				wall[j] += w
				wal[j] += b
				counts[j].Add(c)
			}
		}
		return nil
	}
	if err := round(); err != nil {
		return result{}, err
	}
	newWall, newWAL, newCounts := wall, wal, counts
	var before int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM events`).Scan(&before); err != nil {
		return result{}, err
	}
	// Settle what the first reads of the new rows would write (hint bits,
	// autovacuum), which is no part of a re-delivery.
	if _, err := pool.Exec(ctx, `VACUUM (ANALYZE) time_entries, events`); err != nil {
		return result{}, err
	}
	if err := round(); err != nil { // re-delivery of every page
		return result{}, err
	}
	var after int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM events`).Scan(&after); err != nil {
		return result{}, err
	}
	lat, err := commitToFn(ctx, pool, pages, 200)
	if err != nil {
		return result{}, err
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return result{Records: int64(n), Pages: len(pages), WallSec: newWall[1].Seconds(),
		Extra: map[string]float64{
			"rows":     float64(n),
			"off_rate": float64(n) / newWall[0].Seconds(), "on_rate": float64(n) / newWall[1].Seconds(),
			"off_wal": newWAL[0], "on_wal": newWAL[1],
			"redeliver_wal_off": wal[0], "redeliver_wal_on": wal[1], "redeliver_events": float64(after - before),
			"latency_median_ms": ms(lat[len(lat)/2]), "latency_p95_ms": ms(lat[len(lat)*95/100]), "latency_n": float64(len(lat)),
		},
		Note: fmt.Sprintf("inserted off=%d on=%d, events=%d; re-delivery unchanged off=%d on=%d",
			newCounts[0].Inserted, newCounts[1].Inserted, before, counts[0].Unchanged, counts[1].Unchanged),
	}, nil
}

// commitToFn applies n single-record changes with events on, one every
// 20 ms, and returns for each the time from its commit to the consumer's fn,
// with polling off (an hour): NOTIFY alone wakes the consumer.
func commitToFn(ctx context.Context, pool *pgxpool.Pool, pages [][]clients.Record, n int) ([]time.Duration, error) {
	const name = "bench-latency"
	// Start the consumer at the head: the earlier rounds' events are not timed.
	nop := func(context.Context, pgx.Tx, events.Event) error { return nil }
	if _, err := events.Drain(ctx, pool, name, nop, 1); err != nil {
		return nil, err
	}
	if err := events.Reset(ctx, pool, events.ResetParams{Consumer: name, ToHead: true}); err != nil {
		return nil, err
	}
	type arrival struct {
		id string
		at time.Time
	}
	got := make(chan arrival, n)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- events.Consume(cctx, pool, name, func(_ context.Context, _ pgx.Tx, ev events.Event) error {
			got <- arrival{ev.RecordID, time.Now()}
			return nil
		}, events.PollEvery(time.Hour))
	}()
	time.Sleep(200 * time.Millisecond) // let it reach its LISTEN
	var recs []clients.Record
	for _, p := range pages {
		recs = append(recs, p...)
	}
	out := make([]time.Duration, 0, n)
	for i := range min(n, len(recs)) {
		rec := recs[i]
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := upsert.Apply(ctx, tx, "latency", clients.TimeEntries, []clients.Record{rec}, upsert.WithEvents(true))
			return err
		})
		committed := time.Now()
		if err != nil {
			return nil, err
		}
		select {
		case a := <-got:
			if a.id != rec.ID {
				return nil, fmt.Errorf("consumer got %s, want %s", a.id, rec.ID)
			}
			out = append(out, max(a.at.Sub(committed), 0)) // fn may run before Commit returns to us
		case <-time.After(10 * time.Second):
			return nil, fmt.Errorf("change %d did not reach the consumer within 10 s", i)
		case err := <-done:
			return nil, fmt.Errorf("consumer stopped: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return out, nil
}
