// Package poller owns the passes that keep a mirror current — incremental,
// backfill and reconcile —, the leases that keep one pass per source at a
// time across processes, and the cron daemon that schedules them. It plans
// windows from cursors and drives clients, upsert and cursor; it holds no SQL.
package poller

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/cursor"
	"github.com/tidemarkhq/tidemark/lease"
	"github.com/tidemarkhq/tidemark/upsert"
)

// Defaults for Source fields left zero.
const (
	DefaultOverlap       = 10 * time.Minute
	DefaultLookbackDays  = 90
	DefaultMaxTombstones = 1000
	DefaultWindowDays    = 30
	// dbTimeout bounds one database step of a pass. Database work runs on a
	// context detached from shutdown, so the page in hand commits or rolls
	// back on its own terms rather than being cut mid-statement.
	dbTimeout = 2 * time.Minute
)

// Observer is told what passes do; internal/metrics implements it with
// Prometheus. The poller depends on this interface, not on the metrics.
type Observer interface {
	// Records counts n records of a page by outcome (inserted, updated,
	// unchanged, stale, tombstoned).
	Records(source, resource, outcome string, n int64)
	// Pass reports a finished pass: kind, status (ok, failed) and duration.
	Pass(source, resource, kind, status string, took time.Duration)
	// Lag reports the source's clock at the pass minus the new high water.
	Lag(source, resource string, lag time.Duration)
}

// BackfillObserver is an Observer that also wants a backfill's progress:
// each applied window (done false) and its end (done true).
type BackfillObserver interface {
	BackfillProgress(source, resource string, done bool)
}

// BackoffObserver is an Observer that also wants each resource's back-off:
// until when its passes of kind wait, and why (capped, failing); a zero
// until after a success.
type BackoffObserver interface {
	Backoff(source, resource, kind, reason string, until time.Time)
}

func (p *Poller) backoffMark(source string, r clients.Resource, kind, reason string, until time.Time) {
	if bo, ok := p.metrics.(BackoffObserver); ok {
		bo.Backoff(source, string(r), kind, reason, until)
	}
}

func (p *Poller) backfillMark(source string, r clients.Resource, done bool) {
	if bo, ok := p.metrics.(BackfillObserver); ok {
		bo.BackfillProgress(source, string(r), done)
	}
}

type nopObserver struct{}

func (nopObserver) Records(string, string, string, int64)              {}
func (nopObserver) Pass(string, string, string, string, time.Duration) {}
func (nopObserver) Lag(string, string, time.Duration)                  {}

// Source is a configured source with its pass settings.
type Source struct {
	clients.Source
	Resources     []clients.Resource
	Overlap       time.Duration
	LookbackDays  int
	MaxTombstones int
	WindowDays    int
	// Events appends every real change to the change feed (`events: on`).
	Events bool
	// History keeps every version of these resources (`history:`); the
	// daemon prunes versions whose valid time ended HistoryKeep ago (0:
	// never).
	History     []clients.Resource
	HistoryKeep time.Duration

	memo *pageMemo // the incremental pages that wrote nothing (memo.go)
}

// HistoryOn reports whether the source keeps the history of r.
func (s *Source) HistoryOn(r clients.Resource) bool { return slices.Contains(s.History, r) }

// writeOptions are how the source's pages of r are written by run.
func (s *Source) writeOptions(r clients.Resource, runID string) []upsert.Option {
	return []upsert.Option{upsert.WithEvents(s.Events), upsert.WithHistory(s.HistoryOn(r)), upsert.WithRun(runID)}
}

// Params configure a Poller.
type Params struct {
	Pool    *pgxpool.Pool
	Sources []Source
	Logger  zerolog.Logger
	// Observer is told of records, passes and lag (metrics); nil: none.
	Observer Observer
	// Leaser defaults to one on Pool's database.
	Leaser *lease.Leaser
}

// Poller runs passes.
type Poller struct {
	pool    *pgxpool.Pool
	store   *cursor.Store
	leaser  *lease.Leaser
	log     zerolog.Logger
	metrics Observer
	srcMu   sync.RWMutex // guards sources and order: a reload changes them
	sources map[string]*Source
	order   []string
	modes   sync.Map // "source/resource" → the read mode last recorded
	// idle is set while a daemon runs the passes: it gathers every
	// source's idle runs for one statement every idleRunsEvery (runs.go),
	// and the passes give their pass leases up with lease.ReleaseSoon.
	idle atomic.Pointer[idleRuns]
}

// New returns a Poller.
func New(p Params) (*Poller, error) {
	if p.Pool == nil {
		return nil, errors.New("poller: no database pool")
	}
	pl := &Poller{
		pool:    p.Pool,
		store:   cursor.New(p.Pool),
		leaser:  p.Leaser,
		log:     p.Logger,
		metrics: p.Observer,
		sources: map[string]*Source{},
	}
	if pl.metrics == nil {
		pl.metrics = nopObserver{}
	}
	if pl.leaser == nil {
		pl.leaser = lease.New(p.Pool.Config().ConnString())
	}
	for i := range p.Sources {
		if err := pl.AddSource(p.Sources[i]); err != nil {
			return nil, err
		}
	}
	return pl, nil
}

// AddSource adds a source (at New, or when a reload adds it).
func (p *Poller) AddSource(s Source) error {
	p.srcMu.Lock()
	defer p.srcMu.Unlock()
	if _, dup := p.sources[s.Name()]; dup {
		return fmt.Errorf("poller: duplicate source %q", s.Name())
	}
	if len(s.Resources) == 0 {
		s.Resources = s.Source.Resources()
	}
	s.Overlap = cmp.Or(s.Overlap, DefaultOverlap)
	s.LookbackDays = cmp.Or(s.LookbackDays, DefaultLookbackDays)
	s.MaxTombstones = cmp.Or(s.MaxTombstones, DefaultMaxTombstones)
	s.WindowDays = cmp.Or(s.WindowDays, DefaultWindowDays)
	s.memo = &pageMemo{}
	p.sources[s.Name()] = &s
	p.order = append(p.order, s.Name())
	return nil
}

// RemoveSource forgets a source (a reload removed or replaced it); a pass
// in flight keeps the Source it has.
func (p *Poller) RemoveSource(name string) {
	p.srcMu.Lock()
	defer p.srcMu.Unlock()
	delete(p.sources, name)
	p.order = slices.DeleteFunc(slices.Clone(p.order), func(n string) bool { return n == name })
}

// Close frees the leases.
func (p *Poller) Close() { p.leaser.Close() }

// Store exposes the cursor store (for the CLI's listings).
func (p *Poller) Store() *cursor.Store { return p.store }

// Sources returns the source names in configuration order.
func (p *Poller) Sources() []string {
	p.srcMu.RLock()
	defer p.srcMu.RUnlock()
	return p.order
}

func (p *Poller) source(name string) (*Source, error) {
	if s := p.src(name); s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("no source named %q", name)
}

// src returns the source named, nil when there is none (removed by a
// reload while its tick waited).
func (p *Poller) src(name string) *Source {
	p.srcMu.RLock()
	defer p.srcMu.RUnlock()
	return p.sources[name]
}

func (p *Poller) resources(s *Source, only []clients.Resource) ([]clients.Resource, error) {
	if len(only) == 0 {
		return s.Resources, nil
	}
	for _, r := range only {
		ok := false
		for _, have := range s.Resources {
			ok = ok || have == r
		}
		if !ok {
			return nil, fmt.Errorf("source %q does not mirror %s (its resources: %v)", s.Name(), r, s.Resources)
		}
	}
	return only, nil
}

// Result reports one finished pass of one resource.
type Result struct {
	RunID           string
	Source          string
	Resource        clients.Resource
	Kind            string
	Pages           int
	Counts          cursor.Counts
	HighWaterBefore time.Time
	HighWaterAfter  time.Time
	SourceTime      time.Time
	Took            time.Duration
}

func newRunID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%s", time.Now().UTC().Format("20060102T150405"), hex.EncodeToString(b))
}

// listing accumulates what a listing delivered.
type listing struct {
	pages      int
	counts     cursor.Counts
	maxVersion time.Time
	sourceTime time.Time // the source's clock when it served the first page
	// firstMax is the newest version on the first page: no later than the
	// instant it was served, so a stand-in for sourceTime when the source
	// sent no Date header. took is how long the listing took, by our clock.
	firstMax time.Time
	took     time.Duration
	seen     []string // ids seen, when collecting (reconcile)
	// runID is the run's; held is the earliest version among the records
	// it put in record_quarantine (zero: none), which an incremental
	// cursor stays below so that the next pass reads them again.
	runID string
	held  time.Time
	// holdAll: a quarantined record had no version; the cursor stays.
	holdAll bool
}

// applyListing streams a listing into the database, each page in its own
// transaction, committed as soon as the page is applied: no transaction stays
// open across an HTTP request or a wait (DESIGN.md guarantee 10), so limiter
// spacing, a Retry-After or an hour's quota wait hold no locks and no pool
// connection. When the whole listing is in, finalize runs in a transaction of
// its own (the cursor move, the backfill progress, the tombstones, the run
// row): a crash anywhere leaves the old cursor with some pages re-appliable
// (a no-op), or the new cursor with everything before it applied. When the
// listing fails, pages already applied stay (they are valid records) and
// finalize does not run. When the listing wrote nothing (no records, or
// only unchanged ones), finalize gets a nil transaction and writes through
// the pool, or opens the transaction it needs: an idle pass costs none.
func (p *Poller) applyListing(ctx context.Context, log zerolog.Logger, s *Source, r clients.Resource, w clients.Window,
	kind, runID string, finalize func(context.Context, pgx.Tx, *listing) error) (*listing, error) {
	return p.applyListingThen(ctx, log, s, r, w, kind, runID, nil, finalize)
}

// applyListingThen is applyListing with then, when not nil, run after a
// complete listing and before finalize, outside any transaction: it may
// ask the source for more (a reconcile's lookup of absent ids) and hands
// what it gets to page, which applies it as one more page of the listing.
func (p *Poller) applyListingThen(ctx context.Context, log zerolog.Logger, s *Source, r clients.Resource, w clients.Window,
	kind, runID string, then func(context.Context, *listing, func(context.Context, clients.Page) error) error,
	finalize func(context.Context, pgx.Tx, *listing) error) (*listing, error) {
	l := &listing{runID: runID}
	collect := kind == cursor.KindReconcile
	// Pages are remembered only while this process owns the source, which
	// keeps every other writer of its rows out (memo.go).
	remember := kind == cursor.KindIncremental && !looksUpEveryPage(ctx) && p.leaser.Holds(ownerLease(s.Name()))
	if !remember {
		// A backfill or reconcile writes beside the incremental pages
		// remembered (a reconcile's tombstones make a stored row older
		// than a re-delivery): they are looked up again.
		s.memo.forget(r)
		defer s.memo.forget(r)
	}
	hook := pageHook(ctx)
	dbctx := context.WithoutCancel(ctx)
	began := time.Now()
	page := func(ctx context.Context, pg clients.Page) error {
		if l.pages == 0 {
			l.sourceTime = pg.SourceTime
		}
		l.pages++
		if hook != nil {
			defer hook(l.pages)
		}
		if pg.Covered.After(l.maxVersion) {
			l.maxVersion = pg.Covered
		}
		if len(pg.Records) == 0 {
			// Nothing to write (the common idle pass): no transaction, no
			// round trips; finalize opens the one it needs.
			return nil
		}
		var (
			key pageKey
			uc  upsert.Counts
			hit bool
			now = time.Now()
		)
		if remember {
			key = fingerprint(pg.Records)
			uc, hit = s.memo.get(r, key, now)
		}
		if !hit {
			gen := s.memo.generation()
			q0 := l.counts.Quarantined
			var err error
			if uc, err = p.applyPage(dbctx, s, r, pg, l); err != nil {
				return err
			}
			switch {
			case l.counts.Quarantined > q0:
				// Not remembered: its quarantined records are tried again
				// at every re-delivery.
			case uc.Tombstoned+uc.Ties > 0:
				// A row written deleted or otherwise at the same version
				// (Toggl's workspace scope tombstones absent entries so)
				// may stand in a remembered page: its re-delivery must be
				// looked up to heal it.
				s.memo.forget(r)
			case remember:
				// Committed: an identical re-delivery finds each row at
				// this version and writes nothing, just as a page that
				// wrote nothing: the first idle pass after a change needs
				// no lookup either.
				s.memo.put(r, key, upsert.Counts{Unchanged: uc.Inserted + uc.Updated + uc.Unchanged, Stale: uc.Stale}, now, gen)
			}
		}
		l.counts.Add(cursor.Counts{Fetched: int64(len(pg.Records)), Counts: uc})
		for i := range pg.Records {
			if v := pg.Records[i].Version; v.After(l.maxVersion) {
				l.maxVersion = v
			}
			if v := pg.Records[i].Version; l.pages == 1 && v.After(l.firstMax) {
				l.firstMax = v
			}
			if collect {
				l.seen = append(l.seen, pg.Records[i].ID)
			}
		}
		p.metrics.Records(s.Name(), string(r), "inserted", uc.Inserted)
		p.metrics.Records(s.Name(), string(r), "updated", uc.Updated)
		p.metrics.Records(s.Name(), string(r), "unchanged", uc.Unchanged)
		p.metrics.Records(s.Name(), string(r), "stale", uc.Stale)
		log.Debug().Int("page", pg.Number).Int("records", len(pg.Records)).Bool("remembered", hit).
			Int64("inserted", uc.Inserted).Int64("updated", uc.Updated).
			Int64("unchanged", uc.Unchanged).Int64("stale", uc.Stale).Msg("page applied")
		return nil
	}
	err := safeList(ctx, s, r, w, page)
	if err == nil && then != nil {
		err = then(ctx, l, page)
	}
	l.took = time.Since(began)
	if err != nil {
		return l, err
	}
	c, cancel := context.WithTimeout(dbctx, dbTimeout)
	defer cancel()
	if l.counts.Inserted+l.counts.Updated+l.counts.Tombstoned == 0 {
		// Nothing was written (no records, or only the overlap's
		// re-deliveries, unchanged): finalize writes on its own, or opens
		// the transaction it needs (a cursor that moves, a nested
		// listing's Covered too), and an idle pass costs none.
		return l, finalize(c, nil, l)
	}
	tx, err := p.pool.Begin(c)
	if err != nil {
		return l, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(dbctx)
	if err := finalize(c, tx, l); err != nil {
		return l, err
	}
	if err := tx.Commit(c); err != nil {
		return l, fmt.Errorf("commit the end of the listing: %w", err)
	}
	return l, nil
}

// safeList is s.List with a panic in it (the client's decoders, this
// side's page writes) turned into the listing's error: the pass fails, as
// for any bad page, and the process and the other sources go on.
func safeList(ctx context.Context, s *Source, r clients.Resource, w clients.Window, fn func(context.Context, clients.Page) error) (err error) {
	defer func() {
		if perr := clients.Recovered("list "+string(r), recover()); perr != nil {
			err = perr
		}
	}()
	return s.List(ctx, r, w, fn)
}

// logPanic logs a recovered panic's stack (the run's error has its value).
func logPanic(log zerolog.Logger, err error) {
	var pe *clients.PanicError
	if errors.As(err, &pe) {
		log.Error().Str("panic", fmt.Sprint(pe.Value)).Str("stack", string(pe.Stack)).Msg("recovered from a panic; the pass failed")
	}
}

// applyPage writes one page in a transaction of its own, which upsert opens
// only when the page has something to write (a page of the overlap's
// re-deliveries is one lookup).
func (p *Poller) applyPage(ctx context.Context, s *Source, r clients.Resource, pg clients.Page, l *listing) (upsert.Counts, error) {
	c, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	uc, err := upsert.Apply(c, p.pool, s.Name(), r, pg.Records, s.writeOptions(r, l.runID)...)
	if err != nil && failsAlone(err) {
		// The slow path: a record that cannot be stored fails alone.
		uc, err = p.applyEach(c, s, r, pg, l)
	}
	if err != nil {
		return uc, fmt.Errorf("apply page %d of %s/%s: %w", pg.Number, s.Name(), r, err)
	}
	return uc, nil
}

// failsAlone reports whether err is about a record's content (a value the
// upsert or the database refuses) rather than the database or the pass:
// such a record is quarantined while the rest of its page goes in.
func failsAlone(err error) bool {
	if _, ok := errors.AsType[*upsert.RecordError](err); ok {
		return true
	}
	pe, ok := errors.AsType[*pgconn.PgError](err)
	// Class 22: data exceptions (a value out of range, a character the
	// encoding refuses); class 23 but a unique violation (which Apply
	// retries): a constraint the record breaks.
	return ok && (strings.HasPrefix(pe.Code, "22") || (strings.HasPrefix(pe.Code, "23") && pe.Code != "23505"))
}

// applyEach writes a page record by record, each under a savepoint of one
// transaction: those that fail go to record_quarantine (named with their
// error, counted in the run) and the others go in. Only a page whose batch
// write failed takes it.
func (p *Poller) applyEach(ctx context.Context, s *Source, r clients.Resource, pg clients.Page, l *listing) (upsert.Counts, error) {
	var uc upsert.Counts
	var bad []cursor.Quarantined
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		uc, bad = upsert.Counts{}, bad[:0]
		for i := range pg.Records {
			rec := &pg.Records[i]
			sp, err := tx.Begin(ctx)
			if err != nil {
				return err
			}
			c, err := upsert.Apply(ctx, sp, s.Name(), r, pg.Records[i:i+1], s.writeOptions(r, l.runID)...)
			if err != nil {
				if rbErr := sp.Rollback(ctx); rbErr != nil {
					return rbErr
				}
				if !failsAlone(err) {
					return err
				}
				bad = append(bad, cursor.Quarantined{ID: rec.ID, Version: rec.Version, Raw: string(rec.Raw), Error: err.Error()})
				continue
			}
			if err := sp.Commit(ctx); err != nil {
				return err
			}
			uc.Add(c)
		}
		return cursor.Quarantine(ctx, tx, s.Name(), string(r), l.runID, bad)
	})
	if err != nil {
		return uc, err
	}
	log := zerolog.Ctx(ctx)
	for _, q := range bad {
		log.Warn().Str("id", cursor.Printable(q.ID)).Int("page", pg.Number).
			Str("error", q.Error).Msg("record could not be stored; quarantined (the rest of its page went in)")
		switch {
		case q.Version.IsZero():
			l.holdAll = true
		case l.held.IsZero() || q.Version.Before(l.held):
			l.held = q.Version
		}
	}
	l.counts.Quarantined += int64(len(bad))
	return uc, nil
}

// passLogger is the child logger of one pass: every line carries source,
// resource and run id.
func (p *Poller) passLogger(source string, r clients.Resource, runID, kind string) zerolog.Logger {
	return p.log.With().Str("source", source).Str("resource", string(r)).Str("run_id", runID).Str("kind", kind).Logger()
}

// runStatus is the status of a run that ended with err.
func runStatus(err error) string {
	if errors.Is(err, context.Canceled) {
		return cursor.StatusCancelled
	}
	return cursor.StatusFailed
}

// recordFailed writes a failed or cancelled incremental run.
func (p *Poller) recordFailed(ctx context.Context, log zerolog.Logger, rec cursor.RunRecord) {
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := cursor.RecordRuns(c, p.pool, []cursor.RunRecord{rec}); err != nil {
		log.Error().Err(err).Msg("could not record the end of the run")
	}
}

// finishFailed records a failed or cancelled backfill or reconcile run (a
// successful one is recorded in the transaction of its last page).
func (p *Poller) finishFailed(ctx context.Context, log zerolog.Logger, runID string, l *listing, err error) {
	fp := cursor.FinishRunParams{RunID: runID, Status: runStatus(err), Error: err.Error()}
	if l != nil {
		fp.Pages, fp.Counts = l.pages, l.counts
	}
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if ferr := cursor.FinishRun(c, p.pool, fp); ferr != nil {
		log.Error().Err(ferr).Msg("could not record the end of the run")
	}
}

// db returns tx, or the pool when there is no transaction.
func (p *Poller) db(tx pgx.Tx) cursor.DB {
	if tx == nil {
		return p.pool
	}
	return tx
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
