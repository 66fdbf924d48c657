package pgtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestDatabasesAreIsolated also reports the suite's fixed start-up cost (the
// first database includes starting the cluster and building the template)
// and the cost of each further database.
func TestDatabasesAreIsolated(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	a := pgtest.DB(t)
	first := time.Since(start)
	start = time.Now()
	b := pgtest.DB(t)
	next := time.Since(start)
	t.Logf("first database (cluster start + template): %v; next database: %v", first, next)

	if _, err := a.Exec(ctx, `INSERT INTO cursors (source, resource) VALUES ('s', 'r')`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.QueryRow(ctx, `SELECT count(*) FROM cursors`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("second database sees %d rows of the first", n)
	}
}
