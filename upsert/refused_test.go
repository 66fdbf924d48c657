package upsert

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
)

// Issue 22: a \u0000 in a record's JSON (jsonb and text refuse NUL) failed
// the whole page on every pass. It is stored losslessly: in raw the escape
// is kept as text, in the typed column the character becomes U+FFFD; the
// rest of the page goes in, the record counts as replaced, and a
// re-delivery is unchanged (its hash is the one of the record as sent).
func TestRefusedCharactersStoredLosslessly(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	f := t0.Add(time.Minute)
	withEscape := func(id int64, notes, escape string) clients.Record {
		r := entry(id, t0, f, "a")
		r.Raw = bytes.Replace(harvestJSON(id, t0, "a_X_b", "1.25"), []byte("_X_"), []byte(escape), 1)
		r = with(r, "notes", notes)
		return r
	}
	page := func() []clients.Record {
		return []clients.Record{
			entry(1, t0, f, "a"),
			withEscape(2, "a\x00b", `\u0000`),
			withEscape(3, "a\ufffdb", `\ud800`), // a lone surrogate: Go decodes it as U+FFFD
			withEscape(4, "caf\xe9", `\\u0000`), // a literal backslash: stored as it is
			entry(5, t0, f, "a"),
		}
	}
	c := applyTx(t, pool, page())
	if c.Inserted != 5 || c.Replaced != 3 {
		t.Fatalf("counts %+v, want 5 inserted, 3 replaced", c)
	}
	for id, want := range map[string]struct{ notes, raw string }{
		"2": {"a\ufffdb", `a\u0000b`}, "3": {"a\ufffdb", `a\ud800b`}, "4": {"caf\ufffd", `a\u0000b`},
	} {
		var notes, raw string
		if err := pool.QueryRow(context.Background(), `SELECT notes, raw->>'notes' FROM time_entries WHERE source = $1 AND id = $2`,
			testSource, id).Scan(&notes, &raw); err != nil {
			t.Fatal(err)
		}
		if notes != want.notes || raw != want.raw {
			t.Errorf("entry %s: notes %q, raw notes %q; want %q, %q", id, notes, raw, want.notes, want.raw)
		}
	}
	again := page()
	for i := range again {
		again[i].FetchedAt = f.Add(time.Minute)
	}
	if c := applyTx(t, pool, again); c.Unchanged != 5 || c.Replaced != 0 {
		t.Errorf("re-delivery counts %+v, want 5 unchanged, none written", c)
	}
}

// storable keeps what jsonb takes as it is, and only the refused escapes
// as text.
func TestStorable(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"a":"x\u0000y"}`:                `{"a":"x\\u0000y"}`,
		`{"a":"\\u0000"}`:                 `{"a":"\\u0000"}`,
		`{"a":"\ud83d\ude00"}`:            `{"a":"\ud83d\ude00"}`,
		`{"a":"\ud83d"}`:                  `{"a":"\\ud83d"}`,
		`{"a":"\ude00\ud83d x"}`:          `{"a":"\\ude00\\ud83d x"}`,
		`{"a":"\ud83d\u0000","\u0000":1}`: `{"a":"\\ud83d\\u0000","\\u0000":1}`,
		`{"a":["\"\u0000"]}`:              `{"a":["\"\\u0000"]}`,
	} {
		if got := string(storable([]byte(in))); got != want {
			t.Errorf("storable(%s) = %s, want %s", in, got, want)
		}
	}
}
