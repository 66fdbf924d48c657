package app

import (
	"testing"
	"time"
)

// A resource nobody edited for a year, synced seconds ago, is healthy:
// behind by seconds, its newest change a year old (issue 26, 4). One
// without a complete pass for longer than 3x its schedule is late.
func TestLagWordsTellBehindFromNewestChange(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := now.Add(-d); return &v }
	yearAgo := (365 * 24 * time.Hour).Seconds()
	for _, tc := range []struct {
		name           string
		lastOK         *time.Time
		behind, newest string
		late           bool
	}{
		{"idle but synced", at(4 * time.Second), "synced 4s ago", "newest change 365d ago", false},
		{"no pass for 31 minutes on a 10-minute schedule", at(31 * time.Minute), "LATE: last complete pass 31m ago", "newest change 365d ago", true},
		{"never synced", nil, "not synced yet", "newest change 365d ago", false},
	} {
		row := CursorRow{LastOKAt: tc.lastOK, LagSeconds: &yearAgo}
		setBehind(&row, "*/10 * * * *", now)
		behind, newest := LagWords(row)
		if behind != tc.behind || newest != tc.newest || row.Late != tc.late {
			t.Errorf("%s: %q, %q, late %v; want %q, %q, late %v", tc.name, behind, newest, row.Late, tc.behind, tc.newest, tc.late)
		}
	}
}
