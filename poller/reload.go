package poller

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/tidemarkhq/tidemark/cursor"
)

// A reload (SIGHUP in `tidemark run`) changes the sources of a running
// daemon: an added source starts at its next tick (in a fleet, once a
// heartbeat assigns it here), a removed one is handed back between two of
// its passes, and a changed one is removed and added again.

// AddSource schedules a source added by a reload.
func (d *Daemon) AddSource(src Source, s Schedule) error {
	for _, spec := range []string{s.Incremental, s.Reconcile} {
		if spec == "" {
			continue
		}
		if _, err := d.parser.Parse(spec); err != nil {
			return fmt.Errorf("source %s: schedule %q: %w", s.Source, spec, err)
		}
	}
	if err := d.p.AddSource(src); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.state[s.Source] = &sourceState{}
	// The specs parsed above: these cannot fail.
	_ = d.schedule(s.Source, s.Incremental, cursor.KindIncremental)
	if s.Reconcile != "" {
		_ = d.schedule(s.Source, s.Reconcile, cursor.KindReconcile)
	}
	if f := d.fleet; f != nil && !slices.Contains(f.names, s.Source) {
		f.names = append(f.names, s.Source)
		slices.Sort(f.names)
	}
	return nil
}

// RemoveSource stops a source: no tick of it starts any more, the pass or
// backfill in flight ends first (ctx bounds the wait), then its lease is
// released (another replica that has it takes it at its next heartbeat),
// and the ownership callback drops its client and series.
func (d *Daemon) RemoveSource(ctx context.Context, source string) error {
	d.mu.Lock()
	st := d.state[source]
	if st == nil {
		d.mu.Unlock()
		return nil
	}
	st.removed = true
	for st.running || st.queued || st.backfilling {
		d.mu.Unlock()
		select {
		case <-ctx.Done():
			d.mu.Lock()
			st.removed = false
			d.mu.Unlock()
			return fmt.Errorf("source %s: its pass did not end in time to remove it: %w", source, ctx.Err())
		case <-time.After(20 * time.Millisecond): // the pass ends on its own
		}
		d.mu.Lock()
	}
	st.running = true // nothing else starts: the state goes now
	entries, owner, owned := st.entries, st.owner, st.owned
	st.disown()
	delete(d.state, source)
	if f := d.fleet; f != nil {
		f.names = slices.DeleteFunc(f.names, func(n string) bool { return n == source })
	}
	d.mu.Unlock()
	for _, id := range entries {
		d.cron.Remove(id)
	}
	if owner != nil {
		owner.Release()
	}
	if owned {
		d.owning(source, false)
		d.log.Info().Str("source", source).Msg("source removed from the config; handed back")
	}
	d.p.RemoveSource(source)
	return nil
}

// SourceNames returns the sources the daemon schedules now, sorted.
func (d *Daemon) SourceNames() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(d.state))
	for name := range d.state {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
