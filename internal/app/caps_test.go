package app_test

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/provider"
	"github.com/tidemarkhq/tidemark/internal/app"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/webhooks"
)

// capsConfig is every provider in every scope it has: Harvest, Toggl me and
// workspace, Clockify every user and some users, the simulated tracker.
const capsConfig = `
database_url: ${DATABASE_URL}
sources:
  - {name: harvest, kind: harvest, account_id: "1", token: t, base_url: "http://127.0.0.1:9"}
  - {name: toggl-me, kind: toggl, workspace_id: "7", token: t, scope: me, base_url: "http://127.0.0.1:9"}
  - {name: toggl-ws, kind: toggl, workspace_id: "7", token: t, scope: workspace, base_url: "http://127.0.0.1:9"}
  - {name: clockify-all, kind: clockify, workspace_id: "w", token: t, base_url: "http://127.0.0.1:9"}
  - {name: clockify-some, kind: clockify, workspace_id: "w", token: t, user_ids: [u1, u2], base_url: "http://127.0.0.1:9"}
  - name: simulated
    kind: simulated
    simulated: {seed: 1, users: 1, days: 2, mutations_per_tick: 1, every: 1h}
`

// capabilities are the optional interfaces a client may have beyond
// clients.Source, each looked up the way the program looks it up.
var capabilities = map[string]func(clients.Source) bool{
	"clients.Scoper":    func(s clients.Source) bool { _, ok := clients.As[clients.Scoper](s); return ok },
	"clients.Confirmer": func(s clients.Source) bool { _, ok := clients.As[clients.Confirmer](s); return ok },
	"clients.Moder":     func(s clients.Source) bool { _, ok := clients.As[clients.Moder](s); return ok },
	"webhooks.Decoder":  func(s clients.Source) bool { _, ok := clients.As[webhooks.Decoder](s); return ok },
}

// TestCapabilitiesSurviveTheApp (issue 30, item 1): for every provider and
// scope, each optional capability of the bare client is found on the source
// app.Open builds, as a CLI command builds it and as the daemon does (a slot
// whose client comes and goes with ownership). A wrapper once dropped
// clients.Confirmer, and the lookup by id before a tombstone never ran.
func TestCapabilitiesSurviveTheApp(t *testing.T) {
	t.Parallel()
	u := pgtest.URL(t)
	for _, daemon := range []bool{false, true} {
		cfg, err := config.Parse("caps.yaml", []byte(capsConfig), func(k string) (string, bool) { return u, k == "DATABASE_URL" })
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		a, err := app.Open(ctx, cfg, u, "v0.0.0-test", zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
		if err != nil {
			t.Fatal(err)
		}
		if daemon {
			a.ShareClients()
		}
		srcs, err := a.Sources(ctx, "")
		if err != nil {
			a.Close()
			t.Fatal(err)
		}
		checked := 0
		for i, ps := range srcs {
			sc := &cfg.Sources[i]
			kind, err := provider.Lookup(sc.Kind)
			if err != nil {
				t.Fatal(err)
			}
			bare, err := kind.New(ctx, sc.Settings(), provider.Env{Logger: zerolog.Nop()})
			if err != nil {
				t.Fatal(err)
			}
			for name, has := range capabilities {
				if !has(bare.Source) {
					continue
				}
				checked++
				if !has(ps.Source) {
					t.Errorf("daemon %v: source %s (%s): the bare client is a %s, the one app.Open builds is not", daemon, sc.Name, sc.Kind, name)
				}
			}
			if bare.Close != nil {
				bare.Close()
			}
		}
		a.Close()
		if checked < 7 { // Scoper×4, Moder×2, Confirmer×2, Decoder×4 at least
			t.Errorf("daemon %v: only %d capabilities checked: the table lost a provider", daemon, checked)
		}
	}
}
