package app

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/poller"
)

// Reload (SIGHUP in `tidemark run`, like Prometheus or nginx) applies a new
// config's sources to the running daemon: added ones start at their next
// tick, removed ones are handed back between two passes (their leases
// released, their series dropped), changed ones are removed and added
// again. A config that would be refused at start is refused here with the
// same error, and the running one is kept. The other keys (database_url,
// listen, change_feed, webhooks, runs) take effect at the next restart.

// reloadWait bounds how long a reload waits for a removed source's pass.
const reloadWait = 2 * time.Minute

// cfg is the config in force (a reload replaces it).
func (a *App) cfg() *config.Config {
	a.cfgMu.RLock()
	defer a.cfgMu.RUnlock()
	return a.Config
}

// reload reads the config file again and applies its sources to d; an
// error leaves everything as it was (a log line and
// tidemark_config_last_reload_successful say so).
func (a *App) reload(ctx context.Context, d *poller.Daemon) error {
	err := a.applyReload(ctx, d)
	a.Metrics.Reloaded(err == nil, time.Now())
	if err != nil {
		a.Log.Error().Err(err).Str("config", a.Config.Path).Msg("config reload refused: the running config is kept")
	}
	return err
}

func (a *App) applyReload(ctx context.Context, d *poller.Daemon) error {
	old := a.cfg()
	cfg, err := config.Load(old.Path)
	if err != nil {
		return err
	}
	next := &App{Config: cfg, Log: a.Log}
	if err := next.checkBudgetsOf(); err != nil {
		return err
	}
	was, now := Fingerprints(old), Fingerprints(cfg)
	var added, removed, changed []string
	for i := range cfg.Sources {
		name := cfg.Sources[i].Name
		fp, ok := was[name]
		switch {
		case !ok:
			added = append(added, name)
		case fp != now[name]:
			changed = append(changed, name)
		}
	}
	for name := range was {
		if _, ok := now[name]; !ok {
			removed = append(removed, name)
		}
	}
	// Build every new or changed source first: one that does not build
	// refuses the whole reload before anything changed.
	built := map[string]poller.Source{}
	for _, name := range append(append([]string{}, added...), changed...) {
		sc, _ := cfg.Source(name)
		ps, err := a.pollerSource(ctx, sc)
		if err != nil {
			return err
		}
		built[name] = ps
	}
	wait, cancel := context.WithTimeout(ctx, reloadWait)
	defer cancel()
	for _, name := range append(append([]string{}, removed...), changed...) {
		if err := d.RemoveSource(wait, name); err != nil {
			return fmt.Errorf("reload: %w (the sources before it were applied)", err)
		}
	}
	for _, name := range removed {
		a.slotsMu.Lock()
		delete(a.slots, name)
		a.slotsMu.Unlock()
	}
	for _, name := range append(append([]string{}, added...), changed...) {
		// Once the old source stopped, so that no pass under its
		// history setting writes after the history is brought in line.
		if err := a.prepareHistory(ctx, built[name]); err != nil {
			return fmt.Errorf("reload: %w (the sources before it were applied)", err)
		}
		sc, _ := cfg.Source(name)
		if err := d.AddSource(built[name], poller.Schedule{Source: name, Incremental: sc.Schedule, Reconcile: sc.Reconcile.Schedule}); err != nil {
			return UsageError{err}
		}
	}
	at := time.Now()
	a.cfgMu.Lock()
	a.Config, a.configAt = cfg, at
	a.cfgMu.Unlock()
	d.SetFleetSources(now, at)
	var restart []string
	for _, k := range []struct {
		name     string
		was, now any
	}{
		{"database_url", old.DatabaseURL, cfg.DatabaseURL}, {"listen", old.Listen, cfg.Listen},
		{"contact", old.Contact, cfg.Contact}, {"change_feed", old.ChangeFeed, cfg.ChangeFeed},
		{"webhooks", old.Webhooks, cfg.Webhooks}, {"runs", old.Runs, cfg.Runs},
	} {
		if !reflect.DeepEqual(k.was, k.now) {
			restart = append(restart, k.name)
		}
	}
	ev := a.Log.Info()
	if len(restart) > 0 {
		ev = a.Log.Warn().Strs("need_restart", restart)
	}
	ev.Strs("added", added).Strs("removed", removed).Strs("changed", changed).Str("config", cfg.Path).
		Msg("config reloaded")
	return nil
}
