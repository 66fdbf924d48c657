package upsert

import (
	"bytes"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
)

// TestWriteRule has one case per row of the write-rule table in DESIGN.md,
// plus the edges between rows.
func TestWriteRule(t *testing.T) {
	t.Parallel()
	v1, v2 := t0, t0.Add(time.Second)
	f1, f2 := t0.Add(time.Minute), t0.Add(2*time.Minute)
	cases := []struct {
		name     string
		stored   *clients.Record // nil: no stored row
		incoming clients.Record
		want     Counts
		wins     string // "incoming" or "stored"
	}{
		{"no stored row: insert", nil, entry(1, v1, f1, "a"), Counts{Inserted: 1}, "incoming"},
		{"newer, content differs: update", ptr(entry(1, v1, f1, "a")), entry(1, v2, f2, "b"), Counts{Updated: 1}, "incoming"},
		{"same content: nothing", ptr(entry(1, v1, f1, "a")), entry(1, v1, f1, "a"), Counts{Unchanged: 1}, "stored"},
		{"same content fetched later: nothing", ptr(entry(1, v1, f1, "a")), entry(1, v1, f2, "a"), Counts{Unchanged: 1}, "stored"},
		{"newer version, same content: the version moves forward", ptr(unstamped(1, v1, f1, "a")), unstamped(1, v2, f2, "a"), Counts{Unchanged: 1}, "incoming"},
		{"newer version, same content, fetched earlier: the version moves forward", ptr(unstamped(1, v1, f2, "a")), unstamped(1, v2, f1, "a"), Counts{Unchanged: 1}, "incoming"},
		{"older version, same content: nothing", ptr(unstamped(1, v2, f1, "a")), unstamped(1, v1, f2, "a"), Counts{Unchanged: 1}, "stored"},
		{"older: nothing", ptr(entry(1, v2, f2, "b")), entry(1, v1, f1, "a"), Counts{Stale: 1}, "stored"},
		{"older version fetched later: nothing", ptr(entry(1, v2, f1, "b")), entry(1, v1, f2, "a"), Counts{Stale: 1}, "stored"},
		{"same version, content differs, fetched later: update (tie)", ptr(entry(1, v1, f1, "a")), entry(1, v1, f2, "b"), Counts{Updated: 1, Ties: 1}, "incoming"},
		{"same version, content differs, fetched earlier: stale", ptr(entry(1, v1, f2, "b")), entry(1, v1, f1, "a"), Counts{Stale: 1}, "stored"},
		{"same version and fetch time, content differs: stale", ptr(entry(1, v1, f1, "a")), entry(1, v1, f1, "b"), Counts{Stale: 1}, "stored"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := pgtest.DB(t)
			var before rowState
			if tc.stored != nil {
				applyTx(t, pool, []clients.Record{*tc.stored})
				before, _ = readRow(t, pool, tc.stored.ID)
				time.Sleep(2 * time.Millisecond) // a second transaction's now() differs
			}
			got := applyTx(t, pool, []clients.Record{tc.incoming})
			if got != tc.want {
				t.Fatalf("counts = %+v, want %+v", got, tc.want)
			}
			after, ok := readRow(t, pool, tc.incoming.ID)
			if !ok {
				t.Fatal("row missing")
			}
			want := tc.incoming
			if tc.wins == "stored" {
				want = *tc.stored
			}
			if !after.UpdatedAt.Equal(want.Version) || !bytes.Equal(after.Hash, hashOf(t, want)) || *after.Notes != notes(want) {
				t.Errorf("row = (%v, %v, notes %q), want the %s record (%v, notes %q)", after.UpdatedAt, after.FetchedAt, *after.Notes, tc.wins, want.Version, notes(want))
			}
			if tc.stored == nil {
				if after.FirstSeenAt.IsZero() || after.Hours != "1.25" || after.UserID != "1782959" {
					t.Errorf("inserted row = %+v", after)
				}
				return
			}
			if !after.FirstSeenAt.Equal(before.FirstSeenAt) {
				t.Errorf("first_seen_at changed: %v -> %v", before.FirstSeenAt, after.FirstSeenAt)
			}
			if tc.wins == "stored" {
				// xmin changes with a write, xmax with a row lock.
				if after.Xmin != before.Xmin || after.Xmax != before.Xmax || !after.FetchedAt.Equal(before.FetchedAt) {
					t.Errorf("row was written or locked (xmin %d -> %d, xmax %d -> %d, fetched_at %v -> %v), want neither", before.Xmin, after.Xmin, before.Xmax, after.Xmax, before.FetchedAt, after.FetchedAt)
				}
			} else if !after.FetchedAt.Equal(want.FetchedAt) {
				t.Errorf("fetched_at = %v, want %v", after.FetchedAt, want.FetchedAt)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
