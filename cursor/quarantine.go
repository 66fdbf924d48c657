package cursor

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Quarantined is a record a pass could not store (record_quarantine).
type Quarantined struct {
	Source, Resource, ID string
	Version              time.Time // zero when the record had none
	Raw, Error           string
	FirstFailed          time.Time
	LastFailed           time.Time
	Failures             int
	LastRunID            string
}

const sqlQuarantine = `
INSERT INTO record_quarantine (source, resource, id, version, raw, error, last_run_id)
SELECT $1, $2, q.id, q.version, q.raw, q.error, $3
FROM unnest($4::text[], $5::timestamptz[], $6::text[], $7::text[]) AS q(id, version, raw, error)
ON CONFLICT (source, resource, id) DO UPDATE
SET version = EXCLUDED.version, raw = EXCLUDED.raw, error = EXCLUDED.error, last_failed_at = now(),
    failures = record_quarantine.failures + 1, last_run_id = EXCLUDED.last_run_id`

// Quarantine puts records of source/resource that run could not store in
// record_quarantine (a record already there counts one more failure). Ids
// and raw text Postgres refuses are stored escaped (Printable).
func Quarantine(ctx context.Context, db DB, source, resource, runID string, recs []Quarantined) error {
	if len(recs) == 0 {
		return nil
	}
	ids, raws, errs := make([]string, len(recs)), make([]string, len(recs)), make([]string, len(recs))
	versions := make([]*time.Time, len(recs))
	for i, q := range recs {
		ids[i], raws[i], errs[i] = Printable(q.ID), Printable(q.Raw), Printable(q.Error)
		if !q.Version.IsZero() {
			v := q.Version
			versions[i] = &v
		}
	}
	if _, err := db.Exec(ctx, sqlQuarantine, source, resource, runID, ids, versions, raws, errs); err != nil {
		return fmt.Errorf("quarantine %d records of %s/%s: %w", len(recs), source, resource, err)
	}
	return nil
}

const sqlRelease = `
DELETE FROM record_quarantine
WHERE source = $1 AND resource = $2 AND last_run_id <> $3
  AND (id = ANY($4::text[]) OR ($5::boolean AND (version IS NULL OR version >= $6)))`

// ReleaseParams say which quarantined records of a resource a run saw go
// in or go away.
type ReleaseParams struct {
	Source, Resource, RunID string
	// Stored are ids the run wrote.
	Stored []string
	// Listed, when set, says that the run listed everything changed since
	// Since (an incremental pass): a record quarantined earlier with a
	// version from then on that this run did not quarantine again went in
	// or is no longer listed.
	Listed bool
	Since  time.Time
}

// Release removes what p names from record_quarantine; it returns how many.
func Release(ctx context.Context, db DB, p ReleaseParams) (int64, error) {
	ids := make([]string, len(p.Stored))
	for i, id := range p.Stored {
		ids[i] = Printable(id)
	}
	tag, err := db.Exec(ctx, sqlRelease, p.Source, p.Resource, p.RunID, ids, p.Listed, p.Since)
	if err != nil {
		return 0, fmt.Errorf("release quarantined records of %s/%s: %w", p.Source, p.Resource, err)
	}
	return tag.RowsAffected(), nil
}

const sqlQuarantinedList = `
SELECT source, resource, id, version, raw, error, first_failed_at, last_failed_at, failures, last_run_id
FROM record_quarantine WHERE ($1 = '' OR source = $1) ORDER BY source, resource, first_failed_at, id`

// QuarantinedRecords lists record_quarantine (of one source when source is
// not "").
func (s *Store) QuarantinedRecords(ctx context.Context, source string) ([]Quarantined, error) {
	rows, err := s.db.Query(ctx, sqlQuarantinedList, source)
	if err != nil {
		return nil, fmt.Errorf("list quarantined records: %w", err)
	}
	defer rows.Close()
	var out []Quarantined
	for rows.Next() {
		var q Quarantined
		var v *time.Time
		if err := rows.Scan(&q.Source, &q.Resource, &q.ID, &v, &q.Raw, &q.Error, &q.FirstFailed, &q.LastFailed, &q.Failures, &q.LastRunID); err != nil {
			return nil, fmt.Errorf("list quarantined records: %w", err)
		}
		if v != nil {
			q.Version = v.UTC()
		}
		out = append(out, q)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list quarantined records: %w", err)
	}
	return out, nil
}

// Printable is s as a text column takes it: NUL and bytes that are not
// UTF-8 are shown as Go escapes (\x00), the rest as it is.
func Printable(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1, r == 0:
			b.WriteString(`\x` + strconv.FormatUint(uint64(s[i])|0x100, 16)[1:])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
