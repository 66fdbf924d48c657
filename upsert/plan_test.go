package upsert

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
)

// TestPlansStayLinear: the statements that take a list of ids never go
// quadratic (see linear), under the custom and the generic plan, for a
// 2,000-id list against 20,000 stored rows. Apply's other statements read
// the staging table once, in order, without a join.
func TestPlansStayLinear(t *testing.T) {
	t.Parallel()
	pool := pgtest.DB(t)
	ctx := context.Background()
	for p := range int64(10) {
		applyTx(t, pool, benchRecords(1+p*benchPage, t0, "a"))
	}
	if _, err := pool.Exec(ctx, `ANALYZE time_entries`); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, benchPage)
	for i := range ids {
		ids[i] = fmt.Sprint(5000 + i)
	}
	idArray := "'{" + strings.Join(ids, ",") + "}'"
	te := tables[clients.TimeEntries]
	stmts := []struct {
		name, sql, types, args string
		ok                     func(plan string) string
	}{
		{"lookup", te.lookup, "text, text[]", "'acme', " + idArray, linear},
		{"update typeless", te.updateTypeless, "text, text[], timestamptz[], timestamptz[], bytea[], text[], timestamptz[]",
			"'acme', " + idArray + ", '{}', '{}', '{}', '{}', '{}'", linear},
		{"move forward", te.moveForward, "text, text[], timestamptz[], timestamptz[], bytea[]",
			"'acme', " + idArray + ", '{}', '{}', '{}'", linear},
		{"tombstone missing", te.tombstoneMissing, "text, timestamptz, date, date, text[], bigint, text[], boolean, timestamptz",
			"'acme', '2026-03-02', NULL, NULL, " + idArray + ", 0, NULL, true, '2026-03-03'", linear},
		{"tombstone missing, user scope", te.tombstoneMissing, "text, timestamptz, date, date, text[], bigint, text[], boolean, timestamptz",
			"'acme', '2026-03-02', NULL, NULL, " + idArray + ", 0, '{1782959,1782960}', true, '2026-03-03'", linear},
	}
	// The check itself catches a bad plan: the lookup without its index.
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, q := range []string{"SET LOCAL plan_cache_mode = force_generic_plan", "SET LOCAL enable_indexscan = off",
			"SET LOCAL enable_bitmapscan = off", "PREPARE p (text, text[]) AS " + te.lookup} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		defer tx.Exec(ctx, "DEALLOCATE p")
		var plan string
		if err := tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) EXECUTE p ('acme', "+idArray+")").Scan(&plan); err != nil {
			return err
		}
		if linear(plan) == "" {
			t.Errorf("a sequential scan testing every row against the array was not caught: %s", compact(plan))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range stmts {
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = "+mode); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, "PREPARE p ("+st.types+") AS "+st.sql); err != nil {
					return err
				}
				defer tx.Exec(ctx, "DEALLOCATE p")
				var plan string
				if err := tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) EXECUTE p ("+st.args+")").Scan(&plan); err != nil {
					return err
				}
				if why := st.ok(plan); why != "" {
					t.Errorf("%s (%s): %s\n%s", st.name, mode, why, compact(plan))
				}
				return nil
			})
			if err != nil {
				t.Fatalf("%s (%s): %v", st.name, mode, err)
			}
		}
	}
}

type planNode struct {
	NodeType string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Parent   string     `json:"Parent Relationship"`
	Filter   string     `json:"Filter"`
	Plans    []planNode `json:"Plans"`
}

func walk(plan string, fn func(n, parent *planNode) string) string {
	var root []struct{ Plan planNode }
	if err := json.Unmarshal([]byte(plan), &root); err != nil || len(root) == 0 {
		return fmt.Sprintf("cannot read plan: %v", err)
	}
	var visit func(n, parent *planNode) string
	visit = func(n, parent *planNode) string {
		if why := fn(n, parent); why != "" {
			return why
		}
		for i := range n.Plans {
			if why := visit(&n.Plans[i], n); why != "" {
				return why
			}
		}
		return ""
	}
	return visit(&root[0].Plan, nil)
}

// linear reports a plan shape whose cost grows with page size times table
// size: a nested loop whose inner side scans a whole relation or the id list
// again for every outer row, or a scan that tests every row against an
// unhashed array parameter. (A sequential scan that hashes its side is fine.)
func linear(plan string) string {
	return walk(plan, func(n, parent *planNode) string {
		if n.NodeType == "Seq Scan" && strings.Contains(n.Filter, "ANY ($") {
			return "every row tested against the whole id array"
		}
		if parent == nil || parent.NodeType != "Nested Loop" || n.Parent != "Inner" {
			return ""
		}
		inner := n
		if inner.NodeType == "Materialize" && len(inner.Plans) == 1 {
			inner = &inner.Plans[0]
		}
		switch inner.NodeType {
		case "Seq Scan", "Function Scan", "CTE Scan":
			return "nested loop over a full scan (" + inner.NodeType + ")"
		}
		return ""
	})
}

func compact(plan string) string {
	var v any
	if json.Unmarshal([]byte(plan), &v) != nil {
		return plan
	}
	b, _ := json.Marshal(v)
	return string(b)
}
