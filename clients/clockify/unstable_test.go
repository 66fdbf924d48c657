package clockify

import (
	"testing"
	"time"
)

// A feed window that shifts under a walk now and then (churn) fails that
// pass only; the feed is given up for listings only when it stays unstable
// for many passes over a long time. (A 30-second e2e under churn fell back
// for 6 hours and lost back-dated edits to reconcile.)
func TestUnstableFeedIsGivenUpOnlyWhenItLasts(t *testing.T) {
	c := &Client{}
	for i := 1; i < unstablePasses; i++ {
		if c.unstableTooLong() {
			t.Fatalf("given up after %d unstable passes", i)
		}
	}
	if c.unstableTooLong() {
		t.Fatal("given up after a few seconds of instability")
	}
	c.fs.unstableSince = time.Now().Add(-unstableFor)
	if !c.unstableTooLong() {
		t.Fatalf("still on the feed after %d unstable passes over %s", c.fs.unstable, unstableFor)
	}
	c.stable()
	if c.unstableTooLong() {
		t.Fatal("a stable pass did not reset the count")
	}
}
