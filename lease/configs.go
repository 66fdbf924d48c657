package lease

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Of two members with different configs of one source, the newer config
// serves it (Servers). "Newer" is per source config: when that config first
// appeared in the fleet (table source_configs). A member's load time would
// not do: a reload for another source or a restart bumps it for all its
// sources, and a replica holding an older config of s took s back.

// configKey is one config of one source.
type configKey struct{ source, fingerprint string }

// execer runs a statement (a pgx connection, pool or transaction).
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// recordConfigs notes each of srcs' configs not seen before, stamped now;
// one already known keeps its first time. It runs when a member's sources
// change or its session is new, not every heartbeat.
func recordConfigs(ctx context.Context, db execer, srcs map[string]string) error {
	if len(srcs) == 0 {
		return nil
	}
	names, fps := make([]string, 0, len(srcs)), make([]string, 0, len(srcs))
	for name, fp := range srcs {
		names, fps = append(names, name), append(fps, fp)
	}
	_, err := db.Exec(ctx, `INSERT INTO source_configs (source, fingerprint)
SELECT * FROM unnest($1::text[], $2::text[]) ON CONFLICT DO NOTHING`, names, fps)
	return err
}

// configSince sets each peer's SourceSince for the sources whose configs
// differ between peers (the only ones Servers compares), from cache or the
// database; cache keeps the answers, which never change (first_seen_at is
// written once). A config not recorded (a member older than the table)
// gets no time: its member's ConfigAt stands in.
func configSince(ctx context.Context, q Queryer, peers []Peer, cache map[configKey]time.Time) error {
	first := map[string]string{}
	differ := map[string]bool{}
	for _, p := range peers {
		for name, fp := range p.Sources {
			if f, ok := first[name]; !ok {
				first[name] = fp
			} else if f != fp {
				differ[name] = true
			}
		}
	}
	if len(differ) == 0 {
		return nil
	}
	var names, fps []string
	for _, p := range peers {
		for name := range differ {
			fp, ok := p.Sources[name]
			if _, known := cache[configKey{name, fp}]; ok && !known {
				names, fps = append(names, name), append(fps, fp)
			}
		}
	}
	if len(names) > 0 {
		if err := readSince(ctx, q, names, fps, cache); err != nil {
			return err
		}
	}
	for i := range peers {
		for name := range differ {
			fp, ok := peers[i].Sources[name]
			if at, known := cache[configKey{name, fp}]; ok && known {
				if peers[i].SourceSince == nil {
					peers[i].SourceSince = map[string]time.Time{}
				}
				peers[i].SourceSince[name] = at
			}
		}
	}
	return nil
}

// readSince reads when the configs named first appeared into cache.
func readSince(ctx context.Context, q Queryer, names, fps []string, cache map[configKey]time.Time) error {
	rows, err := q.Query(ctx, `SELECT c.source, c.fingerprint, c.first_seen_at FROM source_configs c
JOIN unnest($1::text[], $2::text[]) AS k(source, fingerprint) USING (source, fingerprint)`, names, fps)
	if err != nil {
		return fmt.Errorf("when the sources' configs appeared: %w", err)
	}
	var k configKey
	var at time.Time
	_, err = pgx.ForEachRow(rows, []any{&k.source, &k.fingerprint, &at}, func() error {
		cache[k] = at
		return nil
	})
	if err != nil {
		return fmt.Errorf("when the sources' configs appeared: %w", err)
	}
	return nil
}
