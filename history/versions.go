package history

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemarkhq/tidemark/schema"
)

// Version is one version of a record, as `tidemark history --json` prints
// it (a contract: add fields, rename none). Open ends are nil (null).
type Version struct {
	Seq          int64      `json:"seq"`
	PrevSeq      *int64     `json:"prev_seq"`
	Change       string     `json:"change"`
	Deleted      bool       `json:"deleted"`
	ValidFrom    time.Time  `json:"valid_from"`
	ValidTo      *time.Time `json:"valid_to"`
	RecordedFrom time.Time  `json:"recorded_from"`
	RecordedTo   *time.Time `json:"recorded_to"`
	RunID        *string    `json:"run_id"`
	UpdatedAt    time.Time  `json:"updated_at"`
	ContentHash  string     `json:"content_hash"` // hex
	// Values are the typed columns of this version.
	Values Values `json:"values"`
	// Changed are the typed columns that differ from the previous version
	// (empty for the first).
	Changed map[string]Change `json:"changed"`
	// RawChanged: the stored raw differs from the previous version's
	// (resources whose history keeps it: invoices, estimates).
	RawChanged bool `json:"raw_changed,omitempty"`
}

const versionsSQL = `SELECT seq, prev_seq, change, deleted, valid_from, nullif(valid_to, 'infinity'),
  recorded_from, nullif(recorded_to, 'infinity'), run_id, updated_at, content_hash, to_jsonb(h)
FROM %s($1, $2) h`

// Versions returns every version of record id of resource t in source, in
// the order the mirror applied them, each with what changed since the one
// before. No version is a *NotFoundError.
func Versions(ctx context.Context, db DB, source string, t *schema.Table, id string) ([]Version, error) {
	var out []Version
	err := read(ctx, db, source, t, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, fmt.Sprintf(versionsSQL, fn(t, "versions")), source, id)
		if err != nil {
			return err
		}
		var prev row
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Version, error) {
			v, cur, err := scanVersion(r, t)
			if err == nil && prev != nil {
				v.Changed = changed(t, prev.values(t), v.Values)
				v.RawChanged = rawDiffers(prev, cur)
			}
			prev = cur
			return v, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("versions of %s %s: %w", t.Name, id, err)
	}
	if len(out) == 0 {
		return nil, &NotFoundError{Source: source, Resource: t.Name, ID: id}
	}
	return out, nil
}

func scanVersion(r pgx.CollectableRow, t *schema.Table) (Version, row, error) {
	var v Version
	var hash []byte
	var all row
	err := r.Scan(&v.Seq, &v.PrevSeq, &v.Change, &v.Deleted, &v.ValidFrom, &v.ValidTo,
		&v.RecordedFrom, &v.RecordedTo, &v.RunID, &v.UpdatedAt, &hash, &all)
	if err != nil {
		return v, nil, err
	}
	v.ValidFrom, v.RecordedFrom, v.UpdatedAt = v.ValidFrom.UTC(), v.RecordedFrom.UTC(), v.UpdatedAt.UTC()
	v.ValidTo, v.RecordedTo = utcPtr(v.ValidTo), utcPtr(v.RecordedTo)
	v.ContentHash = hex.EncodeToString(hash)
	v.Values = all.values(t)
	v.Changed = map[string]Change{}
	return v, all, nil
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// Text renders a JSON value for people: strings unquoted, the rest as is.
func Text(v json.RawMessage) string {
	var s string
	if len(v) > 0 && v[0] == '"' && json.Unmarshal(v, &s) == nil {
		return s
	}
	if len(v) == 0 {
		return "null"
	}
	return string(v)
}
