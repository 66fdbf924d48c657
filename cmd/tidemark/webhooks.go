package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/redact"
	"github.com/tidemarkhq/tidemark/webhooks"
)

// newWebhooksCmd is `tidemark webhooks register|status|conflicts` (issue 14).
func newWebhooksCmd(g *globals) *cobra.Command {
	return group("webhooks", "Provider webhooks: register the subscriptions, show their state and the conflicts",
		newWebhooksRegisterCmd(g), newWebhooksStatusCmd(g), newWebhooksConflictsCmd(g))
}

func registerParams(a *app, s *config.Source, callback string, seal *webhooks.Sealer) webhooks.RegisterParams {
	var rs []clients.Resource
	for _, r := range s.Resources {
		rs = append(rs, clients.Resource(r))
	}
	return webhooks.RegisterParams{
		Source: s.Name, Kind: s.Kind, BaseURL: s.BaseURL, WorkspaceID: s.WorkspaceID, Token: s.Token.Value(),
		URL: callback, Resources: rs, UserAgent: "tidemark/" + version + " (" + a.Config.Contact + ")",
		RateLimit: httpx.RateLimit{Requests: s.RateLimit.Requests, Per: s.RateLimit.Per.D()},
		Pacer:     a.Pacer(s.Name), Store: a.WebhookStore(), Seal: seal,
	}
}

func sealer() (*webhooks.Sealer, error) {
	s, err := webhooks.SealerFromEnv()
	if err != nil { // unset or malformed: the operator's to fix (exit 2)
		return nil, usageError{err}
	}
	return s, nil
}

func newWebhooksRegisterCmd(g *globals) *cobra.Command {
	var f appFlags
	var callback string
	var seal *webhooks.Sealer
	c := appCommand(g, &f, &cobra.Command{
		Use:   "register",
		Short: "Create (or check) the source's webhook subscription at the provider, for the resources mirrored",
		Long: "Creates the provider's webhook subscription(s) for the source's resources, delivering to --url (this daemon's\n" +
			"POST /webhooks/{source} as the provider reaches it), or checks the ones that exist. The signing secret is stored\n" +
			"in the database encrypted with " + webhooks.KeyEnv + " (32 bytes, base64 or hex); the daemon needs the same key.",
		PreRunE: func(*cobra.Command, []string) error {
			if f.source == "" {
				return usagef("--source NAME is required")
			}
			u, err := url.Parse(callback)
			if callback == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return usagef("--url %q: want the http(s) URL the provider delivers to, e.g. https://tidemark.example.com/webhooks/%s", callback, f.source)
			}
			seal, err = sealer()
			return err
		},
	}, func(ctx context.Context, a *app) error {
		s, _ := a.Config.Source(f.source)
		if webhooks.DialectOf(s.Kind) == nil {
			return usagef("source %s: kind %s sends no webhooks (Harvest has none: polling only)", s.Name, s.Kind)
		}
		regs, err := webhooks.Register(ctx, registerParams(a, s, callback, seal))
		for _, r := range regs {
			what := "checked"
			if r.Created {
				what = "created"
			}
			fmt.Fprintf(g.stdout, "%s subscription %s (%s) → %s", what, r.ID, strings.Join(r.Events, ", "), callback)
			if r.Note != "" {
				fmt.Fprintf(g.stdout, "; %s", r.Note)
			}
			fmt.Fprintln(g.stdout)
		}
		return err
	})
	c.Flags().StringVar(&callback, "url", "", "where the provider delivers: https://HOST/webhooks/SOURCE")
	return c
}

type subStatusJSON struct {
	Source         string     `json:"source"`
	Subscription   string     `json:"subscription"`
	Events         []string   `json:"events"`
	URL            string     `json:"url"`
	ValidatedAt    *time.Time `json:"validated_at"`
	LastDeliveryAt *time.Time `json:"last_delivery_at"`
	Deliveries     int64      `json:"deliveries"`
	Provider       string     `json:"provider"`
}

func newWebhooksStatusCmd(g *globals) *cobra.Command {
	var f appFlags
	var asJSON, offline bool
	c := appCommand(g, &f, &cobra.Command{Use: "status", Short: "Show each webhook subscription, its last delivery and what the provider says of it"},
		func(ctx context.Context, a *app) error {
			subs, err := a.WebhookStore().Subscriptions(ctx, f.source)
			if err != nil {
				return err
			}
			states := map[string]map[string]webhooks.ProviderState{}
			errs := map[string]string{}
			if !offline {
				for _, sub := range subs {
					if _, done := states[sub.Source]; done || errs[sub.Source] != "" {
						continue
					}
					s, err := a.Config.Source(sub.Source)
					if err != nil {
						errs[sub.Source] = "not in the config"
						continue
					}
					st, err := webhooks.States(ctx, registerParams(a, s, "", nil))
					if err != nil {
						errs[sub.Source] = "unreachable: " + err.Error()
						continue
					}
					states[sub.Source] = st
				}
			}
			var out []subStatusJSON
			for _, sub := range subs {
				p := "not asked"
				switch {
				case errs[sub.Source] != "":
					p = errs[sub.Source]
				case states[sub.Source] != nil:
					st := states[sub.Source][sub.ID]
					switch {
					case !st.Found:
						p = "MISSING at the provider: register again"
					default:
						var bits []string
						bits = append(bits, map[bool]string{true: "enabled", false: "DISABLED"}[st.Enabled])
						if !st.Validated {
							bits = append(bits, "NOT VALIDATED")
						}
						if st.Pending {
							bits = append(bits, "has undelivered events (failing deliveries)")
						}
						p = strings.Join(bits, ", ")
					}
				}
				out = append(out, subStatusJSON{Source: sub.Source, Subscription: sub.ID, Events: sub.Events, URL: redact.URL(sub.URL),
					ValidatedAt: sub.ValidatedAt, LastDeliveryAt: sub.LastDeliveryAt, Deliveries: sub.Deliveries, Provider: p})
			}
			if asJSON {
				return writeJSON(g.stdout, out)
			}
			if len(out) == 0 {
				fmt.Fprintln(g.stdout, "no webhook subscriptions (tidemark webhooks register --source NAME --url URL)")
				return nil
			}
			return printTable(g.stdout, "SOURCE\tSUBSCRIPTION\tEVENTS\tLAST DELIVERY\tDELIVERIES\tPROVIDER", out, func(s subStatusJSON) []any {
				last := "never"
				if s.LastDeliveryAt != nil {
					last = s.LastDeliveryAt.UTC().Format(time.RFC3339)
				}
				return []any{s.Source, s.Subscription, strings.Join(s.Events, ","), last, s.Deliveries, s.Provider}
			})
		})
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	c.Flags().BoolVar(&offline, "offline", false, "do not ask the provider (no requests)")
	return c
}

func newWebhooksConflictsCmd(g *globals) *cobra.Command {
	var f appFlags
	var asJSON bool
	var limit int
	c := appCommand(g, &f, &cobra.Command{Use: "conflicts", Short: "List deliveries whose payload differed from the one stored under their key (never processed)"},
		func(ctx context.Context, a *app) error {
			cs, err := a.WebhookStore().Conflicts(ctx, f.source, limit)
			if err != nil {
				return err
			}
			if asJSON {
				if cs == nil {
					cs = []webhooks.ConflictRow{}
				}
				return writeJSON(g.stdout, cs)
			}
			if len(cs) == 0 {
				fmt.Fprintln(g.stdout, "no webhook conflicts")
				return nil
			}
			return printTable(g.stdout, "ID\tSOURCE\tKEY\tSEEN\tSTORED PAYLOAD\tRECEIVED PAYLOAD", cs, func(c webhooks.ConflictRow) []any {
				return []any{c.ID, c.Source, c.Key, c.SeenAt.UTC().Format(time.RFC3339),
					"sha256:" + hex.EncodeToString(c.StoredHash)[:12] + "…", "sha256:" + hex.EncodeToString(c.ReceivedHash)[:12] + "…"}
			})
		})
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	c.Flags().IntVar(&limit, "limit", 100, "at most this many, newest first")
	return c
}

// writeLastWebhooks follows the cursors table with when each source's last
// webhook arrived (sources that have had one).
func writeLastWebhooks(w io.Writer, rows []cursorJSON, now time.Time) {
	seen := map[string]bool{}
	for _, r := range rows {
		if r.LastWebhookAt == nil || seen[r.Source] {
			continue
		}
		seen[r.Source] = true
		fmt.Fprintf(w, "%s: last webhook %s (%s ago)\n", r.Source, r.LastWebhookAt.Format(time.RFC3339),
			now.Sub(*r.LastWebhookAt).Round(time.Second))
	}
}
