package main

// Clockify's change feed as it really is (issue 10): the live shape, and a
// feed that is gone, through the binary against the fake under churn with
// deletions, the churn's users in several time zones.

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// ckZones are the churn users' time zones: far from UTC both ways, so
// that many entries' spent_date (dated as Clockify's reports do, in the
// user's zone) is not their UTC day. The third user keeps the fake's
// default (Europe/Berlin).
var ckZones = []string{"America/Los_Angeles", "Asia/Tokyo"}

// feedUnusable is what the Clockify client logs when it falls back.
const feedUnusable = "clockify change feed unusable"

// ckMirrorChecks checks, once converged, that deletions were tombstoned and
// that the users' zones dated the entries, and returns the daemon's log.
func ckMirrorChecks(t *testing.T, e *env, d *proc) string {
	t.Helper()
	if !d.running() {
		t.Fatal("the daemon exited")
	}
	noDuplicates(t, e.pool)
	var tombstones int
	var zones []string
	if err := e.pool.QueryRow(context.Background(),
		`SELECT count(*) FILTER (WHERE deleted_at IS NOT NULL),
		        coalesce(array_agg(DISTINCT time_zone) FILTER (WHERE deleted_at IS NULL), '{}')
		   FROM time_entries WHERE source = 'ck'`).Scan(&tombstones, &zones); err != nil {
		t.Fatal(err)
	}
	if tombstones == 0 {
		t.Error("no tombstone: the churn's deletions were not seen")
	}
	for _, z := range append(slices.Clone(ckZones), "Europe/Berlin") {
		if !slices.Contains(zones, z) {
			t.Errorf("no live entry dated in %s: zones %v", z, zones)
		}
	}
	b, err := os.ReadFile(d.log)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestE2EClockifyLiveFeedChurnConverges: a daemon follows the fake's change
// feed in its live shape (bare entities stamped by auditMetadata, deletions
// by document._id, the page size ignored) through seconds of churn
// (creates, edits, same-second double edits, deletions, back-dating,
// timers); once the churn stops the mirror equals the source: latest
// versions and states (spent_date in each user's zone), and the deletions
// tombstoned from the feed alone (reconcile keeps its weekly default and
// does not run), never falling back to listings.
func TestE2EClockifyLiveFeedChurnConverges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fs := startClockify(t, e, fakeOpts{seed: 1101, liveFeed: true, zones: ckZones})
	d := e.daemon(fs.cfg)
	stop := fs.churn()
	time.Sleep(5 * time.Second)
	e.settleConverged(fs, stop)
	log := ckMirrorChecks(t, e, d)
	if strings.Contains(log, feedUnusable) {
		t.Error("the daemon gave the live feed up for listings")
	}
	if strings.Contains(log, `"kind":"reconcile"`) {
		t.Error("a reconcile ran: the tombstones prove nothing about the feed's deletions")
	}
}

// TestE2EClockifyFeedUnavailableChurnConverges: every feed request answers
// 404. The daemon does not fail its passes: it falls back to per-user
// listings by start date (logged once, at Warn), versioned by the pages'
// Date and compared by content hash, and the mirror converges under the
// same churn.
//
// What the fallback promises: an incremental pass lists the entries whose
// start is within FallbackDays (14) before its cursor; deletions, and
// edits to entries started earlier, are left to reconcile. The churn here
// is not bounded to that window (its 30 days of history and back-dating
// by up to 29 days put entries well before it): reconcile, every 5 s over
// its default 90 days, covers them, and the test needs it for the
// deletions anyway.
func TestE2EClockifyFeedUnavailableChurnConverges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fs := startClockify(t, e, fakeOpts{seed: 1201, feedStatus: 404, reconcile: "@every 5s", zones: ckZones})
	d := e.daemon(fs.cfg)
	stop := fs.churn()
	time.Sleep(5 * time.Second)
	e.settleConverged(fs, stop)
	log := ckMirrorChecks(t, e, d)
	warns, infos := 0, 0
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, feedUnusable) {
			continue
		}
		switch {
		case strings.Contains(l, `"level":"warn"`):
			warns++
		case strings.Contains(l, `"level":"info"`):
			infos++
		}
	}
	if warns != 1 {
		t.Errorf("the fallback was logged %d times at Warn (and %d at Info), want once at Warn", warns, infos)
	}
	if !strings.Contains(log, "the feed answers 404") {
		t.Error("the fallback's reason does not name the 404")
	}
	// cursors, another process, shows how time entries are read now.
	out, errs, code := e.cli("cursors", "--config", fs.cfg, "--json")
	if code != 0 {
		t.Fatalf("cursors exited %d\n%s", code, errs)
	}
	for _, c := range decodeJSON[[]map[string]any](t, out) {
		mode, _ := c["read_mode"].(string)
		if c["resource"] == "time_entries" && !strings.Contains(mode, "listing: the feed answers 404") {
			t.Errorf("cursors --json read_mode %q, want the fallback with its reason", mode)
		}
	}
	text, _, _ := e.cli("cursors", "--config", fs.cfg)
	if !strings.Contains(text, "read by listing: the feed answers 404") {
		t.Errorf("cursors does not show the fallback:\n%s", text)
	}
}
