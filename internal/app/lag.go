package app

import (
	"fmt"
	"time"
)

// How far behind is not how old: a resource that nobody edited for a year
// has a year-old newest change and a mirror that is seconds behind. The
// mirror is behind by the time since its last complete pass; it is late
// when that exceeds what the schedule explains.

// lateAfter is how long a mirror may go without a complete pass before it
// counts as late: three of the schedule's gaps, as TidemarkMirrorBehind
// (deploy/prometheus/alerts.yml) counts.
func lateAfter(gap time.Duration) time.Duration { return 3 * gap }

// setBehind fills row's BehindSeconds and Late from its last complete pass
// and the source's schedule (spec; "" when no longer configured).
func setBehind(row *CursorRow, spec string, now time.Time) {
	if row.LastOKAt == nil {
		return
	}
	behind := max(now.Sub(*row.LastOKAt), 0)
	s := behind.Seconds()
	row.BehindSeconds = &s
	if gap := ScheduleGap(spec, now); gap > 0 && behind > lateAfter(gap) {
		row.Late = true
	}
}

// LagWords words a row's two ages for a person: behind ("synced 4s ago",
// or "LATE: last complete pass 3h ago" past what the schedule explains;
// "not synced yet" before the first) and newest ("newest change 394d ago",
// "no change seen yet"), which says nothing about health.
func LagWords(row CursorRow) (behind, newest string) {
	behind = "not synced yet"
	if row.BehindSeconds != nil {
		d := time.Duration(*row.BehindSeconds * float64(time.Second))
		behind = "synced " + Ago(d) + " ago"
		if row.Late {
			behind = "LATE: last complete pass " + Ago(d) + " ago"
		}
	}
	newest = "no change seen yet"
	if row.LagSeconds != nil {
		newest = "newest change " + Ago(time.Duration(*row.LagSeconds*float64(time.Second))) + " ago"
	}
	return behind, newest
}

// Ago is a duration as a person reads an age: 4s, 12m, 3h, 394d.
func Ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(max(d, 0)/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	default:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
}
