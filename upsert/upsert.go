// Package upsert owns the versioned write of tracker records into the mirror
// tables: validation of a page, staging, the merge under the version guard,
// the counts of what happened, and tombstones.
//
// It promises the write rule of DESIGN.md: a row only ever moves to a newer
// (version, fetched_at); a re-delivery of stored content under the same
// version writes nothing at all (no row lock, no WAL), while the same content
// under a newer version moves the stored version forward, so that an older,
// different state delivered later is still refused; one row per (source, id)
// whatever the order of pages and however many appliers run at once; and a
// page with a bad record writes nothing.
package upsert

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/events"
)

// Counts says what Apply did with each record of a page. Inserted, Updated,
// Unchanged and Stale add up to the records given, also under concurrent
// appliers. Unchanged includes stored content whose version a record moved
// forward: the content, which is what readers and events see, did not change. Ties is the part of Updated that replaced the same version
// (fetched later), judged against the version read just before the write.
// Tombstoned counts deletion records written (part of Inserted or Updated);
// the caller adds what TombstoneMissing returns.
type Counts struct {
	Inserted   int64 `json:"inserted"`
	Updated    int64 `json:"updated"`
	Unchanged  int64 `json:"unchanged"`
	Stale      int64 `json:"stale"`
	Ties       int64 `json:"ties"`
	Tombstoned int64 `json:"tombstoned"`
	// Replaced counts the records written (part of Inserted or Updated)
	// with what Postgres refuses kept another way: a \u0000 or unpaired
	// surrogate escape kept as text in raw, NUL or bytes that are not
	// UTF-8 replaced by U+FFFD in a text column (README, "The schema").
	Replaced int64 `json:"replaced,omitempty"`
}

// Add adds o to c.
func (c *Counts) Add(o Counts) {
	c.Inserted += o.Inserted
	c.Updated += o.Updated
	c.Unchanged += o.Unchanged
	c.Stale += o.Stale
	c.Ties += o.Ties
	c.Tombstoned += o.Tombstoned
	c.Replaced += o.Replaced
}

// Total is the number of records the counts account for.
func (c Counts) Total() int64 { return c.Inserted + c.Updated + c.Unchanged + c.Stale }

// item is a validated record ready to write.
type item struct {
	rec              *clients.Record
	version, fetched time.Time // truncated to the database's microseconds
	deletedAt        any       // time.Time or nil
	hash             [32]byte
	typed            []any // typed column values; nil for a tombstone without fields
	// raw is what the raw column stores: rec.Raw, or, when jsonb refuses
	// it, rec.Raw with the refused escapes kept as text (storable).
	raw []byte
	// replaced is 1 when the record was stored with escapes kept as text
	// or characters replaced in its typed columns (Counts.Replaced).
	replaced int64
}

func (it *item) newerThan(v, f time.Time) bool {
	if c := it.version.Compare(v); c != 0 {
		return c > 0
	}
	return it.fetched.After(f)
}

// maxRounds bounds the lookup-and-write rounds of one Apply. A round only
// repeats for rows that a concurrent applier wrote between our lookup and our
// write, so more than a few means something else is wrong.
const maxRounds = 8

// Apply writes one page of normalized records of one resource for one source,
// in the caller's transaction, following the write rule. It validates the
// whole page first: on a bad record it returns a *RecordError and writes
// nothing. The same id twice in a page keeps its highest (Version, FetchedAt);
// the others count as stale.
//
// How: one lookup of the stored (updated_at, fetched_at, content_hash) of the
// page's ids splits the page in Go. Re-delivered and stale records are only
// counted. Records with the stored content under a newer version only move
// the stored updated_at and fetched_at forward, by one guarded UPDATE. New ones are copied straight into the table; newer ones go through
// a session staging table and one INSERT … ON CONFLICT DO UPDATE whose guard
// repeats the rule against the row as it is at write time. Rows that a
// concurrent applier wrote in between are looked up again and counted once.
// The writes sit under one savepoint: when a COPY meets an id another
// applier inserted meanwhile, or on a deadlock with another applier, they
// are undone and the page is redone (new rows then by INSERT … ON CONFLICT
// DO NOTHING), up to maxAttempts times. Apply expects READ COMMITTED, the
// default.
//
// With WithEvents(true) (a source with `events: on`), every row it really
// changes appends one event to the change feed in tx (package events); a
// re-delivery appends nothing. With events on, make it the transaction's
// last mirror write: the feed's append lock is held from there to commit.
//
// db is a transaction of the caller's, or a pool (see DB).
func Apply(ctx context.Context, db DB, source string, r clients.Resource, recs []clients.Record, opts ...Option) (Counts, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	t, ok := tableFor(r)
	if !ok {
		return Counts{}, fmt.Errorf("apply: unknown resource %q", r)
	}
	if source == "" || checkText(source) != "" {
		return Counts{}, fmt.Errorf("apply %s: invalid source name %q", r, source)
	}
	if len(recs) == 0 {
		return Counts{}, nil
	}
	// The stored state of the page's ids is read while the page is validated
	// and hashed: both take about as long, and the lookup writes nothing.
	// Ids are checked first, so that the lookup never sends an invalid one.
	type lookupResult struct {
		have map[string]stored
		err  error
	}
	var looked chan lookupResult
	if idsValid(recs) {
		ids := make([]string, len(recs))
		for i := range recs {
			ids[i] = recs[i].ID
		}
		looked = make(chan lookupResult, 1)
		go func() {
			have, err := lookup(ctx, db, t, source, ids)
			looked <- lookupResult{have, err}
		}()
	}
	items, err := prepare(t, recs)
	var have map[string]stored
	if looked != nil {
		lr := <-looked
		if err == nil && lr.err != nil {
			err = fmt.Errorf("apply %s/%s: %w", source, r, lr.err)
		}
		have = lr.have
	}
	if err != nil {
		return Counts{}, err
	}
	var c Counts
	items, c.Stale = dedupe(items)
	copyNew := true
	for attempt := 1; ; attempt++ {
		wc, err := write(ctx, db, t, source, items, have, copyNew, o)
		if err == nil {
			c.Add(wc)
			return c, nil
		}
		if attempt == maxAttempts {
			return Counts{}, fmt.Errorf("apply %s/%s: %w", source, r, err)
		}
		have = nil
		switch {
		case isUniqueViolation(err):
			// Another applier inserted one of our new ids after our lookup
			// and committed. Our writes are undone; redo the page with
			// INSERT … ON CONFLICT for new rows, which cannot fail so.
			copyNew = false
		case isDeadlock(err):
			// Another applier wrote the same ids in another order. Our
			// writes and their locks are undone; wait a moment and redo.
			select {
			case <-ctx.Done():
				return Counts{}, fmt.Errorf("apply %s/%s: %w", source, r, ctx.Err())
			case <-time.After(time.Duration(attempt*(1+rand.IntN(20))) * time.Millisecond):
			}
		default:
			return Counts{}, fmt.Errorf("apply %s/%s: %w", source, r, err)
		}
	}
}

// maxAttempts bounds how often Apply redoes a page after a deadlock or a
// conflicting insert.
const maxAttempts = 5

func isDeadlock(err error) bool { return hasCode(err, "40P01") }

func isUniqueViolation(err error) bool { return hasCode(err, "23505") }

func hasCode(err error, code string) bool {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	return ok && pgErr.Code == code
}

// write runs lookup-and-write rounds until every item is counted, then
// writes the line items of the parents written and appends the changes to
// the feed. All its writes sit under one savepoint (or, on a pool, one
// transaction), opened at the first write: on an error (such as a deadlock
// between concurrent appliers) they are undone and their row locks
// released, and the caller's transaction stays usable.
func write(ctx context.Context, db DB, t *table, source string, items []item, have map[string]stored, copyNew bool, o options) (Counts, error) {
	var c Counts
	w := &writer{conn: db, copyNew: copyNew, events: o.events, history: o.history, runID: o.runID, ids: len(t.children) > 0}
	for round := 0; len(items) > 0; round++ {
		var err error
		if round == maxRounds {
			err = fmt.Errorf("%d records still contended after %d rounds", len(items), maxRounds)
		} else {
			var rc Counts
			rc, items, err = applyRound(ctx, w, t, source, items, have)
			have = nil
			c.Add(rc)
		}
		if err != nil {
			return Counts{}, w.undo(ctx, err)
		}
	}
	if w.sp == nil {
		return c, nil // nothing written
	}
	// The lines of the parents written (a re-delivery writes none, and
	// costs no statement), before the feed's append lock.
	if err := syncChildren(ctx, w.sp, t, source, w.written); err != nil {
		return Counts{}, w.undo(ctx, err)
	}
	// The history of the rows written: the same decision as the feed's,
	// read once (writer.change), in the same savepoint.
	if err := w.writeHistory(ctx, t, source, o.runID); err != nil {
		return Counts{}, w.undo(ctx, err)
	}
	if len(w.changes) > 0 {
		if _, err := events.Append(ctx, w.sp, w.changes); err != nil {
			return Counts{}, w.undo(ctx, err)
		}
	}
	if err := w.sp.Commit(ctx); err != nil {
		return Counts{}, fmt.Errorf("release savepoint: %w", err)
	}
	return c, nil
}

// writeHistory adds the versions of the rows written but those inserted by
// COPY, whose first versions their mirror rows hold.
func (w *writer) writeHistory(ctx context.Context, t *table, source, runID string) error {
	if !w.history || len(w.histIDs) == 0 {
		return nil
	}
	return writeHistory(ctx, w.sp, t, source, runID, w.histIDs, w.histIsNew)
}

// undo rolls the writes back after err.
func (w *writer) undo(ctx context.Context, err error) error {
	if w.sp != nil {
		if rbErr := w.sp.Rollback(ctx); rbErr != nil {
			return fmt.Errorf("%w (rollback to savepoint: %v)", err, rbErr)
		}
	}
	return err
}

// DB is where Apply reads and writes: a transaction of the caller's (the
// page's writes then sit in a savepoint of it and commit with it), or a pool
// or connection (Apply then looks the page up outside any transaction, and
// opens one only when the page has something to write, committing it before
// it returns: a page of re-deliveries costs one statement, and its commit
// flushes nothing).
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// writer opens the savepoint (on a pool, the transaction) of a write phase
// when it is first needed, so that a page with nothing to write costs no
// round trip for it.
type writer struct {
	conn    DB
	sp      pgx.Tx
	copyNew bool // new rows go in by COPY (else by INSERT … ON CONFLICT)
	events  bool // collect the changes written, for the change feed
	changes []events.Change
	ids     bool     // collect the ids written, for the child tables
	written []string // their ids
	// history: write the history of the rows written (history.go): rows
	// inserted by COPY hold their first version (runID names their run);
	// of histIDs (histIsNew: the row was inserted) from the mirror.
	history   bool
	runID     string
	histIDs   []string
	histIsNew []bool
}

// change records that it was written (over a stored row unless isNew; over
// an older version of it when newer), when the writer collects changes.
func (w *writer) change(source string, t *table, it *item, isNew, newer bool) {
	if w.ids {
		w.written = append(w.written, it.rec.ID)
	}
	if w.history && !(isNew && w.copyNew) { // a copied row holds its version
		w.histIDs, w.histIsNew = append(w.histIDs, it.rec.ID), append(w.histIsNew, isNew)
	}
	if !w.events {
		return
	}
	ch := events.Change{Source: source, Resource: t.resource, RecordID: it.rec.ID,
		Kind: events.Updated, Version: it.version, Hash: it.hash, Newer: newer}
	switch {
	case it.deletedAt != nil:
		ch.Kind = events.Deleted
	case isNew:
		ch.Kind = events.Created
	}
	w.changes = append(w.changes, ch)
}

// Option changes how Apply writes.
type Option func(*options)

type options struct {
	events, history bool
	runID           string
}

// WithEvents makes Apply append an event per real change to the change feed
// (a source with `events: on`).
func WithEvents(on bool) Option { return func(o *options) { o.events = on } }

// WithHistory makes Apply add a version to the resource's history table per
// real change (a resource with history on; EnsureHistory declares it).
func WithHistory(on bool) Option { return func(o *options) { o.history = on } }

// WithRun names the run whose writes these are, for the history.
func WithRun(id string) Option { return func(o *options) { o.runID = id } }

func (w *writer) db(ctx context.Context) (pgx.Tx, error) {
	if w.sp == nil {
		sp, err := w.conn.Begin(ctx)
		if err != nil {
			return nil, fmt.Errorf("savepoint: %w", err)
		}
		w.sp = sp
	}
	return w.sp, nil
}

func idsValid(recs []clients.Record) bool {
	for i := range recs {
		if recs[i].ID == "" || checkText(recs[i].ID) != "" {
			return false
		}
	}
	return true
}

// prepare validates every record and computes its hash and column values,
// on all cores: hashing is most of Apply's own CPU time. The column values
// of the whole page share one block. The error returned is the one of the
// lowest index.
func prepare(t *table, recs []clients.Record) ([]item, error) {
	items := make([]item, len(recs))
	vals := make([]any, len(recs)*len(t.typed))
	workers := min(runtime.GOMAXPROCS(0), (len(recs)+255)/256)
	if workers <= 1 {
		if err := prepareRange(t, recs, items, vals, 0, len(recs)); err != nil {
			return nil, err
		}
		return items, nil
	}
	errs := make([]*RecordError, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*len(recs)/workers, (w+1)*len(recs)/workers
		wg.Go(func() { errs[w] = prepareRange(t, recs, items, vals, lo, hi) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return items, nil
}

func prepareRange(t *table, recs []clients.Record, items []item, vals []any, lo, hi int) *RecordError {
	n := len(t.typed)
	for i := lo; i < hi; i++ {
		rec := &recs[i]
		if err := prepareOne(t, rec, &items[i], vals[i*n:i*n:(i+1)*n]); err != nil {
			err.Index, err.ID = i, rec.ID
			return err
		}
	}
	return nil
}

// prepareOne validates rec and computes its item; its column values go to
// dst's spare capacity.
func prepareOne(t *table, rec *clients.Record, it *item, dst []any) *RecordError {
	if rec.ID == "" {
		return &RecordError{Field: "id", Reason: "empty"}
	}
	if r := checkText(rec.ID); r != "" {
		return &RecordError{Field: "id", Reason: r}
	}
	if r := checkTime(rec.Version); r != "" {
		return &RecordError{Field: "version", Reason: r}
	}
	if r := checkTime(rec.FetchedAt); r != "" {
		return &RecordError{Field: "fetched_at", Reason: r}
	}
	it.rec = rec
	it.version = rec.Version.Truncate(time.Microsecond)
	it.fetched = rec.FetchedAt.Truncate(time.Microsecond)
	if rec.DeletedAt != nil {
		if r := checkTime(*rec.DeletedAt); r != "" {
			return &RecordError{Field: "deleted_at", Reason: r}
		}
		it.deletedAt = rec.DeletedAt.Truncate(time.Microsecond)
	}
	if len(rec.Raw) == 0 {
		return &RecordError{Field: "raw", Reason: "empty"}
	}
	cz := canonPool.Get().(*canonicalizer)
	out, flags, err := cz.canonical(rec.Raw)
	if err == nil {
		it.hash = contentHash(out, rec.Derived)
	}
	canonPool.Put(cz)
	switch {
	case err != nil:
		return &RecordError{Field: "raw", Reason: err.Error()}
	case !flags.object:
		return &RecordError{Field: "raw", Reason: "not a JSON object"}
	}
	it.raw = rec.Raw
	if flags.nulEscape || flags.badSurrogate {
		// Stored as text instead (storable); the hash stays the one of the
		// record as received, so a re-delivery is unchanged.
		it.raw, it.replaced = storable(rec.Raw), 1
	}
	if rec.DeletedAt != nil && rec.Row == nil {
		return nil // a tombstone without content: typed stays nil
	}
	vals, replaced, re := t.values(rec, dst)
	if re != nil {
		return re
	}
	if replaced {
		it.replaced = 1
	}
	it.typed = vals
	return nil
}

// contentHash is SHA-256 of the canonical raw, and of what the row derives
// from outside it when anything (Record.Derived): a record without derived
// values keeps the hash it always had.
func contentHash(canonical, derived []byte) [32]byte {
	if len(derived) == 0 {
		return sha256.Sum256(canonical)
	}
	h := sha256.New()
	h.Write(canonical)
	h.Write([]byte("\x00derived\x00"))
	h.Write(derived)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// dedupe keeps, per id, the record with the highest (version, fetched_at);
// of equal ones, the first. It returns the kept items sorted by id and the
// number dropped.
func dedupe(items []item) ([]item, int64) {
	slices.SortStableFunc(items, func(a, b item) int { return cmp.Compare(a.rec.ID, b.rec.ID) })
	out := items[:0]
	var dropped int64
	for i := range items {
		if n := len(out); n > 0 && out[n-1].rec.ID == items[i].rec.ID {
			dropped++
			if items[i].newerThan(out[n-1].version, out[n-1].fetched) {
				out[n-1] = items[i]
			}
			continue
		}
		out = append(out, items[i])
	}
	return out, dropped
}

type stored struct {
	version, fetched time.Time
	hash             []byte
}

// applyRound looks up the stored state of items, writes the new and newer
// ones and counts the rest. It returns the items a concurrent writer touched
// between lookup and write: they need another round.
func applyRound(ctx context.Context, w *writer, t *table, source string, items []item, have map[string]stored) (Counts, []item, error) {
	var c Counts
	var db DB = w.conn
	if w.sp != nil {
		db = w.sp
	}
	if have == nil {
		ids := make([]string, len(items))
		for i := range items {
			ids[i] = items[i].rec.ID
		}
		var err error
		if have, err = lookup(ctx, db, t, source, ids); err != nil {
			return c, nil, err
		}
	}

	var fresh, newer, typeless, forward []*item
	ties := map[string]bool{}
	for i := range items {
		it := &items[i]
		s, ok := have[it.rec.ID]
		switch {
		case !ok:
			fresh = append(fresh, it)
		case bytes.Equal(s.hash, it.hash[:]):
			// Same content. Under the same or an older version it is a
			// re-delivery: nothing to write. Under a newer one (a source
			// whose version is not in the record, like Clockify's Date
			// header) the stored version must still move forward, or an
			// older, different state arriving later would win.
			if it.version.After(s.version) {
				forward = append(forward, it)
			} else {
				c.Unchanged++
			}
		case !it.newerThan(s.version, s.fetched):
			c.Stale++
		default:
			if it.version.Equal(s.version) {
				ties[it.rec.ID] = true
			}
			if it.typed == nil {
				typeless = append(typeless, it)
			} else {
				newer = append(newer, it)
			}
		}
	}
	if len(fresh)+len(newer)+len(typeless)+len(forward) == 0 {
		return c, nil, nil
	}
	tx, err := w.db(ctx)
	if err != nil {
		return c, nil, err
	}
	if len(fresh) > 0 && w.copyNew {
		if err := copyNew(ctx, tx, t, source, fresh, w.history, w.runID); err != nil {
			return c, nil, err
		}
		c.Inserted += int64(len(fresh))
		for _, it := range fresh {
			c.Replaced += it.replaced
			if it.deletedAt != nil {
				c.Tombstoned++
			}
			w.change(source, t, it, true, false)
		}
		fresh = nil
	}
	if len(fresh)+len(newer)+len(typeless)+len(forward) == 0 {
		return c, nil, nil
	}

	// Rows to update, and new rows when a COPY conflicted before.
	if len(fresh)+len(newer) > 0 {
		if err := stage(ctx, tx, t, fresh, newer); err != nil {
			return c, nil, err
		}
	}
	// What a written row counts as.
	const (
		asInserted = iota
		asUpdated
		asUnchanged // the version moved forward, the content did not change
	)
	// The writes, queued in the order their returned ids are read back.
	type write struct {
		group []*item
		as    int
		what  string
	}
	writes := make([]write, 0, 4)
	b := &pgx.Batch{}
	queue := func(group []*item, as int, what, sql string, args ...any) {
		if len(group) > 0 {
			writes = append(writes, write{group, as, what})
			b.Queue(sql, args...)
		}
	}
	queue(fresh, asInserted, "insert", t.insertNew, source)
	queue(newer, asUpdated, "update", t.upsertExisting, source)
	// Array arguments are built only for a group that is written.
	if len(typeless) > 0 {
		queue(typeless, asUpdated, "tombstone", t.updateTypeless, typelessArgs(source, typeless)...)
	}
	if len(forward) > 0 {
		queue(forward, asUnchanged, "move version forward", t.moveForward, forwardArgs(source, forward)...)
	}
	if len(fresh)+len(newer) > 0 {
		b.Queue(t.clearStage)
	}
	br := tx.SendBatch(ctx, b)
	defer br.Close()

	var retry []item
	count := func(group []*item, as int) error {
		written, err := returnedIDs(br, len(group))
		if err != nil {
			return err
		}
		for _, it := range group {
			if !written[it.rec.ID] {
				retry = append(retry, *it) // written meanwhile by another applier
				continue
			}
			if as != asUnchanged {
				c.Replaced += it.replaced
			}
			switch as {
			case asInserted:
				c.Inserted++
				w.change(source, t, it, true, false)
			case asUnchanged:
				c.Unchanged++
				continue // no deletion written: the stored state stays
			default:
				c.Updated++
				if ties[it.rec.ID] {
					c.Ties++
				}
				// Not a tie: the row was at an older version when looked
				// up. A row another applier moved to this version since
				// has only events too fresh for retention to have deleted,
				// which Append finds in the feed.
				w.change(source, t, it, false, !ties[it.rec.ID])
			}
			if it.deletedAt != nil {
				c.Tombstoned++
			}
		}
		return nil
	}
	for _, wr := range writes {
		if err := count(wr.group, wr.as); err != nil {
			return c, nil, fmt.Errorf("%s: %w", wr.what, err)
		}
	}
	if len(fresh)+len(newer) > 0 {
		if _, err := br.Exec(); err != nil {
			return c, nil, fmt.Errorf("clear staging: %w", err)
		}
	}
	return c, retry, br.Close()
}

// copyNew copies rows that the lookup did not find straight into the table:
// the fastest way in. When another applier inserted one of the ids after
// our lookup, it fails with a unique violation and Apply redoes the page.
// With history on, each row holds its first version (history.go): its
// valid time, the database clock and a seq of the history, read for the
// page in one statement before the COPY. A record that has a history
// already is refused by the database with a unique violation too, and the
// redone page chains its version on that history.
func copyNew(ctx context.Context, tx pgx.Tx, t *table, source string, fresh []*item, history bool, runID string) error {
	cols := t.copyColumns()
	var recorded time.Time
	var seqs []int64
	var run any
	if history {
		if err := tx.QueryRow(ctx, t.historyOf().allocate, len(fresh)).Scan(&recorded, &seqs); err != nil {
			return fmt.Errorf("history seqs: %w", err)
		}
		if len(seqs) != len(fresh) {
			return fmt.Errorf("history seqs: %d for %d rows", len(seqs), len(fresh))
		}
		cols = append(cols[:len(cols):len(cols)], "history_seq", "history_valid_from", "history_recorded_from", "history_run_id")
		if runID != "" {
			run = runID
		}
	}
	row := make([]any, 0, len(cols))
	_, err := tx.CopyFrom(ctx, pgx.Identifier{t.name}, cols,
		pgx.CopyFromSlice(len(fresh), func(i int) ([]any, error) {
			it := fresh[i]
			row = append(row[:0], source, it.rec.ID)
			row = t.appendValues(row, it)
			row = append(row, it.version, it.fetched, it.hash[:], it.raw, it.deletedAt)
			if history {
				row = append(row, seqs[i], it.stamp(), recorded, run)
			}
			return row, nil
		}))
	if err != nil {
		return fmt.Errorf("copy new rows: %w", err)
	}
	return nil
}

// stamp is where a version of it starts in valid time: its version, or
// for a deletion the later of it and when it was deleted.
func (it *item) stamp() time.Time {
	if d, ok := it.deletedAt.(time.Time); ok && d.After(it.version) {
		return d
	}
	return it.version
}

// lookup returns the stored version and hash of ids. It leaves the staging
// table alone: a transaction that touches any temporary table makes its
// commit truncate every ON COMMIT DELETE ROWS table of the session (with its
// TOAST index), which was half of an idle daemon's Postgres CPU.
func lookup(ctx context.Context, db DB, t *table, source string, ids []string) (map[string]stored, error) {
	rows, err := db.Query(ctx, t.lookup, source, ids)
	if err != nil {
		return nil, fmt.Errorf("look up stored versions: %w", err)
	}
	defer rows.Close()
	have := make(map[string]stored, len(ids))
	var id string
	var s stored
	_, err = pgx.ForEachRow(rows, []any{&id, &s.version, &s.fetched, &s.hash}, func() error {
		have[id] = s
		s.hash = nil // ForEachRow scans into the same variables; keep the slice
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("look up stored versions: %w", err)
	}
	return have, nil
}

// stage copies the rows to write into the session's staging table, in id
// order.
func stage(ctx context.Context, tx pgx.Tx, t *table, fresh, newer []*item) error {
	all := make([]*item, 0, len(fresh)+len(newer))
	all = append(append(all, fresh...), newer...)
	nFresh := len(fresh)
	// Only a page with rows to write creates the session's staging table
	// (a no-op once it exists).
	if _, err := tx.Exec(ctx, t.createStage); err != nil {
		return fmt.Errorf("create staging table: %w", err)
	}
	row := make([]any, 0, len(t.typed)+8)
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"pg_temp", t.stage}, t.stageColumns(),
		pgx.CopyFromSlice(len(all), func(i int) ([]any, error) {
			it := all[i]
			row = append(row[:0], it.rec.ID)
			row = t.appendValues(row, it)
			row = append(row, it.version, it.fetched, it.hash[:], it.raw, it.deletedAt, i < nFresh)
			return row, nil
		}))
	if err != nil {
		return fmt.Errorf("stage rows: %w", err)
	}
	return nil
}

func typelessArgs(source string, items []*item) []any {
	ids := make([]string, len(items))
	versions := make([]time.Time, len(items))
	fetched := make([]time.Time, len(items))
	hashes := make([][]byte, len(items))
	raws := make([]string, len(items))
	deleted := make([]pgtype.Timestamptz, len(items))
	for i, it := range items {
		ids[i], versions[i], fetched[i] = it.rec.ID, it.version, it.fetched
		hashes[i], raws[i] = it.hash[:], string(it.raw)
		if d, ok := it.deletedAt.(time.Time); ok {
			deleted[i] = pgtype.Timestamptz{Time: d, Valid: true}
		}
	}
	return []any{source, ids, versions, fetched, hashes, raws, deleted}
}

// forwardArgs are the arguments of moveForwardSQL.
func forwardArgs(source string, items []*item) []any {
	ids := make([]string, len(items))
	versions := make([]time.Time, len(items))
	fetched := make([]time.Time, len(items))
	hashes := make([][]byte, len(items))
	for i, it := range items {
		ids[i], versions[i], fetched[i], hashes[i] = it.rec.ID, it.version, it.fetched, it.hash[:]
	}
	return []any{source, ids, versions, fetched, hashes}
}

// returnedIDs reads the ids a write statement returned.
func returnedIDs(br pgx.BatchResults, n int) (map[string]bool, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	got := make(map[string]bool, n)
	var id string
	if _, err := pgx.ForEachRow(rows, []any{&id}, func() error { got[id] = true; return nil }); err != nil {
		return nil, err
	}
	return got, nil
}
