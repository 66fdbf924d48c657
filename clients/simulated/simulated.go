// Package simulated is the built-in tracker behind `tidemark demo` and the
// end-to-end tests: a generated agency (clients, projects, tasks, users and
// a year of time entries), deterministic from a seed, served in the Harvest
// dialect over loopback HTTP by harvestfake, so that the real Harvest client
// is exercised. A mutation stream (creates, updates, same-second double
// updates, deletes, back-dated entries, bulk approvals and invoicing) and
// fault knobs make it behave like a live account.
package simulated

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
	"github.com/tidemarkhq/tidemark/internal/fakeapi/harvestfake"
)

// Params configures a Tracker. Zero fields take defaults.
type Params struct {
	Seed int64
	// Users defaults to 20.
	Users int
	// Days of history, default 365.
	Days int
	// Entries, when > 0, sets the number of generated time entries
	// (otherwise about 2.5 per user per working day).
	Entries int
	// Token and AccountID default to harvestfake's.
	Token, AccountID string
	// Anchor is the source clock at generation: history ends there. Default:
	// the source clock (now + Skew). Fix it to make generated stamps
	// reproducible.
	Anchor time.Time
	// Skew offsets the source's clock from ours.
	Skew time.Duration
	// VisibilityDelay makes a write visible that long after its updated_at.
	VisibilityDelay time.Duration
	// LateEvery, above 1, makes only every LateEvery-th write late.
	LateEvery int
	// RateLimit defaults to Harvest's 100 per 15 s; NoRateLimit disables it.
	RateLimit   httpx.RateLimit
	NoRateLimit bool
	// FaultRate and RateLimitRate are the probabilities of a 500 and of a
	// spurious 429 per request.
	FaultRate, RateLimitRate float64
	// Cursor serves cursor pagination instead of page numbers.
	Cursor bool
}

// Truth is the ground truth a mirror is compared with.
type Truth = harvestfake.State

// Tracker is a running simulated Harvest account.
type Tracker struct {
	fake *harvestfake.Server

	mu       sync.Mutex
	rng      *rand.Rand
	live     *fakeapi.Stream[int64] // live entry ids, for picking
	muts     []fakeapi.Mutation
	days     int
	nextID   int64
	users    []int64
	projects []harvestfake.Project
	tasks    []int64
	clients  []int64
	invoice  int64
	// docs are the live ids of the resources read from their declaration;
	// nextDoc the last id given to one.
	docs    map[clients.Resource][]int64
	nextDoc int64
}

var (
	clientNames  = []string{"Acme Corp", "Globex", "Initech", "Umbrella Health", "Stark Industries", "Wayne Foundation", "Hooli", "Vandelay Imports"}
	currencies   = []string{"EUR", "USD", "GBP"}
	projectKinds = []string{"Website", "Mobile App", "Brand Refresh", "SEO Audit", "Retainer", "Campaign", "Data Platform", "Intranet"}
	taskNames    = []string{"Design", "Development", "Project Management", "Copywriting", "QA", "Meetings", "Research", "Analytics", "Support", "Strategy", "Photography", "Training"}
	firstNames   = []string{"Kim", "Alex", "Sam", "Jordan", "Robin", "Charlie", "Dana", "Eli", "Fran", "Gus", "Hana", "Ines", "Jules", "Kai", "Lea", "Milo", "Nora", "Omar", "Pia", "Quinn"}
	lastNames    = []string{"Allen", "Baker", "Chen", "Dubois", "Evans", "Fischer", "García", "Haddad", "Ito", "Jensen", "Kowalski", "López", "Müller", "Nakamura", "O'Brien", "Petrov"}
	noteTexts    = []string{"Client call", "Wireframes for the landing page", "Code review", "Fixing \"checkout\" bug", "Sprint planning", "Copy edits\nround 2", "Deploy to staging", "Research: competitor analysis", "Photo shoot prep", "Weekly report", "Accessibility fixes", "Café meeting with the team ☕"}
	hoursText    = func() []string {
		var out []string
		for q := 1; q <= 32; q++ {
			out = append(out, fmt.Sprintf("%d.%02d", q/4, (q%4)*25))
		}
		return out
	}()
)

// Entry id base: Harvest ids are large integers.
const firstEntryID = 1_000_000_000

// New generates the account and starts serving it on a loopback port.
func New(p Params) (*Tracker, error) {
	if p.Users < 0 || p.Days < 0 || p.Entries < 0 {
		return nil, fmt.Errorf("simulated: users, days and entries must not be negative")
	}
	p.Users = cmp.Or(p.Users, 20)
	p.Days = cmp.Or(p.Days, 365)
	fake := harvestfake.New(harvestfake.Options{
		Token: p.Token, AccountID: p.AccountID, RateLimit: p.RateLimit, NoRateLimit: p.NoRateLimit,
		Cursor: p.Cursor, Skew: p.Skew, VisibilityDelay: p.VisibilityDelay, LateEvery: p.LateEvery,
		FaultRate: p.FaultRate, RateLimitRate: p.RateLimitRate, Seed: uint64(p.Seed),
	})
	rng := rand.New(rand.NewPCG(uint64(p.Seed), 0x71de))
	t := &Tracker{fake: fake, rng: rng, live: fakeapi.NewStream[int64](rng), days: p.Days, docs: map[clients.Resource][]int64{}}
	t.muts = []fakeapi.Mutation{
		{Weight: 30, Do: func() { t.create(false) }},
		{Weight: 10, Do: func() { t.create(true) }},
		{Weight: 25, Do: func() { t.update(1) }},
		{Weight: 7, Do: func() { t.update(2) }},
		{Weight: 10, Do: t.delete},
		{Weight: 4, Do: t.bulkApprove},
		{Weight: 2, Do: t.bulkInvoice},
		{Weight: 5, Do: t.toggleTimer},
		{Weight: 7, Do: t.touchReference},
		{Weight: 4, Do: t.touchAccount},
		{Weight: 2, Do: t.bulkSubmit},
		{Weight: 1, Do: t.payInvoice},
	}
	anchor := p.Anchor
	if anchor.IsZero() {
		anchor = fake.Now()
	}
	t.generate(anchor.UTC().Truncate(time.Second), p)
	return t, nil
}

// URL is the API base URL to configure as a Harvest source's base_url.
func (t *Tracker) URL() string { return t.fake.URL() }

// Token and AccountID are the credentials the tracker accepts.
func (t *Tracker) Token() string     { return t.fake.Token() }
func (t *Tracker) AccountID() string { return t.fake.AccountID() }

// Now is the tracker's (possibly skewed) clock.
func (t *Tracker) Now() time.Time { return t.fake.Now() }

// Server exposes the underlying fake for fault injection and request logs.
func (t *Tracker) Server() *harvestfake.Server { return t.fake }

// Close stops serving.
func (t *Tracker) Close() { t.fake.Close() }

// Truth returns what the tracker serves now.
func (t *Tracker) Truth() Truth { return t.fake.State() }

// SetFaultRates changes the 5xx and 429 probabilities.
func (t *Tracker) SetFaultRates(fault, rateLimit float64) { t.fake.SetFaultRates(fault, rateLimit) }

func (t *Tracker) generate(anchor time.Time, p Params) {
	r := t.rng
	f := t.fake
	start := anchor.AddDate(0, 0, -p.Days)
	stampIn := func(lo, hi time.Time) time.Time {
		if !hi.After(lo) {
			return lo
		}
		return lo.Add(time.Duration(r.Int64N(int64(hi.Sub(lo)/time.Second)+1)) * time.Second)
	}
	created := start.Add(-30 * 24 * time.Hour)

	nClients := 3 + r.IntN(4)
	for i := range nClients {
		id := int64(5_000_000 + i)
		f.PutClient(harvestfake.Client{ID: id, Name: clientNames[i], Currency: currencies[r.IntN(len(currencies))],
			IsActive: true, CreatedAt: created, UpdatedAt: created.Add(time.Duration(i) * time.Minute)})
		t.clients = append(t.clients, id)
	}
	for i := range 12 {
		cid := t.clients[i%nClients]
		pr := harvestfake.Project{ID: int64(14_000_000 + i), ClientID: cid,
			Name:     fmt.Sprintf("%s %s", clientNames[i%nClients], projectKinds[i%len(projectKinds)]),
			Code:     fmt.Sprintf("P%03d", i+1),
			IsActive: r.IntN(10) > 0, IsBillable: r.IntN(5) > 0, CreatedAt: created, UpdatedAt: created.Add(time.Hour)}
		f.PutProject(pr)
		t.projects = append(t.projects, pr)
	}
	for i, name := range taskNames {
		id := int64(8_000_000 + i)
		f.PutTask(harvestfake.Task{ID: id, Name: name, IsActive: true, CreatedAt: created, UpdatedAt: created.Add(2 * time.Hour)})
		t.tasks = append(t.tasks, id)
	}
	for i := range p.Users {
		id := int64(1_700_000 + i)
		fn, ln := firstNames[i%len(firstNames)], lastNames[(i*7)%len(lastNames)]
		f.PutUser(harvestfake.User{ID: id, FirstName: fn, LastName: ln,
			Email:    fmt.Sprintf("%s.%s%d@agency.example", lower(fn), lower(ln), i),
			IsActive: r.IntN(12) > 0, CreatedAt: created, UpdatedAt: created.Add(3 * time.Hour)})
		t.users = append(t.users, id)
	}

	n := p.Entries
	if n == 0 {
		n = p.Users * p.Days * 5 / 7 * 5 / 2
	}
	entries := make([]harvestfake.TimeEntry, n)
	approvedBefore := anchor.AddDate(0, 0, -14)
	invoicedBefore := anchor.AddDate(0, -1, 0)
	for i := range entries {
		day := start.Add(time.Duration(r.IntN(p.Days+1)) * 24 * time.Hour)
		for wd := day.Weekday(); (wd == time.Saturday || wd == time.Sunday) && r.IntN(10) > 0; wd = day.Weekday() {
			day = day.Add(-24 * time.Hour)
		}
		if day.Before(start) {
			day = start
		}
		pr := t.projects[r.IntN(len(t.projects))]
		e := harvestfake.TimeEntry{
			SpentDate: clients.DateOf(day),
			Hours:     hoursText[r.IntN(len(hoursText))],
			UserID:    t.users[r.IntN(len(t.users))],
			ProjectID: pr.ID, ClientID: pr.ClientID, TaskID: t.tasks[r.IntN(len(t.tasks))],
			Billable: pr.IsBillable && r.IntN(10) > 0,
		}
		if r.IntN(5) > 0 {
			e.Notes = &noteTexts[r.IntN(len(noteTexts))]
		}
		// Logged the same day (or a few days late), edited a little later.
		e.CreatedAt = minTime(stampIn(day.Add(8*time.Hour), day.Add(time.Duration(18+24*r.IntN(3))*time.Hour)), anchor)
		e.UpdatedAt = minTime(e.CreatedAt.Add(time.Duration(r.IntN(3600))*time.Second), anchor)
		entries[i] = e
	}
	// Ids grow with creation, as Harvest's do: rank by (created_at, index)
	// without moving the large structs.
	assignIDs(entries)
	// Approvals: per user and ISO week, one bulk stamp; invoices: per client
	// and month, one bulk stamp.
	type uw struct {
		user       int64
		year, week int
	}
	type cm struct {
		client int64
		month  int
	}
	approvals := map[uw]time.Time{}
	invoices := map[cm]int64{}
	lines := map[int64]*invoiceLines{}
	invoiceAt := map[int64]time.Time{}
	for i := range entries {
		e := &entries[i]
		day := e.SpentDate.Time()
		if day.Before(approvedBefore) {
			y, w := day.ISOWeek()
			k := uw{e.UserID, y, w}
			at, ok := approvals[k]
			if !ok {
				at = minTime(day.AddDate(0, 0, 7-int(day.Weekday())+1).Add(10*time.Hour+time.Duration(r.IntN(3600))*time.Second), anchor)
				approvals[k] = at
			}
			e.IsClosed, e.IsLocked = true, true
			e.UpdatedAt = maxTime(e.UpdatedAt, at)
		}
		if e.Billable && e.IsClosed && day.Before(invoicedBefore) {
			k := cm{e.ClientID, day.Year()*12 + int(day.Month())}
			inv, ok := invoices[k]
			if !ok {
				t.invoice++
				inv = 30_000_000 + t.invoice
				invoices[k] = inv
				first := time.Date(day.Year(), day.Month()+1, 3, 9, 0, 0, 0, time.UTC)
				invoiceAt[inv] = minTime(first.Add(time.Duration(r.IntN(7200))*time.Second), anchor)
			}
			e.IsBilled, e.InvoiceID = true, inv
			e.UpdatedAt = maxTime(e.UpdatedAt, invoiceAt[inv])
			il := lines[inv]
			if il == nil {
				il = &invoiceLines{client: e.ClientID, at: invoiceAt[inv], cents: map[int64]int64{}, hundred: map[int64]int64{}}
				lines[inv] = il
			}
			h := hundredths(e.Hours)
			il.hundred[e.ProjectID] += h
			il.cents[e.ProjectID] += h * rate
		}
		// Not yet approved: about half sent for approval.
		if !e.IsClosed && e.ID%2 == 0 {
			e.Submitted = true
		}
	}
	f.LoadTimeEntries(entries)
	t.generateAccount(anchor, created, lines)
	t.nextID = firstEntryID + int64(len(entries))
	for i := range entries {
		t.live.Add(entries[i].ID)
	}
}

func assignIDs(es []harvestfake.TimeEntry) {
	type rank struct {
		at int64
		i  int32
	}
	rs := make([]rank, len(es))
	for i := range es {
		rs[i] = rank{es[i].CreatedAt.Unix(), int32(i)}
	}
	slices.SortFunc(rs, func(a, b rank) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		return cmp.Compare(a.i, b.i)
	})
	for j, r := range rs {
		es[r.i].ID = firstEntryID + int64(j)
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// ---- mutations ---------------------------------------------------------------

// Step applies n random mutations, chosen deterministically from the seed
// (their stamps come from the tracker's clock).
func (t *Tracker) Step(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.live.Step(n, 0, t.muts)
}

// Run applies perTick mutations every interval until ctx ends.
func (t *Tracker) Run(ctx context.Context, every time.Duration, perTick int) error {
	return fakeapi.Run(ctx, every, perTick, t.Step)
}

func (t *Tracker) stamp() time.Time { return t.fake.Now().UTC().Truncate(time.Second) }

func (t *Tracker) pick() (harvestfake.TimeEntry, bool) {
	var e harvestfake.TimeEntry
	_, ok := t.live.Pick(func(id int64) bool {
		var found bool
		e, found = t.fake.TimeEntry(id)
		return found
	})
	return e, ok
}

// create logs a new entry for today, or back-dated by up to the history.
func (t *Tracker) create(backdated bool) {
	r := t.rng
	now := t.stamp()
	day := now
	if backdated {
		day = now.AddDate(0, 0, -1-r.IntN(max(t.days, 2)-1))
	}
	pr := t.projects[r.IntN(len(t.projects))]
	e := harvestfake.TimeEntry{
		ID:        t.nextID,
		SpentDate: clients.DateOf(day),
		Hours:     hoursText[r.IntN(len(hoursText))],
		UserID:    t.users[r.IntN(len(t.users))],
		ProjectID: pr.ID, ClientID: pr.ClientID, TaskID: t.tasks[r.IntN(len(t.tasks))],
		Billable:  pr.IsBillable,
		CreatedAt: now, UpdatedAt: now,
	}
	if r.IntN(4) > 0 {
		e.Notes = &noteTexts[r.IntN(len(noteTexts))]
	}
	t.nextID++
	t.fake.PutTimeEntry(e)
	t.live.Add(e.ID)
}

// update edits hours or notes, times times within one second (the states
// share a version).
func (t *Tracker) update(times int) {
	e, ok := t.pick()
	if !ok {
		return
	}
	r := t.rng
	now := t.stamp()
	for range times {
		e.Hours = hoursText[r.IntN(len(hoursText))]
		if r.IntN(2) == 0 {
			e.Notes = &noteTexts[r.IntN(len(noteTexts))]
		}
		e.UpdatedAt = now
		t.fake.PutTimeEntry(e)
	}
}

func (t *Tracker) delete() {
	e, ok := t.pick()
	if !ok {
		return
	}
	t.fake.Delete(clients.TimeEntries, e.ID)
	t.live.Remove(e.ID)
}

// bulkApprove closes one user's unapproved entries of a recent fortnight
// with a single stamp.
func (t *Tracker) bulkApprove() {
	user := t.users[t.rng.IntN(len(t.users))]
	now := t.stamp()
	from := clients.DateOf(now.AddDate(0, 0, -28))
	for _, e := range t.fake.TimeEntriesWhere(func(e *harvestfake.TimeEntry) bool {
		return e.UserID == user && !e.IsClosed && !e.SpentDate.Before(from)
	}) {
		e.IsClosed, e.IsLocked, e.UpdatedAt = true, true, now
		t.fake.PutTimeEntry(e)
	}
}

// bulkInvoice invoices one client's approved, billable, uninvoiced entries
// with a single stamp.
func (t *Tracker) bulkInvoice() {
	client := t.clients[t.rng.IntN(len(t.clients))]
	now := t.stamp()
	t.invoice++
	inv := 30_000_000 + t.invoice
	il := &invoiceLines{client: client, at: now, cents: map[int64]int64{}, hundred: map[int64]int64{}}
	for _, e := range t.fake.TimeEntriesWhere(func(e *harvestfake.TimeEntry) bool {
		return e.ClientID == client && e.Billable && e.IsClosed && !e.IsBilled
	}) {
		e.IsBilled, e.IsLocked, e.InvoiceID, e.UpdatedAt = true, true, inv, now
		t.fake.PutTimeEntry(e)
		h := hundredths(e.Hours)
		il.hundred[e.ProjectID] += h
		il.cents[e.ProjectID] += h * rate
	}
	if len(il.cents) > 0 {
		t.putInvoice(inv, il, time.Time{}, t.putDoc)
	}
}

// toggleTimer starts or stops a timer on today's entry.
func (t *Tracker) toggleTimer() {
	e, ok := t.pick()
	if !ok || e.IsClosed {
		return
	}
	e.IsRunning = !e.IsRunning
	e.UpdatedAt = t.stamp()
	t.fake.PutTimeEntry(e)
}

// touchReference renames or (de)activates a project, task, user or client.
func (t *Tracker) touchReference() {
	r := t.rng
	now := t.stamp()
	switch r.IntN(4) {
	case 0:
		i := r.IntN(len(t.projects))
		p := t.projects[i]
		p.IsActive = !p.IsActive
		p.UpdatedAt = now
		t.projects[i] = p
		t.fake.PutProject(p)
	case 1:
		edit(t, clients.Tasks, t.tasks[r.IntN(len(t.tasks))], t.fake.PutTask, func(tk *harvestfake.Task) {
			tk.Name += "*"
			tk.UpdatedAt = now
		})
	case 2:
		edit(t, clients.Users, t.users[r.IntN(len(t.users))], t.fake.PutUser, func(u *harvestfake.User) {
			u.IsActive = !u.IsActive
			u.UpdatedAt = now
		})
	default:
		edit(t, clients.Clients, t.clients[r.IntN(len(t.clients))], t.fake.PutClient, func(c *harvestfake.Client) {
			c.Name += "."
			c.UpdatedAt = now
		})
	}
}

// edit changes the stored T of resource r called id with change, and
// stores it again.
func edit[T any](t *Tracker, r clients.Resource, id int64, put func(T), change func(*T)) {
	if v, ok := t.fake.Get(r, id); ok {
		x := v.(T)
		change(&x)
		put(x)
	}
}
