package upsert

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
)

// Issue 23, item 9: a typed column derived from outside the raw record (a
// Clockify entry's client from its project, its day from its user's zone)
// is content: the same raw under the same version with another derived
// value rewrites the row; the same derived value again writes nothing; a
// record with nothing derived keeps the hash of its raw alone.
func TestDerivedValuesAreContent(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	rec := with(entry(1, t0, t0.Add(time.Minute), "a"), "client_id", "c1")
	rec.Derived = []byte("client=c1")
	if c := applyTx(t, pool, []clients.Record{rec}); c.Inserted != 1 {
		t.Fatalf("first apply: %+v", c)
	}
	moved := with(rec, "client_id", "c2") // the project moved to another client
	moved.Derived = []byte("client=c2")
	moved.FetchedAt = t0.Add(2 * time.Minute)
	if c := applyTx(t, pool, []clients.Record{moved}); c.Updated != 1 {
		t.Fatalf("the same raw with another derived client: %+v, want it rewritten", c)
	}
	var client string
	if err := pool.QueryRow(context.Background(), `SELECT client_id FROM time_entries WHERE source = $1 AND id = '1'`, testSource).Scan(&client); err != nil || client != "c2" {
		t.Fatalf("client_id %q, %v; want c2", client, err)
	}
	again := moved
	again.FetchedAt = t0.Add(3 * time.Minute)
	if c := applyTx(t, pool, []clients.Record{again}); c.Unchanged != 1 {
		t.Fatalf("a re-delivery: %+v, want unchanged", c)
	}
	plain := entry(2, t0, t0.Add(time.Minute), "a")
	applyTx(t, pool, []clients.Record{plain})
	if r, _ := readRow(t, pool, "2"); !bytes.Equal(r.Hash, hashOf(t, plain)) {
		t.Fatalf("a record with nothing derived: hash %x, want its raw's %x", r.Hash, hashOf(t, plain))
	}
}
