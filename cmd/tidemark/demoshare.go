package main

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/configs"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/migrations"
	"github.com/tidemarkhq/tidemark/schema"
)

// The demo on a database it did not create (issue 25): it must not join a
// fleet there nor mix its rows with a real source's.

// demoSources names the demo's sources (configs/simulated.yaml).
func demoSources() string {
	cfg, err := config.Parse("configs/simulated.yaml", configs.Simulated, func(string) (string, bool) { return "unused", true })
	if err != nil {
		return "demo"
	}
	var names []string
	for _, s := range cfg.Sources {
		names = append(names, s.Name)
	}
	return strings.Join(names, ", ")
}

// dbLabel names a database without its password: host, port and name.
func dbLabel(dbURL string) string {
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		if u, err := url.Parse(dbURL); err == nil {
			return u.Host + u.Path
		}
		return "DATABASE_URL"
	}
	return fmt.Sprintf("%s:%d/%s", cfg.Host, cfg.Port, cfg.Database)
}

// demoMayUse refuses (exit 2) a database that holds sources other than
// the demo's or live tidemark daemons, unless shared.
func demoMayUse(ctx context.Context, dbURL string, shared bool) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("database in DATABASE_URL: %w", err)
	}
	defer conn.Close(ctx)
	var others, members []string
	var hasCursors, hasMembers bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('cursors') IS NOT NULL, to_regclass('fleet_members') IS NOT NULL`).Scan(&hasCursors, &hasMembers); err != nil {
		return fmt.Errorf("database in DATABASE_URL: %w", err)
	}
	mine := strings.Split(demoSources(), ", ")
	if hasCursors {
		rows, _ := conn.Query(ctx, `SELECT DISTINCT source FROM cursors WHERE NOT source = ANY($1) ORDER BY 1`, mine)
		if others, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return fmt.Errorf("database in DATABASE_URL: its sources: %w", err)
		}
	}
	if hasMembers {
		rows, _ := conn.Query(ctx, `SELECT m.id FROM fleet_members m
JOIN pg_stat_activity a ON a.pid = m.lease_pid AND a.backend_start = m.lease_started ORDER BY 1`)
		if members, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return fmt.Errorf("database in DATABASE_URL: its fleet members: %w", err)
		}
	}
	if len(others) == 0 && len(members) == 0 || shared {
		return nil
	}
	var why []string
	if len(others) > 0 {
		why = append(why, fmt.Sprintf("it holds other sources (%s)", strings.Join(others, ", ")))
	}
	if len(members) > 0 {
		why = append(why, fmt.Sprintf("tidemark daemons run on it (%s)", strings.Join(members, ", ")))
	}
	return usagef("refusing to run the demo on %s: %s; the demo would write its rows beside theirs. "+
		"Run it without --use-database-url (a throwaway PostgreSQL of its own), point DATABASE_URL at an empty database, "+
		"or pass --allow-shared-database to run there anyway", dbLabel(dbURL), strings.Join(why, " and "))
}

// removeDemoRows deletes every row of the demo's sources from Tidemark's
// own tables that have a source column (tidemarkTable), in one
// transaction; it returns how many.
func removeDemoRows(ctx context.Context, dbURL string) (int64, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	rows, _ := conn.Query(ctx, `SELECT c.table_name FROM information_schema.columns c
JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name AND t.table_type = 'BASE TABLE'
WHERE c.table_schema = current_schema() AND c.column_name = 'source' ORDER BY 1`)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, err
	}
	mine := strings.Split(demoSources(), ", ")
	var n int64
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, t := range slices.Compact(tables) {
			if !tidemarkTable(t) {
				continue // another application's: never touched
			}
			tag, err := tx.Exec(ctx, fmt.Sprintf(`DELETE FROM %s WHERE source = ANY($1)`, pgx.Identifier{t}.Sanitize()), mine)
			if err != nil {
				return fmt.Errorf("table %s: %w", t, err)
			}
			n += tag.RowsAffected()
		}
		return nil
	})
	return n, err
}

// tidemarkTable reports whether Tidemark's schema declares table: a
// migration creates it, River's, or a resource of the registry.
func tidemarkTable(table string) bool {
	if migrations.Owns(table) {
		return true
	}
	// A resource's history (upsert.HistoryTable, a view; its store,
	// upsert.HistoryStore) is declared from it.
	base, found := strings.CutSuffix(table, "_history_store")
	if !found {
		base, _ = strings.CutSuffix(table, "_history")
	}
	_, ok := schema.Lookup(clients.Resource(base))
	return ok
}

// demoMayShare refuses (exit 2) a database holding tables Tidemark's
// schema does not declare, unless foreign: the demo deletes only from its
// own tables, but a database of another application's is not one to write
// a demo into by mistake.
func demoMayShare(ctx context.Context, dbURL string, foreign bool) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("database in DATABASE_URL: %w", err)
	}
	defer conn.Close(ctx)
	rows, _ := conn.Query(ctx, `SELECT table_name FROM information_schema.tables
WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY 1`)
	all, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("database in DATABASE_URL: its tables: %w", err)
	}
	var unknown []string
	for _, t := range all {
		if !tidemarkTable(t) {
			unknown = append(unknown, t)
		}
	}
	if len(unknown) == 0 || foreign {
		return nil
	}
	return usagef("refusing to run the demo on %s: it has tables Tidemark's schema does not declare (%s), so it looks like another application's database. "+
		"Run the demo without --use-database-url (a throwaway PostgreSQL of its own), point DATABASE_URL at Tidemark's database, "+
		"or pass --allow-foreign-tables to run there anyway (the demo writes and removes rows in Tidemark's own tables only)", dbLabel(dbURL), strings.Join(unknown, ", "))
}
