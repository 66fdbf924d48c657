package config

import (
	"strings"
	"testing"
	"time"
)

const feedGood = good + `    events: on
change_feed:
  retention: 72h
  webhooks:
    - name: invoicing
      url: https://hooks.example.com/tidemark
      secrets: [whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, whsec_c2Vjb25kLXNlY3JldC1vZi0yNC1ieXRlcw==]
      window: 36h
`

func TestChangeFeedConfig(t *testing.T) {
	c, err := Parse("t.yaml", []byte(feedGood), fullEnv)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Sources[0].Events || c.ChangeFeed.Retention.D() != 72*time.Hour {
		t.Fatalf("events %v retention %s", c.Sources[0].Events, c.ChangeFeed.Retention.D())
	}
	w := c.ChangeFeed.Webhooks[0]
	if w.Window.D() != 36*time.Hour || w.Timeout.D() != DefaultWebhookTimout || len(w.Secrets) != 2 {
		t.Fatalf("webhook %+v", w)
	}
	// Off by default, and the default retention.
	c, err = Parse("t.yaml", []byte(good), fullEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.Sources[0].Events || c.ChangeFeed.Retention.D() != DefaultRetention {
		t.Fatalf("defaults: events %v retention %s", c.Sources[0].Events, c.ChangeFeed.Retention.D())
	}
}

func TestChangeFeedConfigErrors(t *testing.T) {
	cases := []struct{ name, from, to, want string }{
		{"bad switch", "events: on", "events: sometimes", `t.yaml:13: sources[0].events: invalid value "sometimes" (want on or off)`},
		{"retention under window plus a day", "retention: 72h", "retention: 48h", `change_feed.retention: 48h0m0s is shorter than webhook "invoicing"'s resend window plus a day`},
		{"bad secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw,", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw,", "change_feed.webhooks[0].secrets[0]: not a Standard Webhooks secret"},
		{"three secrets", "secrets: [", "secrets: [whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, ", "change_feed.webhooks[0].secrets: want one secret, or two during a rotation (got 3)"},
		{"bad url", "https://hooks.example.com/tidemark", "ftp://x", `change_feed.webhooks[0].url: "ftp://x" is not an http(s) URL`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(strings.Replace(feedGood, tc.from, tc.to, 1)), fullEnv)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw") {
				t.Fatalf("secret in error: %v", err)
			}
		})
	}
}
