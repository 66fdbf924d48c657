package poller

import (
	"errors"
	"slices"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/cursor"
)

// RunTriggered runs an incremental pass of rs of source at once, for a
// webhook's trigger (package webhooks), when this daemon owns the source:
// the same steps, lease, limiter and back-off as a scheduled tick, so it
// stays within the source's budget and a resource backing off is left
// alone. It returns the resources whose pass succeeded; none, and no
// error, when another replica owns the source or a pass of it runs here
// (the trigger waits in Postgres for the next try). admit, when set, is
// asked once this daemon owns the source, with the resources the pass
// would list: false (no quota left) and the pass does not run.
func (d *Daemon) RunTriggered(source string, rs []clients.Resource, admit func([]clients.Resource) bool) ([]clients.Resource, error) {
	d.mu.Lock()
	st, ok := d.state[source]
	if !ok || d.ctx.Err() != nil || st.running || st.queued || st.removed {
		d.mu.Unlock()
		return nil, nil
	}
	st.running = true
	d.wg.Add(1)
	d.mu.Unlock()
	defer d.wg.Done()
	defer func() {
		d.mu.Lock()
		st.running = false
		d.mu.Unlock()
	}()
	log := d.log.With().Str("source", source).Str("kind", "webhook").Logger()
	if !d.own(source, log) {
		return nil, nil
	}
	d.load(source, st, log)
	now := time.Now()
	var steps []Step
	d.mu.Lock()
	for _, r := range rs {
		if !slices.Contains(d.p.src(source).Resources, r) || now.Before(st.pass(r, cursor.KindIncremental).notUntil) {
			continue
		}
		steps = append(steps, Step{Resource: r, Kind: cursor.KindIncremental})
	}
	d.mu.Unlock()
	if len(steps) == 0 || (admit != nil && !admit(stepResources(steps))) {
		return nil, nil
	}
	// Every page looked up: the intake may have written beside this owner
	// (webhooks.apply), and this pass is what confirms it (memo.go).
	results, err := d.p.Steps(LookUpEveryPage(d.ctx), source, steps)
	if errors.Is(err, ErrBusy) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var done []clients.Resource
	var failed error
	for _, sr := range results {
		d.record(source, st, sr, log)
		if sr.Err == nil {
			done = append(done, sr.Resource)
		} else if failed == nil {
			failed = sr.Err
		}
	}
	if len(done) == 0 {
		return nil, failed
	}
	return done, nil
}

func stepResources(steps []Step) []clients.Resource {
	rs := make([]clients.Resource, len(steps))
	for i, st := range steps {
		rs[i] = st.Resource
	}
	return rs
}
