package clockify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
)

// Fallback defaults (see the package doc, "When the feed is unusable").
const (
	// DefaultFallbackDays is how many days before the cursor an
	// incremental pass lists per user by start date while the feed is
	// unusable.
	DefaultFallbackDays = 14
	// DefaultFeedRetry is how long a source stays on listings before the
	// feed is tried again.
	DefaultFeedRetry = 6 * time.Hour
)

// errUnstable: a feed window that cannot be walked (pages that do not
// hold still, a page size ignored in a way that cannot be confirmed).
var errUnstable = errors.New("change feed window cannot be walked stably")

// feedState is a source's feed mode: the feed, or listings until a time.
type feedState struct {
	mu     sync.Mutex
	until  time.Time // listings until then
	reason string
	warned bool
	// unstable counts consecutive passes whose window would not hold still,
	// since unstableSince: churn makes that happen now and then, and the
	// next pass walks it again; only a feed that stays so is given up.
	unstable      int
	unstableSince time.Time
}

// FeedMode says how incremental time-entry passes read this source:
// "feed" (the change feed), or "listing: <why>" while the feed is
// unusable and passes list per user by date instead (until the feed is
// tried again, FeedRetry after it failed).
func (c *Client) FeedMode() string {
	c.fs.mu.Lock()
	defer c.fs.mu.Unlock()
	if c.fs.reason == "" || !time.Now().Before(c.fs.until) {
		return "feed"
	}
	return "listing: " + c.fs.reason
}

// feedDown reports whether passes should list instead of reading the feed.
func (c *Client) feedDown() bool { return c.FeedMode() != "feed" }

// unusable says whether err means the feed itself cannot be used (as
// opposed to a fault that the next pass may not meet): the feed's
// endpoints answering 403, 404, 405, 410 or 501, elements of an unknown
// shape, or a window that cannot be walked stably.
func unusable(err error) (string, bool) {
	var he *httpx.Error
	switch {
	case errors.Is(err, errShape):
		return "the feed's elements have an unknown shape", true
	case errors.Is(err, errUnstable):
		return "a feed window cannot be walked stably", true
	case errors.As(err, &he) && strings.Contains(he.Path, "/entities/"):
		switch he.Status {
		case 403, 404, 405, 410, 501:
			return fmt.Sprintf("the feed answers %d", he.Status), true
		}
	}
	return "", false
}

// Instability gives the feed up only when it lasts: this many passes in a
// row, over at least this long. A busy workspace's window shifting under a
// walk is transient (the pass fails and the next one walks it again);
// falling back for hours on it would leave back-dated edits to reconcile.
const (
	unstablePasses = 10
	unstableFor    = 30 * time.Minute
)

// unstableTooLong records an unstable pass and says whether the feed has
// been unstable long enough to be given up.
func (c *Client) unstableTooLong() bool {
	c.fs.mu.Lock()
	defer c.fs.mu.Unlock()
	if c.fs.unstable == 0 {
		c.fs.unstableSince = time.Now()
	}
	c.fs.unstable++
	return c.fs.unstable >= unstablePasses && time.Since(c.fs.unstableSince) >= unstableFor
}

// stable records a pass whose feed held still.
func (c *Client) stable() {
	c.fs.mu.Lock()
	c.fs.unstable = 0
	c.fs.mu.Unlock()
}

// fallBack switches the source to listings for FeedRetry, logging the
// first switch at Warn (later ones at Info).
func (c *Client) fallBack(why string, err error) {
	c.fs.mu.Lock()
	defer c.fs.mu.Unlock()
	c.fs.until, c.fs.reason = time.Now().Add(c.feedRetry), why
	ev := c.log.Info()
	if !c.fs.warned {
		c.fs.warned, ev = true, c.log.Warn()
	}
	ev.Err(err).Str("reason", why).Dur("retry_in", c.feedRetry).Int("fallback_days", c.fallbackDays).
		Msg("clockify change feed unusable: incremental passes list time entries per user by date instead (content-hash compared; deletions found by reconcile)")
}

// incremental reads time entries changed since since: the feed, or, when
// it is unusable, per-user listings of the entries started from
// FallbackDays before since.
func (l *lister) incremental(ctx context.Context, since time.Time) error {
	c := l.c
	if !c.feedDown() {
		err := l.feed(ctx, since)
		why, bad := unusable(err)
		if bad && errors.Is(err, errUnstable) && !c.unstableTooLong() {
			return err // the pass fails; the next one walks the window again
		}
		if !bad {
			if err == nil {
				c.stable()
			}
			return err
		}
		c.fallBack(why, err)
	}
	from := since
	if from.IsZero() {
		from = time.Now().AddDate(0, 0, -c.firstDays)
	}
	start := clients.DateOf(from.UTC()).AddDays(-c.fallbackDays).Time()
	return l.entries(ctx, start, time.Time{})
}

// Mode is FeedMode for time entries (clients.Moder): the other resources
// are always listed.
func (c *Client) Mode(r clients.Resource) string {
	if r != clients.TimeEntries {
		return ""
	}
	return c.FeedMode()
}
