// Package events owns the change feed (issue 13): the events table that
// upsert appends to in the transaction of each real change of a mirror row,
// the named consumers and their positions, retention, and the outbound
// webhooks.
//
// It promises: one event per real change (insert, newer content, tombstone)
// and none for a re-delivery; an event id derived from (source, resource,
// record id, version, content hash), so that the same change applied again
// after a crash, by another replica or by a backfill has the same id and is
// never appended twice; a feed in commit order (seq), so that the events of
// one record come in version order; and a consumer position that moves in
// the transaction of the consumer's own effect.
package events

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/schema"
)

// Kind is what a change did to the mirror row.
type Kind string

// Kinds of change.
const (
	Created Kind = "created" // the mirror did not have the record
	Updated Kind = "updated" // new content (including a record brought back from a tombstone)
	Deleted Kind = "deleted" // a tombstone
)

// Channel is the LISTEN/NOTIFY channel an append notifies at commit.
const Channel = "tidemark_events"

// appendLock is the transaction-level advisory lock every append takes
// before it draws its seqs ("tmevents" in ASCII). Held until commit, it makes
// seq order commit order, so that a consumer reading past its position never
// skips an event committed late with a smaller seq.
const appendLock int64 = 0x746d_6576_656e_7473

// Change is one real change of a mirror row, as upsert saw it.
type Change struct {
	Source   string
	Resource clients.Resource
	RecordID string
	Kind     Kind
	Version  time.Time // the row's updated_at after the change
	Hash     [32]byte  // the row's content hash after the change
	// Newer says the row had an older version before the change, so no
	// earlier event of the record has this version and Append skips the
	// look-up of its deleted occurrences (the common change costs no read).
	// Leave it false when unsure: an insert (the mirror may have been
	// emptied by hand), a tombstone, a change at the stored version.
	Newer bool
}

// ID is the change's stable event id: a UUID (version 8, RFC 9562) built
// from SHA-256 of (source, resource, record id, version in microseconds,
// content hash).
func (c Change) ID() [16]byte { return c.id(0) }

// id is the id of the n-th time (from 0) the record reaches this (version,
// content). A row comes back to an earlier state only rarely: a record
// brought back from a wrong tombstone (a tombstone keeps the version), or an
// edit undone within the same second. That is a change of its own and gets
// the next id, not the first one again: the same in every interleaving,
// since each must pass through the earlier state first. n counts the
// occurrences still in the feed and those retention moved to event_states.
func (c Change) id(n int) [16]byte {
	h := sha256.New()
	for _, s := range []string{c.Source, string(c.Resource), c.RecordID} {
		var l [4]byte
		binary.BigEndian.PutUint32(l[:], uint32(len(s)))
		h.Write(l[:])
		h.Write([]byte(s))
	}
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(c.Version.Truncate(time.Microsecond).UnixMicro()))
	h.Write(v[:])
	h.Write(c.Hash[:])
	if n > 0 {
		binary.BigEndian.PutUint64(v[:], uint64(n))
		h.Write(v[:])
	}
	var id [16]byte
	copy(id[:], h.Sum(nil))
	id[6] = id[6]&0x0f | 0x80 // version 8
	id[8] = id[8]&0x3f | 0x80 // variant 10
	return id
}

// NthID is the id of the n-th return (n ≥ 1) of a record to the same
// (version, content): see id.
func (c Change) NthID(n int) [16]byte { return c.id(n) }

// FormatID formats an event id as the webhook-id and CLI show it.
func FormatID(id [16]byte) string {
	b := make([]byte, 36)
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:], id[10:])
	return "evt_" + string(b)
}

// Event is one entry of the feed.
type Event struct {
	Seq        int64            `json:"seq"`
	ID         string           `json:"id"` // evt_<uuid>
	Source     string           `json:"source"`
	Resource   clients.Resource `json:"resource"`
	RecordID   string           `json:"record_id"`
	Kind       Kind             `json:"kind"`
	Version    time.Time        `json:"version"`
	Hash       string           `json:"content_hash"` // hex
	RecordedAt time.Time        `json:"recorded_at"`
}

// Append writes changes to the feed in tx, the transaction of the changes
// themselves, and notifies Channel at commit. Every change is appended:
// upsert only reports real changes. A record that returns to a (version,
// content) it had before gets the next occurrence's id: the occurrences
// still in the feed are found by its unique index, those retention deleted
// are counted in event_states (see Prune), so an id names one change for
// ever. Call it after the transaction's last mirror write: the append lock it
// takes is held until commit. It returns how many events it appended.
func Append(ctx context.Context, tx pgx.Tx, changes []Change) (int64, error) {
	if len(changes) == 0 {
		return 0, nil
	}
	// One round trip: the lock, the occurrences retention deleted, the
	// savepoint of the fast path. Fast path: COPY under the savepoint. An id
	// still in the feed (a record back at a state it had, rare) fails it
	// with a unique violation; then the slow path gives such changes the
	// next free ids. The common change writes nothing but its event.
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_advisory_xact_lock($1)`, appendLock)
	nth := pruned(b, changes)
	b.Queue(`SAVEPOINT tidemark_events`)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return 0, fmt.Errorf("append events: lock and count pruned occurrences: %w", err)
	}
	ids := make([]pgtype.UUID, len(changes))
	for i := range changes {
		ids[i] = pgtype.UUID{Bytes: changes[i].id(nth[i]), Valid: true}
	}
	n, err := tx.CopyFrom(ctx, pgx.Identifier{"events"}, appendColumns, pgx.CopyFromSlice(len(changes), func(i int) ([]any, error) {
		c := &changes[i]
		return []any{ids[i], c.Source, string(c.Resource), c.RecordID, string(c.Kind), c.Version, c.Hash[:]}, nil
	}))
	switch {
	case err == nil:
		_, err = tx.Exec(ctx, `RELEASE SAVEPOINT tidemark_events`)
	case hasCode(err, "23505"):
		if _, err = tx.Exec(ctx, `ROLLBACK TO SAVEPOINT tidemark_events`); err == nil {
			n, err = appendEach(ctx, tx, changes, nth)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("append events: %w", err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, Channel); err != nil {
		return 0, fmt.Errorf("append events: notify: %w", err)
	}
	return n, nil
}

// pruned queues in b the read of event_states; once b has run, the slice
// returned holds, per change, how many times its record reached the same
// (version, content) in events retention deleted. Only the latest version
// Prune saw of a record is kept there: versions of a record never go back,
// so an older one is never reached again. A change marked Newer is not
// looked up: its record never had an event at its version.
func pruned(b *pgx.Batch, changes []Change) []int {
	nth := make([]int, len(changes))
	type group struct{ source, resource string }
	look := map[group]map[string][]int{} // record id → indexes in changes
	for i := range changes {
		c := &changes[i]
		if c.Newer {
			continue
		}
		g := group{c.Source, string(c.Resource)}
		if look[g] == nil {
			look[g] = map[string][]int{}
		}
		look[g][c.RecordID] = append(look[g][c.RecordID], i)
	}
	for g, byID := range look {
		ids := make([]string, 0, len(byID))
		for id := range byID {
			ids = append(ids, id)
		}
		b.Queue(prunedSQL, g.source, g.resource, ids).Query(func(rows pgx.Rows) error {
			var id string
			var version time.Time
			var hashes [][]byte
			_, err := pgx.ForEachRow(rows, []any{&id, &version, &hashes}, func() error {
				for _, i := range byID[id] {
					if !version.Equal(changes[i].Version) {
						continue
					}
					for _, h := range hashes {
						if string(h) == string(changes[i].Hash[:]) {
							nth[i]++
						}
					}
				}
				return nil
			})
			return err
		})
	}
	return nth
}

// prunedSQL reads what retention kept of records' deleted events. It writes
// nothing.
const prunedSQL = `SELECT record_id, version, hashes FROM event_states
WHERE source = $1 AND resource = $2 AND record_id = ANY($3::text[])`

var appendColumns = []string{"event_id", "source", "resource", "record_id", "kind", "version", "content_hash"}

func hasCode(err error, code string) bool {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	return ok && pgErr.Code == code
}

// appendEach appends changes one by one; one whose id is already in the
// feed gets the next free occurrence's id.
func appendEach(ctx context.Context, tx pgx.Tx, changes []Change, nth []int) (int64, error) {
	var n int64
	for i := range changes {
		c := &changes[i]
		for k := nth[i]; ; k++ {
			tag, err := tx.Exec(ctx, appendSQL, pgtype.UUID{Bytes: c.id(k), Valid: true}, c.Source, string(c.Resource), c.RecordID, string(c.Kind), c.Version, c.Hash[:])
			if err != nil {
				return 0, err
			}
			if tag.RowsAffected() == 1 {
				n++
				break
			}
		}
	}
	return n, nil
}

const appendSQL = `INSERT INTO events (event_id, source, resource, record_id, kind, version, content_hash)
VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (event_id) DO NOTHING`

// Row reads the record's raw JSON as the mirror holds it now, and whether it
// still has the event's content (false: a later change superseded it, or the
// row is gone).
func (e Event) Row(ctx context.Context, tx pgx.Tx) (json.RawMessage, bool, error) {
	t, ok := schema.Lookup(e.Resource)
	if !ok {
		return nil, false, fmt.Errorf("event %s: unknown resource %q", e.ID, e.Resource)
	}
	var raw json.RawMessage
	var hash []byte
	err := tx.QueryRow(ctx, fmt.Sprintf(`SELECT raw, content_hash FROM %s WHERE source = $1 AND id = $2`,
		pgx.Identifier{string(t.Name)}.Sanitize()), e.Source, e.RecordID).Scan(&raw, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("event %s: read row: %w", e.ID, err)
	}
	return raw, hex.EncodeToString(hash) == e.Hash, nil
}
