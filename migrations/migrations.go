// Package migrations owns the SQL schema: numbered migration files, embedded
// in the binary and applied by goose under a Postgres advisory lock, so two
// processes migrating at once both succeed and the schema is applied once.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for goose
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// Files holds the migration files.
//
//go:embed *.sql
var Files embed.FS

// VersionTable is where goose records applied migrations.
const VersionTable = "tidemark_schema_version"

// lockID is the advisory lock key taken while migrating ("tidemark" in ASCII).
const lockID int64 = 0x7469_6465_6d61_726b

// Result reports what Up did.
type Result struct {
	Applied []int64 // versions applied by this call
	Version int64   // schema version afterwards
}

// Up applies every pending migration to the database at url.
func Up(ctx context.Context, url string) (Result, error) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return Result{}, fmt.Errorf("open database: %w", err)
	}
	defer db.Close()
	res, err := UpDB(ctx, db)
	if err != nil {
		return res, err
	}
	return res, upRiver(ctx, url)
}

// UpDB applies every pending migration through db.
func UpDB(ctx context.Context, db *sql.DB) (Result, error) {
	p, err := provider(db)
	if err != nil {
		return Result{}, err
	}
	rs, err := p.Up(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("migrate: %w", err)
	}
	var res Result
	for _, r := range rs {
		res.Applied = append(res.Applied, r.Source.Version)
	}
	res.Version, err = p.GetDBVersion(ctx)
	if err != nil {
		return res, fmt.Errorf("read schema version: %w", err)
	}
	return res, nil
}

func provider(db *sql.DB) (*goose.Provider, error) {
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(lockID), lock.WithLockTimeout(1, 600))
	if err != nil {
		return nil, err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, Files,
		goose.WithSessionLocker(locker),
		goose.WithTableName(VersionTable),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	return p, nil
}
