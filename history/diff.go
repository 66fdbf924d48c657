package history

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemarkhq/tidemark/schema"
)

// DiffParams say which two instants of which history to compare.
type DiffParams struct {
	Source   string
	Table    *schema.Table
	From, To time.Time
	// Known compares what the mirror knew at each instant (recorded time,
	// <r>_known_at) instead of what was valid then (<r>_as_of).
	Known bool
}

// Diff is what changed between two instants, as `tidemark history diff
// --json` prints it (a contract: add fields, rename none).
type Diff struct {
	Source   string    `json:"source"`
	Resource string    `json:"resource"`
	Time     string    `json:"time"` // "valid" or "recorded"
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	Created  []Entry   `json:"created"` // live at To, not at From
	Changed  []Entry   `json:"changed"` // live at both, other content
	Deleted  []Entry   `json:"deleted"` // live at From, not at To
	Totals   Totals    `json:"totals"`
}

// Entry is one record of a Diff: its values at To (at From when deleted)
// and, when changed, the typed columns that differ.
type Entry struct {
	ID         string            `json:"id"`
	Values     Values            `json:"values"`
	Changed    map[string]Change `json:"changed,omitempty"`
	RawChanged bool              `json:"raw_changed,omitempty"`
}

// Totals count a Diff's records; for a resource with hours, the sums of
// the live records' hours at each instant and the change, exact decimals
// (null otherwise).
type Totals struct {
	Created    int          `json:"created"`
	Changed    int          `json:"changed"`
	Deleted    int          `json:"deleted"`
	HoursFrom  *json.Number `json:"hours_from"`
	HoursTo    *json.Number `json:"hours_to"`
	HoursDelta *json.Number `json:"hours_change"`
}

// diffSQL lists the records live at one instant or the other, not both
// with one content. %s is the as-of function.
const diffSQL = `WITH a AS (SELECT * FROM %[1]s($1, $2)), b AS (SELECT * FROM %[1]s($1, $3))
SELECT coalesce(a.id, b.id), a.id IS NOT NULL, b.id IS NOT NULL, to_jsonb(a), to_jsonb(b)
FROM a FULL JOIN b ON a.id = b.id
WHERE a.id IS NULL OR b.id IS NULL OR a.content_hash <> b.content_hash
ORDER BY length(coalesce(a.id, b.id)), coalesce(a.id, b.id)`

// hoursSQL sums hours in numeric (exact) at both instants.
const hoursSQL = `WITH a AS (SELECT coalesce(sum(hours), 0) AS h FROM %[1]s($1, $2)),
b AS (SELECT coalesce(sum(hours), 0) AS h FROM %[1]s($1, $3))
SELECT a.h::text, b.h::text, (b.h - a.h)::text FROM a, b`

// Compare returns what was created, changed and deleted between p.From and
// p.To.
func Compare(ctx context.Context, db DB, p DiffParams) (*Diff, error) {
	d := &Diff{Source: p.Source, Resource: string(p.Table.Name), Time: "valid",
		From: p.From.UTC(), To: p.To.UTC(), Created: []Entry{}, Changed: []Entry{}, Deleted: []Entry{}}
	f := fn(p.Table, "as_of")
	if p.Known {
		d.Time, f = "recorded", fn(p.Table, "known_at")
	}
	err := read(ctx, db, p.Source, p.Table, func(tx pgx.Tx) error {
		if err := d.entries(ctx, tx, p, f); err != nil {
			return err
		}
		if c, ok := p.Table.Column("hours"); ok && c.Type == schema.Numeric {
			return d.hours(ctx, tx, p, f)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("history diff of %s/%s: %w", p.Source, p.Table.Name, err)
	}
	d.Totals.Created, d.Totals.Changed, d.Totals.Deleted = len(d.Created), len(d.Changed), len(d.Deleted)
	return d, nil
}

func (d *Diff) entries(ctx context.Context, tx pgx.Tx, p DiffParams, f string) error {
	rows, err := tx.Query(ctx, fmt.Sprintf(diffSQL, f), p.Source, p.From, p.To)
	if err != nil {
		return err
	}
	var id string
	var inA, inB bool
	var a, b row
	_, err = pgx.ForEachRow(rows, []any{&id, &inA, &inB, &a, &b}, func() error {
		t := p.Table
		switch {
		case !inA:
			d.Created = append(d.Created, Entry{ID: id, Values: b.values(t)})
		case !inB:
			d.Deleted = append(d.Deleted, Entry{ID: id, Values: a.values(t)})
		default:
			to := b.values(t)
			d.Changed = append(d.Changed, Entry{ID: id, Values: to,
				Changed: changed(t, a.values(t), to), RawChanged: rawDiffers(a, b)})
		}
		a, b = nil, nil
		return nil
	})
	return err
}

func (d *Diff) hours(ctx context.Context, tx pgx.Tx, p DiffParams, f string) error {
	var from, to, delta string
	if err := tx.QueryRow(ctx, fmt.Sprintf(hoursSQL, f), p.Source, p.From, p.To).Scan(&from, &to, &delta); err != nil {
		return err
	}
	n := func(s string) *json.Number { x := json.Number(s); return &x }
	d.Totals.HoursFrom, d.Totals.HoursTo, d.Totals.HoursDelta = n(from), n(to), n(delta)
	return nil
}
