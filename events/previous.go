package events

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tidemarkhq/tidemark/schema"
)

// Previous returns, for an updated event of a resource with history on
// (issue 32), the typed columns its change changed and their values before
// it, as Stripe's previous_attributes: read from the history, whose version
// of the change (same record, version and content) follows the previous
// one. The change feed stores no values; the history is the record of them.
// It returns nil for another kind of event, a resource without history, or
// a previous version retention pruned.
func (e Event) Previous(ctx context.Context, q Querier) (map[string]json.RawMessage, error) {
	if e.Kind != Updated {
		return nil, nil
	}
	t, ok := schema.Lookup(e.Resource)
	if !ok {
		return nil, fmt.Errorf("event %s: unknown resource %q", e.ID, e.Resource)
	}
	hash, err := hex.DecodeString(e.Hash)
	if err != nil {
		return nil, fmt.Errorf("event %s: content hash: %w", e.ID, err)
	}
	var cols []string
	for _, c := range t.Columns {
		cols = append(cols, c.Name)
	}
	// A change and the version before it are both in the store (neither
	// is a first version still in its mirror row); a history from before
	// the store is the table named as its view is now.
	var table *string
	err = q.QueryRow(ctx, `SELECT coalesce(to_regclass($1), to_regclass($2))::text`,
		string(t.Name)+"_history_store", string(t.Name)+"_history").Scan(&table)
	if err != nil || table == nil {
		return nil, err
	}
	var prev map[string]json.RawMessage
	err = q.QueryRow(ctx, fmt.Sprintf(previousSQL, pgx.Identifier{*table}.Sanitize()),
		e.Source, e.RecordID, e.Version, hash, cols).Scan(&prev)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("event %s: previous values: %w", e.ID, err)
	}
	return prev, nil
}

// Querier is what Previous reads through: a transaction, a connection or a
// pool.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// previousSQL: the change's version and the one before it, as JSON, and
// the typed columns ($5) whose values differ. The latest matching version
// is the change's (a record back at an older state has a later seq).
const previousSQL = `WITH cur AS (
  SELECT c.* FROM %[1]s c
  WHERE c.source = $1 AND c.id = $2 AND c.updated_at = $3 AND c.content_hash = $4 AND c.prev_seq IS NOT NULL
  ORDER BY c.seq DESC LIMIT 1
)
SELECT coalesce(jsonb_object_agg(k.col, to_jsonb(p) -> k.col) FILTER (WHERE to_jsonb(p) -> k.col IS DISTINCT FROM to_jsonb(cur) -> k.col), '{}')
FROM cur JOIN %[1]s p ON p.source = cur.source AND p.id = cur.id AND p.seq = cur.prev_seq
CROSS JOIN unnest($5::text[]) AS k(col)
GROUP BY cur.seq`
