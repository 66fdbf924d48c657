package upsert

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/schema"
)

// History (issue 31): every real change of a resource with history on adds
// one version to <resource>_history, written in the transaction of the
// change by the statement below, right after the mirror's own write. The
// version guard has already judged what is a change; a re-delivery, a stale
// record or a version moved forward without new content never reaches it.
//
// A version's valid time starts at the record's version (the provider's
// updated_at; for a tombstone the later of it and deleted_at, which a
// reconcile dates when it finds the record gone) and ends where the next
// version's starts; its recorded time is the database clock when this
// mirror learned it, until it learned the next. Open ends are 'infinity'.
// A start is never earlier than the previous version's (GREATEST below), so
// intervals follow each other; the table's constraints (historyTableSQL)
// make an overlap impossible in the database itself. Recorded time is the
// clock at the write, just before the commit: a report that ran while the
// transaction was open did not see it yet. Two versions under one updated_at keep
// both: the first gets the empty interval [t, t), ordered by seq.
//
// Where a version is kept: a record's first version, while it is its only
// one, lives in its mirror row (history_seq, history_valid_from,
// history_recorded_from, history_run_id), written by the COPY that inserts
// the row: a new record costs no second row. Every other version is a row
// of <resource>_history_store. The first change of the record moves the
// version from its mirror row to the store, in the statement that changes
// the row (a trigger, whoever writes: an applier, a reconcile, a hand-made
// UPDATE or DELETE), and the change then chains on it as before. Readers
// see one history: <resource>_history is a view of both, and the as-of
// functions read it. Postgres refuses a version in a mirror row beside a
// history of the record (a statement trigger on the mirror, a deferred one
// on the store), so the chain's guarantees hold across the two tables.

// HistoryChanges are the values of a history row's change column.
const (
	ChangeFirstSeen = "first_seen" // recorded when history was turned on, not a change
	ChangeCreated   = "created"
	ChangeUpdated   = "updated"
	ChangeDeleted   = "deleted"
	ChangeRestored  = "restored"
)

// HistoryTable names the history of resource r: a view of every version,
// those in the store and first versions still in their mirror rows.
func HistoryTable(r clients.Resource) string { return string(r) + "_history" }

// HistoryStore names the table that holds r's versions other than a first
// version still kept in its mirror row.
func HistoryStore(r clients.Resource) string { return string(r) + "_history_store" }

// historySQL are the statements of one resource's history, built once.
type historySQL struct {
	table      string // the view, every version
	store      string // the table
	mirror     string
	write      string // $1 source, $2 ids, $3 new flags, $4 run id
	allocate   string // $1 how many: the clock, and seqs for first versions
	firstSeen  string // $1 source
	prune      string // $1 source, $2 horizon
	relink     string // $1 source, $2 ids, $3 seqs pruned
	ddl        []string
	dated      string // the date column of the table; "" none
	typedNames []string
	hasRaw     bool
}

func newHistorySQL(t *table) *historySQL {
	h := &historySQL{table: HistoryTable(t.resource), store: HistoryStore(t.resource), mirror: t.name, dated: t.byDate}
	for _, c := range t.typed {
		h.typedNames = append(h.typedNames, c.name)
	}
	if len(t.children) > 0 {
		// A parent keeps its raw in every version: its lines (child
		// tables) as of any instant follow from it.
		h.typedNames = append(h.typedNames, "raw")
		h.hasRaw = true
	}
	chain := func(head, change, run string) string {
		return fmt.Sprintf(head+historyChainSQL, t.name, h.store, h.cols("m."), h.cols(""), change, run)
	}
	h.write = chain(historyWriteHeadSQL, historyChangeSQL, "$4")
	h.firstSeen = chain(historyFirstSeenHeadSQL, "'first_seen'", "NULL")
	h.prune = fmt.Sprintf(historyPruneSQL, h.store)
	h.relink = fmt.Sprintf(historyRelinkSQL, h.store)
	h.allocate = fmt.Sprintf(historyAllocateSQL, h.store)
	h.ddl = h.buildDDL(t)
	return h
}

// cols lists the typed columns, with a prefix, and a trailing comma.
func (h *historySQL) cols(prefix string) string {
	var b strings.Builder
	for _, n := range h.typedNames {
		b.WriteString(prefix + n + ", ")
	}
	return b.String()
}

// buildDDL declares the history store and the mirror's part of the
// history from the mirror table's declaration: the typed columns
// (nullable: a column added later is NULL in older versions), the common
// ones, and the history's own. The view and the functions follow from the
// store's columns as the database holds them (readerDDL).
func (h *historySQL) buildDDL(t *table) []string {
	var cols []string
	for _, c := range t.typed {
		cols = append(cols, fmt.Sprintf("%s %s", c.name, c.typ))
	}
	if h.hasRaw {
		cols = append(cols, "raw jsonb")
	}
	ddl := []string{fmt.Sprintf(historyTableSQL, h.store, strings.Join(cols, ",\n  "), h.table),
		fmt.Sprintf(`COMMENT ON TABLE %s IS 'The versions of %s kept apart from their mirror rows (every version but a first one that is still the only one). Read %s, the view of every version, or the functions %s_as_of, %s_known_at and %s_versions.'`,
			h.store, t.name, h.table, t.name, t.name, t.name),
		fmt.Sprintf(`CREATE UNIQUE INDEX IF NOT EXISTS %[2]s_one_chain ON %[1]s (source, id, coalesce(prev_seq, 0))`, h.store, h.table)}
	for _, c := range t.typed {
		// A column declared after the table was created.
		ddl = append(ddl, fmt.Sprintf(`ALTER TABLE %s ADD COLUMN IF NOT EXISTS %s %s`, h.store, c.name, c.typ))
	}
	if h.dated != "" {
		// The as-of query of a date range (a month of one account) reads
		// only the entries valid at the instant: both ends are keys, so
		// the scan filters them in the index before it visits a row.
		// The declared HistoryBy columns (project_id, user_id) follow as
		// keys: a project's month is filtered in the index too.
		keys := []string{"source", h.dated, "valid_from", "valid_to"}
		for _, c := range t.historyBy {
			if slices.Contains(h.typedNames, c) {
				keys = append(keys, c)
			}
		}
		ddl = append(ddl, fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %s_by_date ON %s (%s)`, h.table, h.store, strings.Join(keys, ", ")))
	}
	// The mirror's part: the first version's columns, and the triggers
	// that move it to the store and keep the two apart.
	var insCols, oldVals []string
	for _, n := range h.typedNames {
		insCols = append(insCols, n)
		oldVals = append(oldVals, "OLD."+n)
	}
	ddl = append(ddl, fmt.Sprintf(historyMirrorSQL, t.name, h.store, h.table,
		strings.Join(insCols, ", "), strings.Join(oldVals, ", ")))
	return ddl
}

// readerDDL declares what reads the history: the view of every version,
// the as-of functions and the audit views. The view lists the store's
// columns in the database's order (a column declared later comes last)
// and, for a first version still in its mirror row, the mirror's values
// under the same names.
func (h *historySQL) readerDDL(t *table, storeCols []storeColumn) []string {
	var names, arm []string
	for _, c := range storeCols {
		names = append(names, c.name)
		var v string
		switch c.name {
		case "source", "id", "updated_at", "fetched_at", "content_hash", "deleted_at":
			v = "m." + c.name
		case "seq":
			v = "m.history_seq"
		case "prev_seq":
			v = "NULL::bigint"
		case "deleted":
			v = "m.deleted_at IS NOT NULL"
		case "change":
			v = "'created'::text"
		case "valid_from":
			v = "m.history_valid_from"
		case "recorded_from":
			v = "m.history_recorded_from"
		case "valid_to", "recorded_to":
			v = "'infinity'::timestamptz"
		case "run_id":
			v = "m.history_run_id"
		default:
			if slices.Contains(h.typedNames, c.name) {
				v = "m." + c.name
			} else {
				v = "NULL::" + c.typ // not a column of the mirror
			}
		}
		arm = append(arm, v+" AS "+c.name)
	}
	ddl := []string{fmt.Sprintf(historyViewSQL, h.table, h.store, t.name, strings.Join(names, ", "), strings.Join(arm, ", ")),
		fmt.Sprintf(`COMMENT ON VIEW %s IS 'Every version of %s that this mirror applied (history:): valid_from/valid_to from the provider''s version, recorded_from/recorded_to from the database clock, open ends infinity. A first version that is still the only one is read from its mirror row. Query it with %s_as_of, %s_known_at and %s_versions.'`,
			h.table, t.name, t.name, t.name, t.name),
		fmt.Sprintf(historyFunctionsSQL, t.name, h.table, h.store)}
	return append(ddl, auditDDL[t.resource]...)
}

// storeColumn is a column of the history store as the database holds it.
type storeColumn struct{ name, typ string }

// The statements, with %s for identifiers from the declaration.
const (
	// historyTableSQL: the versions of one record form one chain, which
	// Postgres itself holds: one first version (prev_seq NULL) and at most
	// one successor per version (the one_chain index), each starting
	// exactly where its predecessor ends (the follows key), never before
	// it starts (valid_order). Intervals are therefore contiguous and in
	// order: two versions of one record are never valid at one instant. A
	// GiST exclusion constraint says the same, at 15 times the cost of a
	// write (BENCHMARKS.md). The key leads with seq, which only grows: a new
	// version appends to its right edge instead of a random leaf (the
	// foreign key finds it by the same columns in any order).
	historyTableSQL = `CREATE TABLE IF NOT EXISTS %[1]s (
  source text NOT NULL,
  id text NOT NULL,
  seq bigint GENERATED ALWAYS AS IDENTITY,
  prev_seq bigint,
  %[2]s,
  updated_at timestamptz NOT NULL,
  fetched_at timestamptz NOT NULL,
  content_hash bytea NOT NULL,
  deleted_at timestamptz,
  deleted boolean GENERATED ALWAYS AS (deleted_at IS NOT NULL) STORED,
  change text NOT NULL CHECK (change IN ('first_seen', 'created', 'updated', 'deleted', 'restored')),
  valid_from timestamptz NOT NULL,
  valid_to timestamptz NOT NULL DEFAULT 'infinity',
  recorded_from timestamptz NOT NULL DEFAULT clock_timestamp(),
  recorded_to timestamptz NOT NULL DEFAULT 'infinity',
  run_id text,
  CONSTRAINT %[3]s_pkey PRIMARY KEY (seq, valid_to, source, id),
  CONSTRAINT %[3]s_follows FOREIGN KEY (source, id, prev_seq, valid_from)
    REFERENCES %[1]s (source, id, seq, valid_to) DEFERRABLE INITIALLY IMMEDIATE,
  CONSTRAINT %[3]s_prev_first CHECK (prev_seq < seq),
  CONSTRAINT %[3]s_valid_order CHECK (valid_from <= valid_to),
  CONSTRAINT %[3]s_recorded_order CHECK (recorded_from <= recorded_to)
)`

	// historyMirrorSQL: the mirror's part of the history. %[1]s is the
	// mirror, %[2]s the store, %[3]s the history's name, %[4]s the typed
	// columns the store keeps, %[5]s the same of OLD.
	//
	// keep moves a first version from its mirror row to the store before
	// the row changes or goes (whoever changes it), under the seq it was
	// given, and clears the row's columns: an UPDATE never leaves a
	// version in a mirror row. refuse_beside is the statement trigger that
	// refuses new rows carrying a version when the record has a history
	// already (its mirror row was deleted by hand); Apply then writes them
	// without one (unique_violation: its retry) and chains on the history.
	// first_alone is the same from the store's side, checked at the commit
	// so that keep's own move passes: a first version in the store while
	// the mirror row still holds one is refused.
	historyMirrorSQL = `ALTER TABLE %[1]s ADD COLUMN IF NOT EXISTS history_seq bigint,
  ADD COLUMN IF NOT EXISTS history_valid_from timestamptz,
  ADD COLUMN IF NOT EXISTS history_recorded_from timestamptz,
  ADD COLUMN IF NOT EXISTS history_run_id text;
COMMENT ON COLUMN %[1]s.history_valid_from IS 'With history on: the start of the record''s first version while it is its only one (read it through %[3]s); NULL once the version is in %[2]s.';
CREATE OR REPLACE FUNCTION %[3]s_keep() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  IF OLD.history_valid_from IS NOT NULL THEN
    INSERT INTO %[2]s (seq, source, id, %[4]s, updated_at, fetched_at, content_hash, deleted_at,
      change, valid_from, recorded_from, run_id)
    OVERRIDING SYSTEM VALUE
    VALUES (OLD.history_seq, OLD.source, OLD.id, %[5]s, OLD.updated_at, OLD.fetched_at, OLD.content_hash, OLD.deleted_at,
      'created', OLD.history_valid_from, OLD.history_recorded_from, OLD.history_run_id);
  END IF;
  IF TG_OP = 'DELETE' THEN
    RETURN OLD;
  END IF;
  NEW.history_seq := NULL;
  NEW.history_valid_from := NULL;
  NEW.history_recorded_from := NULL;
  NEW.history_run_id := NULL;
  RETURN NEW;
END $f$;
CREATE OR REPLACE TRIGGER %[3]s_keep BEFORE UPDATE ON %[1]s FOR EACH ROW
  WHEN (OLD.history_valid_from IS NOT NULL OR NEW.history_valid_from IS NOT NULL) EXECUTE FUNCTION %[3]s_keep();
CREATE OR REPLACE TRIGGER %[3]s_keep_deleted BEFORE DELETE ON %[1]s FOR EACH ROW
  WHEN (OLD.history_valid_from IS NOT NULL) EXECUTE FUNCTION %[3]s_keep();
CREATE OR REPLACE FUNCTION %[3]s_refuse_beside() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  -- One probe of the chain index per new row holding a version (LATERAL
  -- with LIMIT: never a scan of the store, whatever the estimates).
  IF EXISTS (SELECT 1 FROM new_rows n CROSS JOIN LATERAL (
               SELECT 1 FROM %[2]s h WHERE h.source = n.source AND h.id = n.id AND coalesce(h.prev_seq, 0) = 0 LIMIT 1) h
             WHERE n.history_valid_from IS NOT NULL) THEN
    RAISE EXCEPTION 'a first version of %% in its mirror row beside a history of the record', TG_TABLE_NAME
      USING ERRCODE = 'unique_violation';
  END IF;
  RETURN NULL;
END $f$;
CREATE OR REPLACE TRIGGER %[3]s_refuse_beside AFTER INSERT ON %[1]s REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION %[3]s_refuse_beside();
CREATE OR REPLACE FUNCTION %[3]s_first_alone() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  IF EXISTS (SELECT 1 FROM %[1]s m WHERE m.source = NEW.source AND m.id = NEW.id AND m.history_valid_from IS NOT NULL) THEN
    RAISE EXCEPTION 'a first version of %% in %% beside one in its mirror row', NEW.id, TG_TABLE_NAME
      USING ERRCODE = 'unique_violation';
  END IF;
  RETURN NULL;
END $f$;
DROP TRIGGER IF EXISTS %[3]s_first_alone ON %[2]s;
CREATE CONSTRAINT TRIGGER %[3]s_first_alone AFTER INSERT ON %[2]s DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW WHEN (NEW.prev_seq IS NULL) EXECUTE FUNCTION %[3]s_first_alone()`

	// historyViewSQL: every version, the store's and the first versions
	// still in their mirror rows. %[4]s are the store's columns, %[5]s the
	// mirror's values of them.
	historyViewSQL = `CREATE OR REPLACE VIEW %[1]s AS
SELECT %[4]s FROM %[2]s
UNION ALL
SELECT %[5]s FROM %[3]s m WHERE m.history_valid_from IS NOT NULL`

	// historyFunctionsSQL: the as-of queries. Plain SQL functions, STABLE:
	// Postgres inlines them into the caller's query, so a filter on a
	// column (spent_date) reaches the index of each part of the view (the
	// store's by_date, the mirror's date index).
	historyFunctionsSQL = `
CREATE OR REPLACE FUNCTION %[1]s_as_of(p_source text, p_at timestamptz) RETURNS SETOF %[3]s
LANGUAGE sql STABLE AS $f$
  SELECT * FROM %[2]s h
  WHERE h.source = p_source AND h.valid_from <= p_at AND h.valid_to > p_at AND NOT h.deleted
$f$;
COMMENT ON FUNCTION %[1]s_as_of(text, timestamptz) IS
  'The live %[1]s of a source as the provider held them at an instant of valid time.';
CREATE OR REPLACE FUNCTION %[1]s_known_at(p_source text, p_at timestamptz) RETURNS SETOF %[3]s
LANGUAGE sql STABLE AS $f$
  SELECT * FROM %[2]s h
  WHERE h.source = p_source AND h.recorded_from <= p_at AND h.recorded_to > p_at AND NOT h.deleted
$f$;
COMMENT ON FUNCTION %[1]s_known_at(text, timestamptz) IS
  'The live %[1]s of a source as this mirror knew them at an instant of recorded time.';
CREATE OR REPLACE FUNCTION %[1]s_versions(p_source text, p_id text) RETURNS SETOF %[3]s
LANGUAGE sql STABLE AS $f$
  SELECT * FROM %[2]s h WHERE h.source = p_source AND h.id = p_id ORDER BY h.seq
$f$;
COMMENT ON FUNCTION %[1]s_versions(text, text) IS
  'Every version of one record, in the order this mirror applied them.';`

	// historyAllocateSQL: the clock and the seqs of the first versions a
	// COPY of new rows keeps in their mirror rows ($1 of them).
	historyAllocateSQL = `WITH q AS (SELECT pg_get_serial_sequence('%s', 'seq')::regclass AS s)
SELECT clock_timestamp(), array_agg(nextval(q.s)) FROM q, generate_series(1, $1)`

	// historyWriteHeadSQL selects the ids just written ($2; $3 whether each
	// was inserted) as the mirror now holds them, for historyChainSQL.
	historyWriteHeadSQL = `WITH clock AS (SELECT clock_timestamp() AS ts),
w AS (SELECT * FROM unnest($2::text[], $3::boolean[]) AS w(id, is_new)),
cur AS (
  SELECT m.id, %[3]s m.updated_at, m.fetched_at, m.content_hash, m.deleted_at, w.is_new,
    CASE WHEN m.deleted_at IS NULL THEN m.updated_at ELSE GREATEST(m.updated_at, m.deleted_at) END AS stamp
  FROM %[1]s m JOIN w ON m.id = w.id WHERE m.source = $1
),
`
	// historyFirstSeenHeadSQL selects, when history is turned on, the rows
	// whose current history version is not the stored one: all of them the
	// first time, those changed while history was off later on. A row
	// still holding its first version has not changed since (its first
	// change would have moved it to the store).
	historyFirstSeenHeadSQL = `WITH clock AS (SELECT clock_timestamp() AS ts),
cur AS (
  SELECT m.id, %[3]s m.updated_at, m.fetched_at, m.content_hash, m.deleted_at, false AS is_new,
    CASE WHEN m.deleted_at IS NULL THEN m.updated_at ELSE GREATEST(m.updated_at, m.deleted_at) END AS stamp
  FROM %[1]s m WHERE m.source = $1 AND m.history_valid_from IS NULL AND NOT EXISTS (
    SELECT 1 FROM %[2]s h WHERE h.source = $1 AND h.id = m.id AND h.valid_to = 'infinity'
      AND h.content_hash = m.content_hash)
),
`
	// historyChainSQL closes the current version of each row of cur and
	// adds its new one. One clock reading serves both ends, so recorded
	// intervals follow each other exactly. %[5]s is the change, %[6]s the
	// run.
	historyChainSQL = `prev AS (
  UPDATE %[2]s h SET valid_to = GREATEST(cur.stamp, h.valid_from), recorded_to = (SELECT ts FROM clock)
  FROM cur WHERE h.source = $1 AND h.id = cur.id AND h.valid_to = 'infinity'
  RETURNING h.id, h.seq, h.valid_from, h.deleted
)
INSERT INTO %[2]s (source, id, prev_seq, %[4]s updated_at, fetched_at, content_hash, deleted_at,
  change, valid_from, recorded_from, run_id)
SELECT $1, m.id, prev.seq, %[3]s m.updated_at, m.fetched_at, m.content_hash, m.deleted_at,
  %[5]s, GREATEST(m.stamp, prev.valid_from), (SELECT ts FROM clock), %[6]s
FROM cur m LEFT JOIN prev ON prev.id = m.id`

	// historyChangeSQL words a written version's change; a version whose
	// record had none while history was on is first seen.
	historyChangeSQL = `CASE WHEN prev.id IS NULL AND NOT m.is_new THEN 'first_seen'
       WHEN prev.id IS NULL OR (prev.deleted AND m.is_new) THEN 'created'
       WHEN m.deleted_at IS NOT NULL THEN 'deleted'
       WHEN prev.deleted THEN 'restored'
       ELSE 'updated' END`

	// historyPruneSQL deletes versions whose valid time ended before the
	// horizon (never a current one, whose valid_to is infinity), then makes
	// the first version left of each record the first of its chain. The
	// follows key is deferred to the commit for it (PruneHistory).
	historyPruneSQL = `WITH gone AS (
  DELETE FROM %[1]s WHERE source = $1 AND valid_to < $2
  RETURNING id, seq
)
SELECT count(*), coalesce(array_agg(id), '{}'), coalesce(array_agg(seq), '{}') FROM gone`
	historyRelinkSQL = `UPDATE %[1]s h SET prev_seq = NULL
FROM unnest($2::text[], $3::bigint[]) AS g(id, seq)
WHERE h.source = $1 AND h.id = g.id AND h.prev_seq = g.seq`
)

// historyOf returns the history statements of t.
func (t *table) historyOf() *historySQL {
	t.histOnce.Do(func() { t.hist = newHistorySQL(t) })
	return t.hist
}

// writeHistory adds the versions of the ids just written (isNew: inserted
// by this write) in tx.
func writeHistory(ctx context.Context, tx pgx.Tx, t *table, source, runID string, ids []string, isNew []bool) error {
	var run any
	if runID != "" {
		run = runID
	}
	if _, err := tx.Exec(ctx, t.historyOf().write, source, ids, isNew, run); err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	return nil
}

// historyLockKey serializes PrepareHistory's DDL across processes.
const historyLockKey = 0x7469646d_68697374 // "tidmhist"

// PrepareHistory brings the history of source in line with its config: for
// each resource of on, the history table and functions exist (declared from
// the resource), and when its history was off until now (history_sources),
// the stored version of every row whose current history version is not it
// is recorded as first seen, not as a change. For each resource of off,
// history is marked off: what was recorded stays. Cheap when nothing
// changed: a few catalog reads.
func PrepareHistory(ctx context.Context, db DB, source string, on, off []clients.Resource) error {
	if len(on) > 0 {
		// Recording the first versions locks rows an applier may be
		// writing: a deadlock Postgres broke on our side is tried again.
		var err error
		for attempt := 1; attempt <= maxAttempts; attempt++ {
			if err = EnsureHistory(ctx, db, source, on); err == nil || !isDeadlock(err) {
				break
			}
		}
		if err != nil {
			return err
		}
	}
	if len(off) == 0 {
		return nil
	}
	names := make([]string, len(off))
	for i, r := range off {
		names[i] = string(r)
	}
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM history_sources WHERE source = $1 AND resource = ANY($2)`, source, names); err != nil {
			return fmt.Errorf("history: mark %s off: %w", source, err)
		}
		return nil
	})
}

// EnsureHistory declares the history of resources (table, indexes,
// functions) where it is missing, and records the first versions of
// source's rows for each resource whose history was off.
func EnsureHistory(ctx context.Context, db DB, source string, resources []clients.Resource) error {
	if len(resources) == 0 {
		return nil
	}
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(historyLockKey)); err != nil {
			return fmt.Errorf("history: lock: %w", err)
		}
		for _, r := range resources {
			if err := ensureOne(ctx, tx, source, r); err != nil {
				return err
			}
		}
		return nil
	})
}

func ensureOne(ctx context.Context, tx pgx.Tx, source string, r clients.Resource) error {
	t, ok := tableFor(r)
	if !ok {
		return fmt.Errorf("history: unknown resource %q", r)
	}
	h := t.historyOf()
	if err := declareHistory(ctx, tx, t, h); err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, `INSERT INTO history_sources (source, resource) VALUES ($1, $2) ON CONFLICT DO NOTHING`, source, string(r))
	if err != nil {
		return fmt.Errorf("history: mark %s/%s on: %w", source, r, err)
	}
	if tag.RowsAffected() == 0 {
		return nil // on without a break: every change has its version
	}
	if _, err := tx.Exec(ctx, h.firstSeen, source); err != nil {
		return fmt.Errorf("history: first versions of %s/%s: %w", source, r, err)
	}
	return nil
}

// declareHistory creates what is missing of t's history: the store, a
// column declared since, the mirror's columns and triggers, the view and
// the functions. A history from before the store (a table named as the
// view is now) becomes the store. Nothing is locked when nothing is
// missing.
func declareHistory(ctx context.Context, tx pgx.Tx, t *table, h *historySQL) error {
	var have []string
	var mirrorReady bool
	var legacy bool
	err := tx.QueryRow(ctx, `SELECT coalesce((SELECT array_agg(attname::text) FROM pg_attribute
		WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped), '{}'),
		EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($2) AND attname = 'history_seq' AND NOT attisdropped),
		EXISTS (SELECT 1 FROM pg_class WHERE oid = to_regclass($3) AND relkind = 'r')`, h.store, h.mirror, h.table).Scan(&have, &mirrorReady, &legacy)
	if err != nil {
		return fmt.Errorf("history: read %s: %w", h.store, err)
	}
	if len(have) > 0 && mirrorReady && !missingColumns(t, have) {
		return nil
	}
	if len(have) == 0 && legacy {
		// Every version of this history is in the table: it becomes the
		// store, under the same constraints and indexes.
		if _, err := tx.Exec(ctx, fmt.Sprintf(`ALTER TABLE %s RENAME TO %s`, h.table, h.store)); err != nil {
			return fmt.Errorf("history: %s becomes %s: %w", h.table, h.store, err)
		}
	}
	for _, stmt := range h.ddl {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("history: declare %s: %w", h.store, err)
		}
	}
	if err := widenDateIndex(ctx, tx, h); err != nil {
		return err
	}
	rows, _ := tx.Query(ctx, `SELECT attname::text, format_type(atttypid, atttypmod) FROM pg_attribute
		WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, h.store)
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (storeColumn, error) {
		var c storeColumn
		return c, r.Scan(&c.name, &c.typ)
	})
	if err != nil {
		return fmt.Errorf("history: read %s: %w", h.store, err)
	}
	for _, stmt := range h.readerDDL(t, cols) {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("history: declare %s: %w", h.table, err)
		}
	}
	return nil
}

// widenDateIndex makes the mirror's date index (source, <date>), when it
// has one, (source, <date>, history_valid_from) under the same name: the
// as-of functions then find the first versions still in mirror rows of a
// date range in the index alone, without reading every row of the range,
// and a row inserted costs no index more than before.
func widenDateIndex(ctx context.Context, tx pgx.Tx, h *historySQL) error {
	if h.dated == "" {
		return nil
	}
	var name *string
	err := tx.QueryRow(ctx, `SELECT min(i.indexrelid::regclass::text) FROM pg_index i
		WHERE i.indrelid = to_regclass($1) AND NOT i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL
		  AND i.indkey::text = concat_ws(' ',
		    (SELECT attnum FROM pg_attribute WHERE attrelid = i.indrelid AND attname = 'source'),
		    (SELECT attnum FROM pg_attribute WHERE attrelid = i.indrelid AND attname = $2))`, h.mirror, h.dated).Scan(&name)
	if err != nil {
		return fmt.Errorf("history: read the date index of %s: %w", h.mirror, err)
	}
	if name == nil {
		return nil // none, or widened already
	}
	stmt := fmt.Sprintf(`DROP INDEX %[1]s; CREATE INDEX %[1]s ON %[2]s (source, %[3]s, history_valid_from)`, *name, h.mirror, h.dated)
	if _, err := tx.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("history: widen %s: %w", *name, err)
	}
	return nil
}

func missingColumns(t *table, have []string) bool {
	for _, c := range t.typed {
		if !slices.Contains(have, c.name) {
			return true
		}
	}
	return false
}

// PruneHistory deletes the versions of source's resource whose valid time
// ended before horizon, never a current one. It returns how many it
// deleted.
func PruneHistory(ctx context.Context, db DB, source string, r clients.Resource, horizon time.Time) (int64, error) {
	t, ok := tableFor(r)
	if !ok {
		return 0, fmt.Errorf("prune history: unknown resource %q", r)
	}
	h := t.historyOf()
	var n int64
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf(`SET CONSTRAINTS %s_follows DEFERRED`, h.table)); err != nil {
			return err
		}
		var ids []string
		var seqs []int64
		if err := tx.QueryRow(ctx, h.prune, source, horizon).Scan(&n, &ids, &seqs); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, h.relink, source, ids, seqs)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune history %s/%s: %w", source, r, err)
	}
	return n, nil
}

// HistoryResources are the resources that may have a history: every
// registered resource table (child tables follow their parent's raw).
func HistoryResources() []clients.Resource {
	var out []clients.Resource
	for _, def := range schema.All() {
		out = append(out, def.Name)
	}
	return out
}
