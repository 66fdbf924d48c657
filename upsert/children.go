package upsert

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/tidemarkhq/tidemark/schema"
)

// childSQL is the pair of statements that bring one child table (an
// invoice's line items) in line with its parents' stored content: the lines
// of a parent whose content changed since they were taken (or that is
// deleted) go, then the lines of each live parent that has none taken from
// its current content are derived from its raw. Both select parents by the
// page's ids, so a re-delivered page matches no row and writes nothing.
type childSQL struct{ name, clear, fill, clearDeleted string }

// childStatements builds, from the declaration only, the SQL of def's
// children. The declared column paths are read with #>> and cast to the
// declared types: the provider's decoder validated each line before the
// parent was written, so a cast cannot fail on good input.
func childStatements(def *schema.Table) []childSQL {
	var out []childSQL
	for _, c := range def.Children {
		cols := []string{"source", c.ParentColumn, "id"}
		vals := []string{"p.source", "p.id", "li->>'id'"}
		for _, col := range c.Columns {
			cols = append(cols, col.Name)
			path := "{" + strings.ReplaceAll(col.Path, ".", ",") + "}"
			v := fmt.Sprintf("(li #>> '%s')::%s", path, col.Type)
			if col.Type == schema.JSONB {
				v = fmt.Sprintf("(li #> '%s')", path)
			}
			if col.EmptyIsNull {
				v = fmt.Sprintf("nullif(%s, '')", v)
			}
			vals = append(vals, v)
		}
		cols = append(cols, "raw", "parent_hash")
		vals = append(vals, "li", "p.content_hash")
		out = append(out, childSQL{
			name: string(c.Name),
			clearDeleted: fmt.Sprintf(`DELETE FROM %[1]s c USING %[2]s p
WHERE p.source = $1 AND p.deleted_at IS NOT NULL AND c.source = p.source AND c.%[3]s = p.id`, c.Name, def.Name, c.ParentColumn),
			clear: fmt.Sprintf(`DELETE FROM %[1]s c USING %[2]s p
WHERE p.source = $1 AND p.id = ANY($2) AND c.source = p.source AND c.%[3]s = p.id
  AND (c.parent_hash <> p.content_hash OR p.deleted_at IS NOT NULL)`, c.Name, def.Name, c.ParentColumn),
			fill: fmt.Sprintf(`INSERT INTO %[1]s (%[4]s)
SELECT %[5]s
FROM %[2]s p CROSS JOIN LATERAL jsonb_array_elements(
       CASE jsonb_typeof(p.raw->'%[6]s') WHEN 'array' THEN p.raw->'%[6]s' ELSE '[]'::jsonb END) li
WHERE p.source = $1 AND p.id = ANY($2) AND p.deleted_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM %[1]s c WHERE c.source = p.source AND c.%[3]s = p.id AND c.parent_hash = p.content_hash)
ON CONFLICT (source, %[3]s, id) DO NOTHING`, c.Name, def.Name, c.ParentColumn, strings.Join(cols, ", "), strings.Join(vals, ", "), c.Path),
		})
	}
	return out
}

// syncChildren replaces the children of the given parents where their
// content changed, in the caller's transaction (the parent's write).
func syncChildren(ctx context.Context, tx pgx.Tx, t *table, source string, ids []string) error {
	if len(t.children) == 0 || len(ids) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, c := range t.children {
		b.Queue(c.clear, source, ids)
		b.Queue(c.fill, source, ids)
	}
	br := tx.SendBatch(ctx, b)
	for _, c := range t.children {
		for range 2 {
			if _, err := br.Exec(); err != nil {
				_ = br.Close()
				return fmt.Errorf("lines %s: %w", c.name, err)
			}
		}
	}
	return br.Close()
}

// clearDeletedChildren deletes the lines of the source's tombstoned parents
// (after a reconcile marked some), in the caller's transaction.
func clearDeletedChildren(ctx context.Context, tx pgx.Tx, t *table, source string) error {
	for _, c := range t.children {
		if _, err := tx.Exec(ctx, c.clearDeleted, source); err != nil {
			return fmt.Errorf("lines %s: %w", c.name, err)
		}
	}
	return nil
}
