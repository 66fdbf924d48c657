package upsert

import (
	"strings"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
)

func forUser(rec clients.Record, user string) clients.Record { return with(rec, "user_id", user) }

// TestTombstoneScopedToUsers is issue 9, finding 1: a reconcile that listed
// only some users' entries (Clockify lists per configured user) tombstones
// only those users' missing rows; other users' rows in the range stay live,
// and the ceiling counts only rows in scope. Without a scope, every user's
// missing rows are marked, as before.
func TestTombstoneScopedToUsers(t *testing.T) {
	t.Parallel()
	asOf := t0.Add(time.Hour)
	f := t0.Add(time.Minute)
	const a, b, c = "user-a", "user-b", "user-c"
	seed := []clients.Record{
		forUser(onDay(entry(1, t0, f, "a"), 2), a), // seen
		forUser(onDay(entry(2, t0, f, "a"), 2), a), // missing
		forUser(onDay(entry(3, t0, f, "a"), 3), a), // missing
		forUser(onDay(entry(4, t0, f, "a"), 5), a), // missing, after the range
		forUser(onDay(entry(5, t0, f, "a"), 2), b),
		forUser(onDay(entry(6, t0, f, "a"), 3), b),
		forUser(onDay(entry(7, t0, f, "a"), 3), c),
	}
	from, to := clients.Date{Year: 2026, Month: 3, Day: 2}, clients.Date{Year: 2026, Month: 3, Day: 3}
	params := func(users []string, max int) TombstoneParams {
		return TombstoneParams{Source: testSource, Resource: clients.TimeEntries, From: from, To: to,
			Seen: []string{"1"}, AsOf: asOf, Max: max, Scope: clients.Scope{UserIDs: users}}
	}

	runTombstoneCases(t, seed, []tombstoneCase{
		// The ceiling counts only A's two missing rows, not B's and C's.
		{name: "one user", params: params([]string{a}, 2), n: 2, deleted: "2,3"},
		{name: "two users", params: params([]string{a, c}, 0), n: 3, deleted: "2,3,7"},
		{name: "ceiling counts only rows in scope", params: params([]string{b}, 1), refused: []string{"2 rows"}},
		{name: "no users listed", params: params([]string{}, 1)},
		{name: "unscoped", params: params(nil, 0), n: 5, deleted: "2,3,5,6,7"},
	})

	t.Run("a user scope on a table without user_id", func(t *testing.T) {
		t.Parallel()
		pool := pgtest.DB(t)
		for _, res := range []clients.Resource{clients.Projects, clients.Clients, clients.Users, clients.Tasks} {
			for _, users := range [][]string{{a}, {}} {
				_, err := tombstone(t, pool, TombstoneParams{Source: testSource, Resource: res, AsOf: asOf, Scope: clients.Scope{UserIDs: users}})
				if err == nil || !strings.Contains(err.Error(), string(res)) || !strings.Contains(err.Error(), "user") {
					t.Errorf("%s with user scope %q: err = %v, want a refusal naming the resource", res, users, err)
				}
			}
		}
	})

	t.Run("invalid user id", func(t *testing.T) {
		t.Parallel()
		pool := pgtest.DB(t)
		_, err := tombstone(t, pool, params([]string{"bad\x00id"}, 0))
		if err == nil || !strings.Contains(err.Error(), "user id") {
			t.Fatalf("err = %v, want a refusal of the user id", err)
		}
	})
}
