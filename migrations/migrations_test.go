package migrations_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/pressly/goose/v3"

	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestUpOnEmptyThenNoop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.EmptyURL(t)

	res, err := migrations.Up(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Applied) == 0 || res.Version != res.Applied[len(res.Applied)-1] {
		t.Fatalf("first Up applied %v, version %d", res.Applied, res.Version)
	}
	again, err := migrations.Up(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Applied) != 0 || again.Version != res.Version {
		t.Fatalf("second Up applied %v (version %d), want nothing", again.Applied, again.Version)
	}

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, table := range []string{"time_entries", "projects", "clients", "users", "tasks", "cursors", "sync_runs", "backfills"} {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public' AND table_name = $1`, table).Scan(&n); err != nil || n != 1 {
			t.Errorf("table %s: found %d (%v)", table, n, err)
		}
	}
	// Every column of the resource tables is documented for downstream users.
	rows, err := conn.Query(ctx, `
		SELECT c.table_name, c.column_name FROM information_schema.columns c
		WHERE c.table_schema = 'public' AND c.table_name IN ('time_entries','projects','clients','users','tasks','cursors')
		  AND col_description(format('%I', c.table_name)::regclass, c.ordinal_position) IS NULL`)
	if err != nil {
		t.Fatal(err)
	}
	undocumented, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var tbl, col string
		err := r.Scan(&tbl, &col)
		return tbl + "." + col, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(undocumented) > 0 {
		t.Errorf("columns without COMMENT ON: %v", undocumented)
	}
}

// TestDownReversesUp: the migrations leave no helper behind (their pg_temp
// functions are dropped within them), Down to version 0 removes everything
// Up made but goose's own table, and Up runs again after it.
func TestDownReversesUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := sql.Open("pgx", pgtest.EmptyURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.Files,
		goose.WithTableName(migrations.VersionTable), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	count := func(query string) int {
		t.Helper()
		var n int
		if err := db.QueryRowContext(ctx, query).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	const leftover = `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relname NOT LIKE '` + migrations.VersionTable + `%'`

	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(leftover); n == 0 {
		t.Fatal("Up made nothing")
	}
	if _, err := p.DownTo(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if n := count(leftover); n != 0 {
		t.Errorf("Down to 0 left %d relations in public", n)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("Up after Down: %v", err)
	}
}

func TestConcurrentUpBothSucceedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.EmptyURL(t)

	const n = 4
	results := make([]migrations.Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = migrations.Up(ctx, url)
		}()
	}
	wg.Wait()
	applied := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("migrate %d: %v", i, errs[i])
		}
		applied += len(results[i].Applied)
		if results[i].Version != results[0].Version {
			t.Errorf("versions differ: %d vs %d", results[i].Version, results[0].Version)
		}
	}
	if applied != len(mustList(t)) {
		t.Fatalf("migrations applied %d times in all, want each once (%d)", applied, len(mustList(t)))
	}
}

func mustList(t *testing.T) []string {
	entries, err := migrations.Files.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// Owns knows the tables of the migrated schema, River's, and no other.
func TestOwnsTheMigratedTables(t *testing.T) {
	for _, name := range []string{"time_entries", "cursors", "source_memos", "retired_sources", migrations.VersionTable, "river_job"} {
		if !migrations.Owns(name) {
			t.Errorf("Owns(%q) = false", name)
		}
	}
	if migrations.Owns("crm_contacts") || migrations.Owns("") {
		t.Error("Owns a table no migration creates")
	}
}
