package poller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/cursor"
	"github.com/tidemarkhq/tidemark/lease"
	"github.com/tidemarkhq/tidemark/schema"
	"github.com/tidemarkhq/tidemark/upsert"
)

// Incremental runs one incremental pass of a source: for each resource,
// everything updated since the cursor minus the overlap. It takes the
// source's lease (ErrBusy when another pass holds it). One resource failing
// does not stop the others; the errors are joined.
func (p *Poller) Incremental(ctx context.Context, source string, only ...clients.Resource) ([]Result, error) {
	return p.eachResource(ctx, source, only, cursor.KindIncremental)
}

// Step is one pass of one resource.
type Step struct {
	Resource clients.Resource
	Kind     string // cursor.KindIncremental or cursor.KindReconcile
}

// StepResult is the outcome of one Step. Skipped means the resource is not
// available from the source (clients.ErrUnsupported): warned, not failed.
type StepResult struct {
	Step
	Result  Result
	Err     error
	Skipped bool
}

// Steps runs steps of one source in order under the source's pass lease
// (a resource listed by date beside the steps after it).
// Each step succeeds or fails on its own, so that one failing resource
// neither blocks nor backs off the others. The error is for the source as a
// whole (its lease is busy or unreachable); step errors are in the results.
func (p *Poller) Steps(ctx context.Context, source string, steps []Step) ([]StepResult, error) {
	s, err := p.source(source)
	if err != nil {
		return nil, err
	}
	for _, st := range steps {
		if _, err := p.resources(s, []clients.Resource{st.Resource}); err != nil {
			return nil, err
		}
		if st.Kind != cursor.KindIncremental && st.Kind != cursor.KindReconcile {
			return nil, fmt.Errorf("unknown pass kind %q", st.Kind)
		}
	}
	// The cursors are read at once, in the lease statement's round trip
	// (after the lock: what the last holder committed), and the idle runs
	// written at once.
	hws := map[string]time.Time{}
	sql, args, scan := cursor.HighWatersQuery(source, hws)
	held, err := p.leaser.TryAcquireThen(ctx, PassLease(source), &lease.Read{SQL: sql, Args: args, Scan: scan})
	if err != nil {
		return nil, err
	}
	if p.idle.Load() != nil {
		// The unlock rides on the next lease statement: a daemon takes a
		// pass lease per source and tick.
		defer held.ReleaseSoon()
	} else {
		defer held.Release()
	}
	sp := &sourcePass{held: held, highWaters: hws, runs: runBatch{runs: make([]cursor.RunRecord, 0, len(steps))}}
	defer p.recordRuns(&sp.runs)
	// A resource listed by date (time entries) whose listing turns out long
	// (a first sync: besideAfter pages) goes on beside the steps after it,
	// which never point at it, so that they spend the source's one budget
	// while its pages are written. A short listing runs alone, at the
	// budget's full pace: a walk that takes longer is likelier to shift
	// under a busy account. Every other step waits for the ones before it
	// (reference data first).
	out := make([]StepResult, len(steps))
	var beside sync.WaitGroup
	for i, st := range steps {
		if ctx.Err() != nil {
			out[i] = StepResult{Step: st, Err: ctx.Err()}
			continue
		}
		if def, ok := schema.Lookup(st.Resource); ok && def.ListedByDate() && i < len(steps)-1 {
			long := make(chan struct{})
			var once sync.Once
			done := func() { once.Do(func() { close(long) }) }
			hooked := withPageHook(ctx, func(pages int) {
				if pages >= besideAfter {
					done()
				}
			})
			beside.Go(func() {
				defer done()
				out[i] = p.step(hooked, s, st, sp)
			})
			<-long
			continue
		}
		out[i] = p.step(ctx, s, st, sp)
	}
	beside.Wait()
	return out, nil
}

// besideAfter is how many pages make a listing long enough for the steps
// after it to run beside it (Steps).
const besideAfter = 25

type pageHookKey struct{}

// withPageHook has applyListing call fn with the pages applied so far
// after each page.
func withPageHook(ctx context.Context, fn func(pages int)) context.Context {
	return context.WithValue(ctx, pageHookKey{}, fn)
}

func pageHook(ctx context.Context) func(int) {
	fn, _ := ctx.Value(pageHookKey{}).(func(int))
	return fn
}

// sourcePass is what the steps of one Steps call share: the source's pass
// lease, its cursors as they were when the lease was taken, and the idle
// runs to write when the steps are done.
type sourcePass struct {
	held       *lease.Lease
	highWaters map[string]time.Time
	runs       runBatch
}

// step runs one pass of one resource. A panic in it fails the pass (run
// recorded, logged with its stack), never the process.
func (p *Poller) step(ctx context.Context, s *Source, st Step, sp *sourcePass) (sr StepResult) {
	// Built only for a line to write: an idle pass writes none.
	stepLog := func() zerolog.Logger {
		return p.log.With().Str("source", s.Name()).Str("resource", string(st.Resource)).Str("kind", st.Kind).Logger()
	}
	defer func() {
		perr := clients.Recovered(fmt.Sprintf("%s/%s %s pass", s.Name(), st.Resource, st.Kind), recover())
		if perr == nil {
			return
		}
		log := stepLog()
		logPanic(log, perr)
		// The failed run, for `tidemark runs`.
		runID, now := newRunID(), time.Now()
		if st.Kind == cursor.KindIncremental {
			p.recordFailed(ctx, log, cursor.RunRecord{RunID: runID, Source: s.Name(), Resource: string(st.Resource),
				Started: now, Finished: now, Status: cursor.StatusFailed, Error: perr.Error()})
		} else if err := p.store.StartRun(context.WithoutCancel(ctx), cursor.StartRunParams{RunID: runID, Source: s.Name(),
			Resource: string(st.Resource), Kind: st.Kind}); err == nil {
			p.finishFailed(ctx, log, runID, nil, perr)
		}
		p.metrics.Pass(s.Name(), string(st.Resource), st.Kind, "failed", 0)
		sr = StepResult{Step: st, Err: perr}
	}()
	var res Result
	var err error
	if st.Kind == cursor.KindReconcile {
		res, err = p.reconcile(ctx, s, st.Resource, sp.held)
	} else {
		res, err = p.incremental(ctx, s, st.Resource, sp)
	}
	if err != nil {
		logPanic(stepLog(), err)
	}
	sr = StepResult{Step: st, Result: res, Err: err}
	if errors.Is(err, clients.ErrUnsupported) {
		// E.g. a token not allowed to list users: recorded in the run,
		// warned about, but not a failure of the source.
		p.log.Warn().Err(err).Str("source", s.Name()).Str("resource", string(st.Resource)).Msg("resource not available from this source; skipped")
		sr.Err, sr.Skipped = nil, true
	}
	return sr
}

// eachResource runs one kind of pass on each resource (all when only is
// empty); the errors are joined.
func (p *Poller) eachResource(ctx context.Context, source string, only []clients.Resource, kind string) ([]Result, error) {
	s, err := p.source(source)
	if err != nil {
		return nil, err
	}
	rs, err := p.resources(s, only)
	if err != nil {
		return nil, err
	}
	steps := make([]Step, len(rs))
	for i, r := range rs {
		steps[i] = Step{Resource: r, Kind: kind}
	}
	srs, err := p.Steps(ctx, source, steps)
	if err != nil {
		return nil, err
	}
	var results []Result
	var errs []error
	for _, sr := range srs {
		switch {
		case sr.Err != nil:
			errs = append(errs, sr.Err)
		case !sr.Skipped:
			results = append(results, sr.Result)
			// An operator's pass (`tidemark sync`) that succeeds ends a
			// back-off shown by `tidemark cursors` (a capped listing's
			// "retry now"); none recorded costs an UPDATE of no row.
			if err := p.store.PassOK(ctx, source, string(sr.Resource), kind); err != nil {
				p.log.Warn().Err(err).Str("source", source).Str("resource", string(sr.Resource)).Msg("could not record the success")
			}
		}
	}
	return results, errors.Join(errs...)
}

func (p *Poller) incremental(ctx context.Context, s *Source, r clients.Resource, sp *sourcePass) (Result, error) {
	start := time.Now()
	res := Result{RunID: newRunID(), Source: s.Name(), Resource: r, Kind: cursor.KindIncremental}
	log := p.passLogger(s.Name(), r, res.RunID, res.Kind)
	ctx = log.WithContext(ctx)

	cur := cursor.Cursor{Source: s.Name(), Resource: string(r), HighWater: sp.highWaters[string(r)]}
	res.HighWaterBefore = cur.HighWater
	w := clients.Window{Overlap: s.Overlap}
	if !cur.HighWater.IsZero() {
		w.UpdatedSince = cur.HighWater.Add(-s.Overlap)
	}
	// The run is written once, at its end (with the others of this source
	// when it is idle); one that takes long shows as running meanwhile.
	rec := cursor.RunRecord{RunID: res.RunID, Source: s.Name(), Resource: string(r), Started: start,
		WindowSince: timePtr(w.UpdatedSince), HighWaterBefore: timePtr(cur.HighWater)}
	shown := p.showRunning(ctx, log, rec)
	defer shown()
	log.Debug().Time("since", w.UpdatedSince).Msg("incremental pass started")

	l, err := p.applyListing(ctx, log, s, r, w, res.Kind, res.RunID, func(ctx context.Context, tx pgx.Tx, l *listing) error {
		// The new high water: the newest version seen, capped by the source's
		// clock when the pass began (records changed after that instant may sit
		// on pages already served). Never our own clock. Without the source's
		// (no Date header), a listing shorter than the overlap needs no cap:
		// an edit behind it came after the first page was served, later than
		// the newest version seen less the overlap. A longer one is capped
		// by the newest version on its first page.
		hw := l.maxVersion
		switch {
		case !l.sourceTime.IsZero():
			hw = earlier(hw, l.sourceTime)
		case l.took >= s.Overlap:
			hw = earlier(hw, l.firstMax) // none: the cursor stays
		}
		switch {
		case l.holdAll:
			hw = cur.HighWater // a quarantined record without a version
		case !l.held.IsZero():
			// A record quarantined by this pass is read again by the next:
			// the cursor stays below its version until it goes in.
			hw = earlier(hw, l.held.Add(-time.Microsecond))
		}
		if tx != nil || l.counts.Quarantined > 0 {
			// Records quarantined before, from the window on, that this
			// pass listed and did not quarantine again went in (or are
			// listed no more). An idle pass wrote none.
			if _, err := cursor.Release(ctx, p.db(tx), cursor.ReleaseParams{Source: s.Name(), Resource: string(r),
				RunID: res.RunID, Listed: true, Since: w.UpdatedSince}); err != nil {
				return err
			}
		}
		res.HighWaterAfter = cur.HighWater
		finish := func(db cursor.DB) error {
			shown()
			rec.Status, rec.Finished, rec.Pages, rec.Counts = cursor.StatusOK, time.Now(), l.pages, l.counts
			rec.HighWaterAfter = timePtr(res.HighWaterAfter)
			if db == nil {
				sp.runs.add(rec) // the idle pass: no statement of its own
				return nil
			}
			return cursor.RecordRuns(ctx, db, []cursor.RunRecord{rec})
		}
		if !hw.After(cur.HighWater) {
			if tx == nil {
				return finish(nil)
			}
			return finish(tx)
		}
		advance := func(tx pgx.Tx) error {
			// The fence: a pass whose lease went (and may now be another
			// process's) must not move the cursor, nor over an operator's
			// rewind (checked with the cursor row locked).
			if err := cursor.AdvanceFenced(ctx, tx, func(ctx context.Context, tx pgx.Tx) error { return sp.held.Check(ctx, tx) }, s.Name(), string(r), hw); err != nil {
				return err
			}
			res.HighWaterAfter = hw
			return finish(tx)
		}
		if tx == nil { // unchanged records newer than the cursor: it moves, with the fence
			return pgx.BeginFunc(ctx, p.pool, advance)
		}
		return advance(tx)
	})
	res.Took = time.Since(start)
	if l != nil {
		res.Pages, res.Counts, res.SourceTime = l.pages, l.counts, l.sourceTime
	}
	p.recordMode(ctx, log, s, r)
	if err != nil {
		err = fmt.Errorf("%s/%s: %w", s.Name(), r, err)
		shown()
		rec.Status, rec.Finished, rec.Error = runStatus(err), time.Now(), err.Error()
		rec.Pages, rec.Counts = res.Pages, res.Counts
		p.recordFailed(ctx, log, rec)
		p.metrics.Pass(s.Name(), string(r), res.Kind, "failed", res.Took)
		return res, err
	}
	if !res.SourceTime.IsZero() && !res.HighWaterAfter.IsZero() {
		p.metrics.Lag(s.Name(), string(r), res.SourceTime.Sub(res.HighWaterAfter))
	}
	p.metrics.Pass(s.Name(), string(r), res.Kind, "ok", res.Took)
	// An idle pass (the common case: 5,000 a minute for 1,000 sources) is a
	// debug line; one that wrote or moved the cursor is news.
	ev := log.Debug()
	if c := res.Counts; c.Inserted+c.Updated+c.Tombstoned > 0 || res.HighWaterAfter.After(res.HighWaterBefore) {
		ev = log.Info()
	}
	logCounts(ev, res).Msg("incremental pass done")
	return res, nil
}

// PassLease names the lease a pass of a source holds: one pass per source at
// a time, across processes. An operator's cursor change takes it too, so
// that a pass in flight cannot advance over the operator's rewind.
func PassLease(source string) string { return "source:" + source }

// TakeOwnership takes a source's ownership lease, the one a daemon holds for
// its life: it returns ErrBusy while a daemon (or another backfill) owns the
// source. The CLI's backfill holds it while it runs here, and queues the
// backfill for the owner otherwise, so a source keeps one rate budget.
func (p *Poller) TakeOwnership(ctx context.Context, source string) (release func(), err error) {
	s, err := p.source(source)
	if err != nil {
		return nil, err
	}
	h, err := p.leaser.TryAcquire(ctx, ownerLease(source))
	if err != nil {
		return nil, err
	}
	s.memo.forget("") // another owner may have written since it was held here
	return h.Release, nil
}

// Owns reports whether this process holds the source's ownership lease, as
// far as it knows without a round trip: its requests then pace here
// (cursor.Pacers).
func (p *Poller) Owns(source string) bool { return p.leaser.Holds(ownerLease(source)) }

// BackfillParams select a backfill.
type BackfillParams struct {
	Source   string
	Resource clients.Resource
	From, To clients.Date
	// WindowDays overrides the source's window size.
	WindowDays int
	// Progress, when set, is called after each window.
	Progress func(BackfillProgress)
	// Requeue: an interrupted backfill (shutdown, lost lease) goes back to
	// the queue as requeued instead of ending cancelled (a daemon's queue).
	Requeue bool
}

// BackfillProgress reports a backfill's advance.
type BackfillProgress struct {
	Backfill     cursor.Backfill
	WindowsDone  int
	WindowsTotal int
	Records      int64 // applied by this invocation
	Elapsed      time.Duration
}

// Backfill lists a spent-date range window by window and records progress
// after each one, so a killed backfill resumes where it stopped when run
// again with the same range. It never moves the incremental cursor and may
// run beside the daemon: the version guard makes the race harmless. It takes
// a lease of its own, so two backfills of one source never run at once.
func (p *Poller) Backfill(ctx context.Context, bp BackfillParams) (res Result, err error) {
	defer func() {
		if perr := clients.Recovered(fmt.Sprintf("%s/%s backfill", bp.Source, bp.Resource), recover()); perr != nil {
			logPanic(p.log.With().Str("source", bp.Source).Str("resource", string(bp.Resource)).Logger(), perr)
			err = perr
		}
	}()
	return p.backfill(ctx, bp)
}

func (p *Poller) backfill(ctx context.Context, bp BackfillParams) (Result, error) {
	start := time.Now()
	res := Result{RunID: newRunID(), Source: bp.Source, Resource: bp.Resource, Kind: cursor.KindBackfill}
	s, err := p.source(bp.Source)
	if err != nil {
		return res, err
	}
	if _, err := p.resources(s, []clients.Resource{bp.Resource}); err != nil {
		return res, err
	}
	if bp.From.IsZero() || bp.To.IsZero() || bp.To.Before(bp.From) {
		return res, fmt.Errorf("backfill needs --from <= --to (got %s..%s)", bp.From, bp.To)
	}
	held, err := p.leaser.TryAcquire(ctx, "backfill:"+bp.Source)
	if err != nil {
		return res, err
	}
	defer held.Release()
	wd := bp.WindowDays
	if wd <= 0 {
		wd = s.WindowDays
	}
	bf, err := p.store.StartBackfill(ctx, cursor.BackfillParams{
		Source: bp.Source, Resource: string(bp.Resource), From: bp.From, To: bp.To, WindowDays: wd,
	})
	if err != nil {
		return res, fmt.Errorf("%s/%s: start backfill: %w", bp.Source, bp.Resource, err)
	}
	log := p.passLogger(s.Name(), bp.Resource, res.RunID, res.Kind)
	ctx = log.WithContext(ctx)
	if err := p.store.StartRun(ctx, cursor.StartRunParams{
		RunID: res.RunID, Source: s.Name(), Resource: string(bp.Resource), Kind: res.Kind,
		WindowFrom: bf.Next, WindowTo: bp.To,
	}); err != nil {
		return res, fmt.Errorf("%s/%s: record run start: %w", s.Name(), bp.Resource, err)
	}
	log.Info().Stringer("from", bp.From).Stringer("to", bp.To).Stringer("resume_at", bf.Next).
		Int("window_days", bf.WindowDays).Msg("backfill started")
	p.backfillMark(s.Name(), bp.Resource, false) // a backfill stuck before its first window shows too

	// Only a resource its declaration lists by date (time entries, by spent
	// date) is backfilled in date windows; the others are small and listed
	// whole, as one window.
	def, _ := schema.Lookup(bp.Resource)
	byDate := def != nil && def.ListedByDate()
	done := bf.WindowsDone
	var total cursor.Counts
	var runErr error
	for next := bf.Next; !next.After(bp.To); {
		if err := ctx.Err(); err != nil {
			runErr = err
			break
		}
		// A backfill holds its lease for hours: stop when it is gone, or a
		// new owner elsewhere would share the source's budget with us. The
		// same fence runs again in the transaction that commits the window.
		if err := p.fence(ctx, held); err != nil {
			runErr = err
			break
		}
		end := next.AddDays(bf.WindowDays - 1)
		if end.After(bp.To) {
			end = bp.To
		}
		w := clients.Window{From: next, To: end, Overlap: s.Overlap}
		if !byDate {
			w, end = clients.Window{Overlap: s.Overlap}, bp.To
		}
		l, err := p.applyListing(ctx, log, s, bp.Resource, w, res.Kind, res.RunID, func(ctx context.Context, tx pgx.Tx, l *listing) error {
			progress := func(tx pgx.Tx) error {
				if err := held.Check(ctx, tx); err != nil {
					return err
				}
				return cursor.BackfillProgress(ctx, tx, bf.ID, end.AddDays(1), l.counts.Fetched)
			}
			if tx == nil { // the fence and the progress commit together
				return pgx.BeginFunc(ctx, p.pool, progress)
			}
			return progress(tx)
		})
		if l != nil {
			res.Pages += l.pages
			total.Add(l.counts)
		}
		if err != nil {
			runErr = fmt.Errorf("window %s..%s: %w", next, end, err)
			break
		}
		done++
		next = end.AddDays(1)
		p.backfillMark(s.Name(), bp.Resource, false)
		log.Info().Stringer("window_from", w.From).Stringer("window_to", end).Int64("records", l.counts.Fetched).
			Int("windows_done", done).Int("windows_total", bf.WindowsTotal).Msg("backfill window applied")
		if bp.Progress != nil {
			bp.Progress(BackfillProgress{Backfill: bf, WindowsDone: done, WindowsTotal: bf.WindowsTotal,
				Records: total.Fetched, Elapsed: time.Since(start)})
		}
	}
	res.Counts, res.Took = total, time.Since(start)
	p.backfillMark(s.Name(), bp.Resource, true)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if runErr != nil {
		logPanic(log, runErr)
		runErr = fmt.Errorf("%s/%s: backfill: %w", s.Name(), bp.Resource, runErr)
		status := cursor.StatusFailed
		if errors.Is(runErr, context.Canceled) {
			status = cursor.StatusCancelled
		}
		interrupted := errors.Is(runErr, context.Canceled) || errors.Is(runErr, ErrLeaseLost)
		switch {
		case bp.Requeue && interrupted && errors.Is(runErr, ErrLeaseLost):
			// Whoever owns the source now adopts it (it is still marked
			// running): writing here could undo the new owner's state.
		case bp.Requeue && interrupted:
			// Never through cancelled or failed: a follower would take either
			// for the end while the owner goes on with it.
			if err := p.store.RequeueBackfill(fctx, bf.ID, runErr.Error()); err != nil {
				log.Warn().Err(err).Msg("could not hand the interrupted backfill back to the queue")
			}
		default:
			_ = p.store.FinishBackfill(fctx, bf.ID, status, runErr.Error())
		}
		p.finishFailed(ctx, log, res.RunID, &listing{pages: res.Pages, counts: total}, runErr)
		p.metrics.Pass(s.Name(), string(bp.Resource), res.Kind, "failed", res.Took)
		return res, runErr
	}
	if err := p.store.FinishBackfill(fctx, bf.ID, cursor.BackfillDone, ""); err != nil {
		return res, err
	}
	if err := cursor.FinishRun(fctx, p.pool, cursor.FinishRunParams{RunID: res.RunID, Status: cursor.StatusOK,
		Pages: res.Pages, Counts: total}); err != nil {
		return res, err
	}
	p.metrics.Pass(s.Name(), string(bp.Resource), res.Kind, "ok", res.Took)
	logCounts(log.Info(), res).Msg("backfill done")
	return res, nil
}

// Reconcile finds deletions the source does not report: it re-lists a recent
// spent-date range (time entries) or everything (the other resources) and
// tombstones stored ids the listing no longer returns. A listing that fails
// tombstones nothing; a row whose version is newer than the listing's start
// (less the overlap) is never tombstoned; more than MaxTombstones at once is
// refused and reported.
func (p *Poller) Reconcile(ctx context.Context, source string, only ...clients.Resource) ([]Result, error) {
	return p.eachResource(ctx, source, only, cursor.KindReconcile)
}

func (p *Poller) reconcile(ctx context.Context, s *Source, r clients.Resource, held *lease.Lease) (Result, error) {
	start := time.Now()
	res := Result{RunID: newRunID(), Source: s.Name(), Resource: r, Kind: cursor.KindReconcile}
	log := p.passLogger(s.Name(), r, res.RunID, res.Kind)
	ctx = log.WithContext(ctx)
	w := clients.Window{Overlap: s.Overlap}
	if def, ok := schema.Lookup(r); ok && def.ListedByDate() {
		// The range is chosen on our clock; that only decides what is checked.
		// What may be tombstoned is decided on the source's clock (AsOf).
		today := clients.DateOf(time.Now().UTC())
		w.From, w.To = today.AddDays(-s.LookbackDays), today.AddDays(7)
	}
	if err := p.store.StartRun(ctx, cursor.StartRunParams{
		RunID: res.RunID, Source: s.Name(), Resource: string(r), Kind: res.Kind,
		WindowFrom: w.From, WindowTo: w.To,
	}); err != nil {
		return res, fmt.Errorf("%s/%s: record run start: %w", s.Name(), r, err)
	}
	scope := clients.ScopeOf(s.Source, r, w)
	ev := log.Info().Stringer("from", w.From).Stringer("to", w.To)
	if scope.UserIDs != nil {
		ev = ev.Strs("scope_user_ids", scope.UserIDs)
	}
	ev.Msg("reconcile started")
	tombstones := func(l *listing) upsert.TombstoneParams {
		return upsert.TombstoneParams{
			Source: s.Name(), Resource: r, From: w.From, To: w.To, Seen: l.seen,
			AsOf: l.sourceTime.Add(-s.Overlap), Max: s.MaxTombstones,
			// Only what was listed: a listing of some users' entries proves
			// nothing about the others'.
			Scope:   scope,
			Events:  s.Events,
			History: s.HistoryOn(r),
			RunID:   res.RunID,
		}
	}
	confirm := func(ctx context.Context, l *listing, page func(context.Context, clients.Page) error) error {
		if l.sourceTime.IsZero() {
			return nil // finalize refuses to tombstone
		}
		return p.confirmAbsent(ctx, log, s, r, w, tombstones(l), l, page)
	}
	l, err := p.applyListingThen(ctx, log, s, r, w, res.Kind, res.RunID, confirm, func(ctx context.Context, tx pgx.Tx, l *listing) (err error) {
		if l.sourceTime.IsZero() {
			return errors.New("the source sent no Date header: cannot tell which rows are older than the listing, so nothing is tombstoned")
		}
		if tx == nil {
			// An empty listing: every stored row may be gone.
			if tx, err = p.pool.Begin(ctx); err != nil {
				return err
			}
			defer tx.Rollback(context.WithoutCancel(ctx))
			defer func() {
				if err == nil {
					err = tx.Commit(ctx)
				}
			}()
		}
		if err := held.Check(ctx, tx); err != nil {
			return err
		}
		n, err := upsert.TombstoneMissing(ctx, tx, tombstones(l))
		if err != nil {
			return err
		}
		l.counts.Tombstoned += n
		return cursor.FinishRun(ctx, tx, cursor.FinishRunParams{
			RunID: res.RunID, Status: cursor.StatusOK, Pages: l.pages, Counts: l.counts,
		})
	})
	res.Took = time.Since(start)
	if l != nil {
		res.Pages, res.Counts, res.SourceTime = l.pages, l.counts, l.sourceTime
		l.seen = nil
	}
	if err != nil {
		err = fmt.Errorf("%s/%s: reconcile: %w", s.Name(), r, err)
		p.finishFailed(ctx, log, res.RunID, l, err)
		status := "failed"
		if errors.Is(err, upsert.ErrTooManyTombstones) {
			status = "refused" // the alert on refused reconciles watches this status
		}
		p.metrics.Pass(s.Name(), string(r), res.Kind, status, res.Took)
		return res, err
	}
	p.metrics.Records(s.Name(), string(r), "tombstoned", res.Counts.Tombstoned)
	p.metrics.Pass(s.Name(), string(r), res.Kind, "ok", res.Took)
	logCounts(log.Info(), res).Msg("reconcile done")
	return res, nil
}

// confirmAbsent asks a source that can look records up by id
// (clients.Confirmer) for the stored rows tp would tombstone, before any
// is: one may have moved out of the window rather than been deleted (a
// Toggl entry moved to another day), and a process that did not list the
// window before cannot tell. What it finds is applied through page (a
// versioned write, with its new day) and joins the listing's seen ids. It
// runs outside any transaction (guarantee 10). Its failure fails the
// reconcile, which then tombstones nothing (guarantee 9); a source that
// cannot look r up (ErrUnsupported) leaves the listing to judge alone.
func (p *Poller) confirmAbsent(ctx context.Context, log zerolog.Logger, s *Source, r clients.Resource, w clients.Window,
	tp upsert.TombstoneParams, l *listing, page func(context.Context, clients.Page) error) (err error) {
	cf, ok := clients.As[clients.Confirmer](s.Source)
	if !ok {
		return nil
	}
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), dbTimeout)
	ids, err := upsert.MissingIDs(c, p.pool, tp)
	cancel()
	if err != nil || len(ids) == 0 {
		return err
	}
	defer func() {
		if perr := clients.Recovered("confirm "+string(r), recover()); perr != nil {
			err = perr
		}
	}()
	seen := len(l.seen)
	err = cf.Confirm(ctx, r, w, ids, page)
	if errors.Is(err, clients.ErrUnsupported) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("looking up by id the %d stored rows the listing did not return (nothing is tombstoned): %w", len(ids), err)
	}
	log.Info().Int("absent", len(ids)).Int("found", len(l.seen)-seen).Msg("rows absent from the listing looked up by id; those found are kept")
	return nil
}

// fence checks, outside any transaction, that a lease is still held: a
// long-running holder asks before it spends requests on the next window.
func (p *Poller) fence(ctx context.Context, held *lease.Lease) error {
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return held.Check(c, p.pool)
}

// recordMode records how the source read r, when it has more than one way
// (clients.Moder), each time that changes.
func (p *Poller) recordMode(ctx context.Context, log zerolog.Logger, s *Source, r clients.Resource) {
	m, ok := clients.As[clients.Moder](s.Source)
	if !ok {
		return
	}
	mode := m.Mode(r)
	key := s.Name() + "/" + string(r)
	if last, seen := p.modes.Load(key); seen && last == mode {
		return
	}
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := p.store.SetMode(c, s.Name(), string(r), mode); err != nil {
		log.Warn().Err(err).Msg("could not record how the source is read")
		return
	}
	p.modes.Store(key, mode)
}

// earlier returns the earlier of a and b.
func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
