// Package clients owns the Source interface that every provider implements and
// the normalized record types that flow from a provider to the database. It
// knows nothing of HTTP or Postgres, so that upsert may use the types without
// pulling in either.
package clients

import (
	"context"
	"errors"
	"time"
)

// Resource names a mirrored collection; it is also the name of its table.
// Resources are declared in package schema; the constants below name the
// first five for convenience (a new resource needs none: use its
// declaration's Name).
type Resource string

const (
	TimeEntries Resource = "time_entries"
	Projects    Resource = "projects"
	Clients     Resource = "clients"
	Users       Resource = "users"
	Tasks       Resource = "tasks"
)

// Window selects what a List call returns. Exactly one of the two forms is
// used: UpdatedSince (incremental; the zero time means "everything"), or a
// spent-date range From..To, both inclusive (backfill and reconcile).
type Window struct {
	UpdatedSince time.Time
	From, To     Date
	// Overlap is how late a change may become visible at the source (the
	// source's overlap, which UpdatedSince already reaches back by); zero
	// when unknown.
	Overlap time.Duration
}

// ByDate reports whether the window is a spent-date range.
func (w Window) ByDate() bool { return !w.From.IsZero() || !w.To.IsZero() }

// Page is one response of a listing, already normalized.
type Page struct {
	Resource Resource
	// Number counts pages of one listing from 1; it names the page in errors.
	Number int
	// SourceTime is the source's clock when it served the page (its Date
	// header). The cursor is capped by it, never by our own clock.
	SourceTime time.Time
	Records    []Record
	// Covered, when set, is the newest version among what the listing
	// selected by rather than listed: a nested listing (an invoice's
	// payments) selects by its parents' versions, and its cursor must move
	// with them, or a parent edited after its newest child would be listed
	// again every pass; a Toggl `since` listing holds every change up to
	// its Date. The high water takes it like a record's version (once the
	// listing completes, capped by the first page's SourceTime).
	Covered time.Time
}

// CoverAfter is how far back a listing's window must start before its
// Covered may move the cursor past what it returned (a Toggl since
// listing, a Clockify feed read): an idle source's cursor then keeps up
// with a write about once a day, not one every pass.
const CoverAfter = 24 * time.Hour

// Record is one normalized record of a resource.
type Record struct {
	ID string
	// Version is the source's own last-modified stamp (Harvest updated_at,
	// Toggl at). Order between two states of one id is (Version, FetchedAt).
	Version   time.Time
	FetchedAt time.Time
	// CreatedAt is the source's creation stamp when it sends one (Harvest
	// created_at), zero otherwise. It is not stored: a page walk uses it to
	// tell a record created during the walk from one merely edited.
	CreatedAt time.Time
	// DeletedAt is set when the source reports the record as deleted (Toggl
	// server_deleted_at, Clockify's deletion feed): the write is a tombstone.
	DeletedAt *time.Time
	// Raw is the record exactly as received (one JSON object).
	Raw []byte
	// Derived holds what Row takes from outside Raw (a Clockify entry's
	// client from its project, its day from its user's zone), nil when
	// nothing: the content hash covers it with Raw, so that a change there
	// rewrites the row even though Raw is the same.
	Derived []byte
	// Row holds the typed columns, one value per column the resource's
	// table declares, in that order (package schema, which gives the Go
	// type of each SQL type; nil is NULL). nil for a tombstone that carries
	// no content.
	Row []any
}

// Decimal is an exact decimal number kept as the text the source sent
// ("1.25"); converting through float64 would round hours and money.
type Decimal string

// Source is one tracker account, as the poller sees it.
type Source interface {
	// Name is the configured source name: the `source` column of every row.
	Name() string
	// Resources lists what this source can mirror.
	Resources() []Resource
	// List streams the resource's records for the window, one page at a time,
	// calling fn for each page in order. Memory is bounded by two pages (the
	// one fn holds and, at most, one read ahead). It
	// stops at the first error from fn or from the source. A listing that
	// returns nil was complete.
	List(ctx context.Context, r Resource, w Window, fn func(context.Context, Page) error) error
}

// ErrUnsupported is returned by List for a resource or window form the
// provider cannot serve.
var ErrUnsupported = errors.New("not supported by this source")

// Scope says what a listing covered beyond its window. A reconcile tombstones
// only stored rows inside the scope it listed (DESIGN.md guarantee 9): a
// listing of two users' entries proves nothing about a third user's.
type Scope struct {
	// UserIDs, when not nil, means only time entries of these users were
	// listed. nil means every user.
	UserIDs []string
}

// Scoper is implemented by a Source whose listings may cover less than the
// whole account for a resource (e.g. Clockify's per-user lists).
type Scoper interface {
	// ListScope returns the scope List covers for r and w.
	ListScope(r Resource, w Window) Scope
}

// ScopeOf returns the scope src lists for r and w: everything unless src says
// otherwise.
func ScopeOf(src Source, r Resource, w Window) Scope {
	if s, ok := As[Scoper](src); ok {
		return s.ListScope(r, w)
	}
	return Scope{}
}

// Confirmer is implemented by a source that can look records up by id
// wherever they are, beyond a window (Toggl's workspace scope: an entry
// moved to another day). A reconcile asks it for the stored ids its
// listing did not return before it tombstones them: "not found" must mean
// looked for everywhere the record can be.
type Confirmer interface {
	// Confirm looks up ids of r, absent from a complete listing of w, and
	// streams those it finds (live, wherever they are now) to fn as pages,
	// like List. An id not handed over was not found. It returns an error
	// wrapping ErrUnsupported when it cannot look up r (the reconcile then
	// judges by the listing alone); any other error means nothing may be
	// taken as deleted.
	Confirm(ctx context.Context, r Resource, w Window, ids []string, fn func(context.Context, Page) error) error
}

// ErrCapped is returned (wrapped) by List when the provider stopped serving
// before the listing was complete (a hard cap on results, or a page walk that
// could not be made stable). Pages already delivered are valid records, but
// absence from such a listing proves nothing: a reconcile tombstones nothing
// and an incremental pass does not move its cursor.
var ErrCapped = errors.New("listing incomplete: the provider capped it or it could not be walked stably")

// Moder is implemented by a source that can read a resource in more than
// one way (Clockify: its change feed, or per-user listings while the feed
// is unusable). The poller records the mode after each incremental pass,
// so that `tidemark cursors` can show it.
type Moder interface {
	// Mode says how the source reads r now; "" when it has one way.
	Mode(r Resource) string
}
