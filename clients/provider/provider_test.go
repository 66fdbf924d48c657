package provider_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/provider"
	_ "github.com/tidemarkhq/tidemark/clients/provider/all"
)

func TestEveryShippedKindIsRegistered(t *testing.T) {
	if got := strings.Join(provider.Names(), ","); got != "clockify,harvest,simulated,toggl" {
		t.Fatalf("registered kinds %s", got)
	}
	for _, n := range provider.Names() {
		k, err := provider.Lookup(n)
		if err != nil || k.New == nil || len(k.Resources) == 0 || k.Doc == "" {
			t.Fatalf("kind %s: %+v, %v", n, k, err)
		}
	}
	if _, err := provider.Lookup("jira"); !errors.Is(err, provider.ErrUnknownKind) || !strings.Contains(err.Error(), "one of clockify, harvest, simulated, toggl") {
		t.Fatalf("unknown kind: %v", err)
	}
}

func TestRegisterRefusesDuplicatesAndIncompleteKinds(t *testing.T) {
	newFn := func(context.Context, provider.Settings, provider.Env) (provider.Built, error) {
		return provider.Built{}, nil
	}
	for _, k := range []provider.Kind{
		{Name: "harvest", Resources: []clients.Resource{clients.Users}, New: newFn},
		{Name: "Bad Name", Resources: []clients.Resource{clients.Users}, New: newFn},
		{Name: "nonew", Resources: []clients.Resource{clients.Users}},
		{Name: "noresources", New: newFn},
		{Name: "badrequired", Resources: []clients.Resource{clients.Users}, New: newFn, Required: []provider.Key{provider.KeyAccountID}},
	} {
		if err := provider.Register(k); err == nil {
			t.Errorf("registered %+v", k.Name)
		}
	}
}

func TestCheckNamesTheKey(t *testing.T) {
	k, err := provider.Lookup("toggl")
	if err != nil {
		t.Fatal(err)
	}
	set := func(keys ...provider.Key) func(provider.Key) bool {
		return func(k provider.Key) bool {
			for _, s := range keys {
				if s == k {
					return true
				}
			}
			return false
		}
	}
	s := &provider.Settings{WorkspaceID: "12", Token: "t", Resources: []clients.Resource{clients.TimeEntries}}
	if fe := k.Check(s, set(provider.KeyWorkspaceID, provider.KeyToken)); fe != nil {
		t.Fatalf("good settings: %v", fe)
	}
	for _, tc := range []struct {
		s    provider.Settings
		set  []provider.Key
		want string
	}{
		{provider.Settings{WorkspaceID: "12"}, []provider.Key{provider.KeyWorkspaceID}, "token: missing; give it as ${VAR}, e.g. token: ${TOGGL_TOKEN}"},
		{provider.Settings{WorkspaceID: "x"}, []provider.Key{provider.KeyWorkspaceID, provider.KeyToken}, "workspace_id: \"x\": want Toggl's numeric workspace id"},
		{provider.Settings{}, []provider.Key{provider.KeyToken, provider.KeyAccountID}, "account_id: kind toggl does not take account_id (it takes workspace_id, scope, trailing_days)"},
		{provider.Settings{WorkspaceID: "1", Scope: "team"}, []provider.Key{provider.KeyWorkspaceID, provider.KeyToken, provider.KeyScope}, `scope: "team": want me`},
		{provider.Settings{WorkspaceID: "1", Scope: "workspace", TrailingDays: -3}, []provider.Key{provider.KeyWorkspaceID, provider.KeyToken, provider.KeyScope, provider.KeyTrailingDays}, "trailing_days: -3: want 1 to 366 days"},
		{provider.Settings{WorkspaceID: "1", Resources: []clients.Resource{"invoices"}}, []provider.Key{provider.KeyWorkspaceID, provider.KeyToken}, "resources: kind toggl does not serve invoices"},
	} {
		if fe := k.Check(&tc.s, set(tc.set...)); fe == nil || !strings.Contains(fe.Error(), tc.want) {
			t.Errorf("got %v, want %q", fe, tc.want)
		}
	}
}
