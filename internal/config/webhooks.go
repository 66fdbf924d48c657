package config

import "time"

// Webhook defaults (issue 14).
const (
	// DefaultWebhookKeep outlives the providers' resend windows (Toggl keeps
	// events about a week for its own listing, but resends within hours;
	// Clockify keeps logs 7 days) by a margin for a receiver that was down.
	DefaultWebhookKeep = 96 * time.Hour
	// DefaultWebhookMaxBody bounds one delivery's body: a time entry event is
	// a few kilobytes.
	DefaultWebhookMaxBody = 1 << 20
)

// Webhooks configures the intake of provider webhooks on the listen
// address (POST /webhooks/{source}).
type Webhooks struct {
	// Keep is how long an event key is remembered: a repeat within it is a
	// duplicate (or a conflict), a repeat after it a replay.
	Keep Duration `yaml:"keep"`
	// MaxBody is the largest body accepted, in bytes (larger: 413).
	MaxBody int64 `yaml:"max_body"`
	// Apply writes an accepted event's record at once through the
	// versioned write when the event carries it with its version stamp
	// (Toggl); the pass the event triggers confirms it.
	Apply bool `yaml:"apply"`
}

func (w *Webhooks) validate(fail func(key, format string, args ...any) error) error {
	if w.Keep < 0 {
		return fail("webhooks.keep", "must not be negative")
	}
	if w.Keep == 0 {
		w.Keep = Duration(DefaultWebhookKeep)
	}
	if w.MaxBody < 0 {
		return fail("webhooks.max_body", "must not be negative")
	}
	if w.MaxBody == 0 {
		w.MaxBody = DefaultWebhookMaxBody
	}
	return nil
}
