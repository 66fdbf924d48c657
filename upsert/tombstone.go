package upsert

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/events"
)

// ErrTooManyTombstones is returned (wrapped) by TombstoneMissing when it
// would mark more rows deleted than its ceiling allows; it then writes nothing.
var ErrTooManyTombstones = errors.New("too many rows would be marked deleted")

// TombstoneParams selects what TombstoneMissing may mark deleted.
type TombstoneParams struct {
	Source   string
	Resource clients.Resource
	// From and To (inclusive) restrict to rows whose date column (the
	// declaration's ListBy: time_entries.spent_date) is in range, for a
	// resource listed by date only; a zero bound is open.
	From, To clients.Date
	// Seen holds every id the source listed for the range.
	Seen []string
	// AsOf is when the listing started: rows with a newer version may have
	// been created after it and are kept. Marked rows get deleted_at = AsOf.
	AsOf time.Time
	// Max is the most rows one call may mark (0: no ceiling). A listing that
	// came back short by mistake must not wipe the mirror.
	Max int
	// Scope is what the listing covered beyond the range (DESIGN.md
	// guarantee 9): a listing of some users' entries proves nothing about
	// another user's. With Scope.UserIDs not nil, only rows whose user
	// column (the declaration's UserColumn: time_entries.user_id) is in it
	// may be marked, and only they count against Max; an empty, non-nil list
	// marks nothing. A user scope on a resource without a user column is
	// refused.
	Scope clients.Scope
	// Events appends a deleted event per marked row to the change feed, in
	// tx (a source with `events: on`).
	Events bool
	// History adds a deleted version per marked row to the resource's
	// history, in tx (a resource with history on); RunID names the run.
	History bool
	RunID   string
}

// TombstoneMissing marks deleted the stored live rows of (Source, Resource) —
// within [From, To] when set, of the users in Scope.UserIDs when not nil,
// with a version not newer than AsOf — whose id is not in Seen. It keeps
// updated_at (the source's version) and changes the content hash: a later
// version delivered by Apply brings the row back even with the content it
// had before the mark (with the hash kept, that would only move the stored
// version forward and leave the row deleted), and so does the same version
// fetched after the mark; the same version fetched before it is stale. It
// returns how many rows it marked.
func TombstoneMissing(ctx context.Context, tx pgx.Tx, p TombstoneParams) (int64, error) {
	t, where, err := p.check("tombstone")
	if err != nil {
		return 0, err
	}
	var n, marked int64
	var ids []string
	var versions []time.Time
	var hashes [][]byte
	err = tx.QueryRow(ctx, t.tombstoneMissing, p.Source, p.AsOf.Truncate(time.Microsecond),
		dateArg(p.From), dateArg(p.To), p.Seen, int64(p.Max), p.Scope.UserIDs, p.Events || p.History, time.Now().Truncate(time.Microsecond)).
		Scan(&n, &marked, &ids, &versions, &hashes)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", where, err)
	}
	if p.Max > 0 && n > int64(p.Max) {
		return 0, fmt.Errorf("%s: %w: %d rows not in the listing, the ceiling is %d; check that the listing was complete, or raise the ceiling", where, ErrTooManyTombstones, n, p.Max)
	}
	if p.Events && len(ids) > 0 {
		changes := make([]events.Change, len(ids))
		for i, id := range ids {
			changes[i] = events.Change{Source: p.Source, Resource: p.Resource, RecordID: id,
				Kind: events.Deleted, Version: versions[i]}
			copy(changes[i].Hash[:], hashes[i])
		}
		if _, err := events.Append(ctx, tx, changes); err != nil {
			return 0, fmt.Errorf("%s: %w", where, err)
		}
	}
	if p.History && len(ids) > 0 {
		if err := writeHistory(ctx, tx, t, p.Source, p.RunID, ids, make([]bool, len(ids))); err != nil {
			return 0, fmt.Errorf("%s: %w", where, err)
		}
	}
	if marked > 0 {
		if err := clearDeletedChildren(ctx, tx, t, p.Source); err != nil {
			return 0, fmt.Errorf("%s: %w", where, err)
		}
	}
	return marked, nil
}

// check validates p for what (its errors' prefix, with the source and
// resource) and returns the table and that prefix.
func (p *TombstoneParams) check(what string) (*table, string, error) {
	t, ok := tableFor(p.Resource)
	if !ok {
		return nil, "", fmt.Errorf("%s: unknown resource %q", what, p.Resource)
	}
	where := fmt.Sprintf("%s %s/%s", what, p.Source, p.Resource)
	if p.Source == "" || checkText(p.Source) != "" {
		return nil, "", fmt.Errorf("%s: invalid source name", where)
	}
	if t.byDate == "" && (!p.From.IsZero() || !p.To.IsZero()) {
		return nil, "", fmt.Errorf("%s: a date range applies only to a resource listed by date (%s is listed whole)", where, p.Resource)
	}
	if p.Scope.UserIDs != nil && t.byUser == "" {
		return nil, "", fmt.Errorf("%s: a user scope applies only to a resource with a user column (%s has none)", where, p.Resource)
	}
	for i, id := range p.Scope.UserIDs {
		if r := checkText(id); r != "" {
			return nil, "", fmt.Errorf("%s: scope user id %d (%q): %s", where, i, id, r)
		}
	}
	if r := checkTime(p.AsOf); r != "" {
		return nil, "", fmt.Errorf("%s: AsOf: %s", where, r)
	}
	for i, id := range p.Seen {
		if r := checkText(id); r != "" {
			return nil, "", fmt.Errorf("%s: seen id %d (%q): %s", where, i, id, r)
		}
	}
	if p.Seen == nil {
		p.Seen = []string{}
	}
	return t, where, nil
}

// MissingIDs returns, in id order, the ids TombstoneMissing would mark
// with p (Max aside), read outside any transaction: a reconcile asks the
// source for them (clients.Confirmer) before it marks any.
func MissingIDs(ctx context.Context, db DB, p TombstoneParams) ([]string, error) {
	t, where, err := p.check("missing ids")
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, t.missing, p.Source, p.AsOf.Truncate(time.Microsecond),
		dateArg(p.From), dateArg(p.To), p.Seen, nil, p.Scope.UserIDs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return ids, nil
}

func dateArg(d clients.Date) pgtype.Date {
	if d.IsZero() {
		return pgtype.Date{}
	}
	return pgtype.Date{Time: d.Time(), Valid: true}
}
