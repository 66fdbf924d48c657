package cursor

import (
	"context"
	"fmt"
)

// KnownSources names the sources the database has cursors of, less those
// retired (`tidemark cursor retire`), sorted.
func (s *Store) KnownSources(ctx context.Context) ([]string, error) {
	rows, err := s.db.Query(ctx, `
SELECT DISTINCT c.source FROM cursors c
WHERE NOT EXISTS (SELECT 1 FROM retired_sources r WHERE r.source = c.source)
ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("known sources: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("known sources: %w", err)
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// Retired names the retired sources.
func (s *Store) Retired(ctx context.Context) (map[string]bool, error) {
	rows, err := s.db.Query(ctx, `SELECT source FROM retired_sources`)
	if err != nil {
		return nil, fmt.Errorf("retired sources: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("retired sources: %w", err)
		}
		out[n] = true
	}
	return out, rows.Err()
}

// Retire drops a source from the view (its rows and cursors stay); false
// when the database knows nothing of it.
func (s *Store) Retire(ctx context.Context, source, actor string) (bool, error) {
	tag, err := s.db.Exec(ctx, `
INSERT INTO retired_sources (source, retired_by)
SELECT $1, $2 WHERE EXISTS (SELECT 1 FROM cursors WHERE source = $1)
ON CONFLICT (source) DO UPDATE SET retired_at = now(), retired_by = EXCLUDED.retired_by`, source, actor)
	if err != nil {
		return false, fmt.Errorf("retire source %s: %w", source, err)
	}
	return tag.RowsAffected() > 0, nil
}

// Unretire brings names back into the view: a retired source configured
// again on a live replica shows again and, dropped again, is counted as
// not served again (issue 30, 5). It returns the names it brought back.
func (s *Store) Unretire(ctx context.Context, names []string) ([]string, error) {
	rows, err := s.db.Query(ctx, `DELETE FROM retired_sources WHERE source = ANY($1) RETURNING source`, names)
	if err != nil {
		return nil, fmt.Errorf("unretire sources: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("unretire sources: %w", err)
		}
		out = append(out, n)
	}
	return out, rows.Err()
}
