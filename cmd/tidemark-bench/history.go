package main

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/upsert"
)

// The history scenario (issue 31): the same pages applied to four sources
// of one table, page by page in turn so that all see the same load: with
// nothing on, events on, history on, and both; then all of them again
// (re-delivery), with the bytes the history grew by.

// historyModes are the four ways a page is written, by source name.
var historyModes = []struct {
	source          string
	events, history bool
}{{"off", false, false}, {"events", true, false}, {"history", false, true}, {"both", true, true}}

func (b *bench) runHistory(ctx context.Context, prof []string) (line, error) {
	sim, stop, err := b.startSim("-entries", fmt.Sprint(b.o.eventsEntries))
	if err != nil {
		return line{}, err
	}
	defer stop()
	res, err := b.scenario(ctx, sim, append([]string{"-kind", "history", "-sample", fmt.Sprint(b.o.eventsEntries)}, prof...)...)
	if err != nil {
		return line{}, err
	}
	x := res.Extra
	l := line{name: "history", res: res}
	l.ratio = x["history_rate"] / x["off_rate"]
	l.ratioText = fmt.Sprintf("apply rate history on ÷ off (%.0f/s ÷ %.0f/s)", x["history_rate"], x["off_rate"])
	l.extra = fmt.Sprintf("events on ÷ off %.2f, both ÷ off %.2f; re-delivery rate history ÷ off %.2f (%.0f/s ÷ %.0f/s), history bytes written by the re-delivery %.0f; %.0f B per kept version (table and indexes, %.0f versions); %s",
		x["events_rate"]/x["off_rate"], x["both_rate"]/x["off_rate"],
		x["re_history_rate"]/x["re_off_rate"], x["re_history_rate"], x["re_off_rate"],
		x["redeliver_history_bytes"], x["bytes_per_version"], x["versions"], res.Note)
	return l, nil
}

// scenarioHistory is the child side of runHistory.
func scenarioHistory(ctx context.Context, pool *pgxpool.Pool, a scenarioArgs) (result, error) {
	pages, n, err := prefetch(ctx, a)
	if err != nil {
		return result{}, err
	}
	for _, m := range historyModes {
		if m.history {
			if err := upsert.EnsureHistory(ctx, pool, m.source, []clients.Resource{clients.TimeEntries}); err != nil {
				return result{}, err
			}
		}
	}
	runtime.GC()
	first, err := historyRound(ctx, pool, pages)
	if err != nil {
		return result{}, err
	}
	// Settle what the first reads of the new rows would write (hint bits),
	// which is no part of a re-delivery.
	if _, err := pool.Exec(ctx, `VACUUM (ANALYZE) time_entries, time_entries_history_store, events`); err != nil {
		return result{}, err
	}
	var before, versions, size float64
	if err := pool.QueryRow(ctx, historySizeSQL).Scan(&before); err != nil {
		return result{}, err
	}
	again, err := historyRound(ctx, pool, pages)
	if err != nil {
		return result{}, err
	}
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM time_entries_history), `+historySizeSQL[len("SELECT "):]).Scan(&versions, &size); err != nil {
		return result{}, err
	}
	x := map[string]float64{"versions": versions, "bytes_per_version": size / versions, "redeliver_history_bytes": size - before}
	for i, m := range historyModes {
		x[m.source+"_rate"] = float64(n) / first[i].Seconds()
		x["re_"+m.source+"_rate"] = float64(n) / again[i].Seconds()
	}
	return result{Records: int64(n), Pages: len(pages), WallSec: first[2].Seconds(), Extra: x,
		Note: fmt.Sprintf("%d rows in %d pages per mode", n, len(pages))}, nil
}

// historySizeSQL: the bytes of the history, the store's (table and
// indexes) and what first versions take in their mirror rows (their four
// columns, 32 bytes or so a row).
const historySizeSQL = `SELECT pg_total_relation_size('time_entries_history_store')
  + coalesce((SELECT sum(pg_column_size(history_seq) + pg_column_size(history_valid_from)
      + pg_column_size(history_recorded_from) + coalesce(pg_column_size(history_run_id), 0))
    FROM time_entries WHERE history_valid_from IS NOT NULL), 0)`

// historyRound applies every page in each mode, rotating which goes first,
// and returns each mode's total wall time.
func historyRound(ctx context.Context, pool *pgxpool.Pool, pages [][]clients.Record) ([4]time.Duration, error) {
	var wall [4]time.Duration
	for i, recs := range pages {
		for k := range historyModes {
			j := (i + k) % len(historyModes)
			m := historyModes[j]
			start := time.Now()
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				_, err := upsert.Apply(ctx, tx, m.source, clients.TimeEntries, recs,
					upsert.WithEvents(m.events), upsert.WithHistory(m.history), upsert.WithRun("bench"))
				return err
			})
			if err != nil {
				return wall, err
			}
			wall[j] += time.Since(start)
		}
	}
	return wall, nil
}
