package config

import "time"

// sync_runs retention defaults (issue 15). A month of every run covers a
// billing cycle and the incident reviews that follow it; a day of idle runs
// shows the schedule kept running, and an older idle run says nothing the
// cursor and the newest run do not.
const (
	DefaultRunsKeep     = 30 * 24 * time.Hour
	DefaultRunsKeepIdle = 24 * time.Hour
	// MinRunsKeep is the shortest keep or keep_idle accepted: less would
	// delete the runs an operator is looking at.
	MinRunsKeep = time.Hour
)

// Runs bounds the sync_runs history. The newest run of each (source,
// resource, kind), and the newest successful one, are kept whatever their
// age, and a running row is never deleted.
type Runs struct {
	// Keep is how long every run is kept (default 720h, 30 days).
	Keep Duration `yaml:"keep"`
	// KeepIdle is how long an idle run is kept (default 24h): a pass that
	// ended ok with nothing inserted, updated or tombstoned and its cursor
	// unchanged. At most Keep.
	KeepIdle Duration `yaml:"keep_idle"`
}

// validateRuns applies the retention defaults and checks them.
func (c *Config) validateRuns(fail func(key, format string, args ...any) error) error {
	r := &c.Runs
	for _, k := range []struct {
		key string
		d   *Duration
		def time.Duration
	}{{"runs.keep", &r.Keep, DefaultRunsKeep}, {"runs.keep_idle", &r.KeepIdle, DefaultRunsKeepIdle}} {
		if *k.d == 0 {
			*k.d = Duration(k.def)
		}
		if k.d.D() < MinRunsKeep {
			return fail(k.key, "%s is shorter than %s: runs would be deleted while still being looked at", k.d.D(), MinRunsKeep)
		}
	}
	if r.KeepIdle > r.Keep {
		return fail("runs.keep_idle", "%s is longer than runs.keep (%s): idle runs cannot be kept longer than every run", r.KeepIdle.D(), r.Keep.D())
	}
	return nil
}
