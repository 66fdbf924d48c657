// Package verify compares a mirror table with the ground truth of a source
// (the simulated tracker's): the check behind the demo's "in sync" line and
// the end-to-end tests.
package verify

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/schema"
)

// Report is the outcome of a comparison.
type Report struct {
	Source, Resource string
	Live             int // live records at the source
	Missing          int // live at the source, absent or tombstoned in the mirror
	Stale            int // mirror holds an older version than the source
	Ahead            int // mirror holds a newer version than the source (a regression elsewhere)
	Undeleted        int // deleted at the source, still live in the mirror
	Pending          int // changed at the source after AsOf: not expected yet
	// InOverlap counts records missing or stale in the mirror whose version
	// lies within the overlap before AsOf: late-visible writes (or a write
	// in the high water's own second) that the next pass's window, which
	// starts at AsOf minus the overlap, is designed to fetch. Not a
	// divergence.
	InOverlap int
	Examples  []string
}

// InSync reports whether the mirror equals the source.
func (r Report) InSync() bool { return r.Missing+r.Stale+r.Ahead+r.Undeleted == 0 }

func (r Report) String() string {
	state := "in sync"
	if !r.InSync() {
		state = "NOT in sync"
	}
	return fmt.Sprintf("%s/%s %s: %d live, %d missing, %d stale, %d ahead, %d deleted at source but live here",
		r.Source, r.Resource, state, r.Live, r.Missing, r.Stale, r.Ahead, r.Undeleted)
}

// Compare compares the mirror of (source, resource) with truth: live id →
// the source's version. With a non-zero asOf (e.g. the cursor's high water),
// records the source changed after it are counted as pending, not checked.
func Compare(ctx context.Context, pool *pgxpool.Pool, source string, r clients.Resource, truth map[string]time.Time, asOf time.Time) (Report, error) {
	return CompareOverlap(ctx, pool, source, r, truth, asOf, 0)
}

// CompareOverlap is Compare that counts what the next pass's overlap still
// covers (versions after asOf minus overlap) as InOverlap instead of
// missing or stale: the demo turns a line red only for a divergence the
// design does not explain.
func CompareOverlap(ctx context.Context, pool *pgxpool.Pool, source string, r clients.Resource, truth map[string]time.Time, asOf time.Time, overlap time.Duration) (Report, error) {
	// The table is a registered declaration's (package schema), never
	// built from input.
	t, ok := schema.Lookup(r)
	if !ok {
		return Report{}, fmt.Errorf("unknown resource %q", r)
	}
	rows, err := pool.Query(ctx, "SELECT id, updated_at, deleted_at IS NOT NULL FROM "+pgx.Identifier{string(t.Name)}.Sanitize()+" WHERE source = $1", source)
	if err != nil {
		return Report{}, err
	}
	type stored struct {
		v       time.Time
		deleted bool
	}
	mirror := map[string]stored{}
	for rows.Next() {
		var id string
		var s stored
		if err := rows.Scan(&id, &s.v, &s.deleted); err != nil {
			return Report{}, err
		}
		mirror[id] = s
	}
	if err := rows.Err(); err != nil {
		return Report{}, err
	}
	rep := Report{Source: source, Resource: string(r), Live: len(truth)}
	note := func(format string, args ...any) {
		if len(rep.Examples) < 5 {
			rep.Examples = append(rep.Examples, fmt.Sprintf(format, args...))
		}
	}
	for id, v := range truth {
		m, ok := mirror[id]
		switch {
		case !asOf.IsZero() && v.After(asOf):
			rep.Pending++
		case overlap > 0 && v.After(asOf.Add(-overlap)) && (!ok || m.deleted || m.v.Before(v)):
			rep.InOverlap++
		case !ok || m.deleted:
			rep.Missing++
			note("%s missing", id)
		case m.v.Before(v):
			rep.Stale++
			note("%s stale: %v < %v", id, m.v, v)
		case m.v.After(v) && !t.Singleton: // a singleton is versioned by the listing's clock
			rep.Ahead++
			note("%s ahead: %v > %v", id, m.v, v)
		}
	}
	for id, m := range mirror {
		if _, ok := truth[id]; !ok && !m.deleted {
			rep.Undeleted++
			note("%s deleted at source, live here", id)
		}
	}
	return rep, nil
}
