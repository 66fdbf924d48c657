package webhooks

import (
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
)

// Route is the intake's pattern on the ops mux.
const Route = "POST /webhooks/{source}"

// AnswerWithin bounds the work done before answering: providers want an
// answer within seconds, and a delivery we could not record in time gets
// 503 so that it is sent again.
const AnswerWithin = 900 * time.Millisecond

// Source is what the intake knows of a configured source.
type Source struct {
	Dialect   Dialect
	Resources []clients.Resource
	// Decoder, when set with Intake.Apply, applies an accepted event's
	// record at once (webhooks.apply).
	Decoder Decoder
	// Events is the source's `events: on`: a record applied here appends
	// its change to the feed, as the pass would have (the pass then finds
	// the row unchanged and appends nothing).
	Events bool
	// HistoryOn reports whether the source's resource has `history:` on
	// now (a reload may turn it on): a record applied here then adds its
	// version, as the pass would have. Nil: off.
	HistoryOn func(clients.Resource) bool
}

// Intake serves POST /webhooks/{source}: it reads the body once (at most
// MaxBody bytes), checks the signature against the source's stored
// secrets, answers Toggl's PING, and claims the event in the key store.
// The pass the event triggers runs after the answer, in the owning daemon.
type Intake struct {
	Store   *Store
	Seal    *Sealer // nil: KeyEnv unset; deliveries get 503
	Sources map[string]Source
	MaxBody int64
	// BodyWithin bounds reading a delivery's body (DefaultBodyWithin when
	// zero): a sender trickling it in is cut off.
	BodyWithin time.Duration
	Log        zerolog.Logger
	Metrics    *Metrics
	// Apply writes an accepted event's record through the versioned write
	// after the answer (webhooks.apply); the triggered pass confirms it.
	Apply bool

	mu    sync.Mutex
	cache map[string]cached
	slots chan struct{} // applies in flight
}

// DefaultBodyWithin is Intake.BodyWithin's default: a delivery's body is
// a few kilobytes, sent at once.
const DefaultBodyWithin = 10 * time.Second

// MaxApplying bounds the event records being applied at once.
const MaxApplying = 4

func (in *Intake) applying() chan struct{} {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.slots == nil {
		in.slots = make(chan struct{}, MaxApplying)
	}
	return in.slots
}

// SecretsTTL is how long decrypted secrets are reused between deliveries.
const SecretsTTL = 10 * time.Second

// FreshEvery bounds the fresh reads a signature that matched no cached
// secret asks for after one that matched nothing either: anyone who can
// reach the intake could otherwise cost a query and the decryptions with
// each bogus POST. The first one is never held back (a subscription saved
// a moment ago gets its first delivery, or the provider's ping, at once).
const FreshEvery = 250 * time.Millisecond

type cached struct {
	subs    []Subscription
	secrets []string
	until   time.Time
	missed  time.Time // when a fresh read last matched no signature
}

// secrets returns a source's subscriptions and their secrets (unreadable
// ones as ""), from a short-lived cache unless fresh is asked.
func (in *Intake) secrets(ctx context.Context, source string, fresh bool) ([]Subscription, []string, error) {
	in.mu.Lock()
	c, ok := in.cache[source]
	in.mu.Unlock()
	if ok && (!fresh && time.Now().Before(c.until) || fresh && time.Since(c.missed) < FreshEvery) {
		return c.subs, c.secrets, nil
	}
	subs, err := in.Store.Subscriptions(ctx, source)
	if err != nil {
		return nil, nil, err
	}
	ttl := SecretsTTL
	secrets := make([]string, len(subs))
	for i, s := range subs {
		if strings.HasPrefix(s.ID, provisionalPrefix) {
			ttl = 0 // register names it in a moment: read it again
		}
		sec, err := s.Secret(in.Seal)
		if err != nil {
			in.Log.Error().Err(err).Str("source", source).Str("subscription", s.ID).Msg("webhook subscription secret unreadable")
		}
		secrets[i] = sec
	}
	in.mu.Lock()
	if in.cache == nil {
		in.cache = map[string]cached{}
	}
	in.cache[source] = cached{subs: subs, secrets: secrets, until: time.Now().Add(ttl), missed: c.missed}
	in.mu.Unlock()
	return subs, secrets, nil
}

// missed notes that a fresh read of source's secrets matched no signature.
func (in *Intake) missed(source string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if c, ok := in.cache[source]; ok {
		c.missed = time.Now()
		in.cache[source] = c
	}
}

func (in *Intake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	name := r.PathValue("source")
	src, ok := in.Sources[name]
	// An unknown source is answered as a known one without a valid
	// signature is (same status, headers and body at every step), so that
	// source names cannot be probed without a secret; it is not counted
	// (its name is the caller's).
	known := ok && src.Dialect != nil
	log := in.Log.With().Str("source", name).Logger()
	answer := func(o Outcome, status int, msg string) {
		if known {
			in.Metrics.delivery(name, o)
		}
		if msg != "" {
			http.Error(w, msg, status)
		}
	}
	body, ok := in.readBody(w, r, log, answer)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), AnswerWithin)
	defer cancel()
	if in.Seal == nil {
		log.Error().Msg("webhook delivery refused: " + ErrNoKey.Error())
		answer(Unavailable, http.StatusServiceUnavailable, "webhook secrets unavailable")
		return
	}
	if !known {
		log.Debug().Str("remote", r.RemoteAddr).Msg("webhook delivery for a source without an intake; refused as unsigned")
		answer(BadSignature, http.StatusUnauthorized, "bad signature")
		return
	}
	subs, secrets, err := in.secrets(ctx, name, false)
	if err != nil {
		log.Error().Err(err).Msg("webhook delivery: could not read the subscriptions; the provider will resend")
		answer(Unavailable, http.StatusServiceUnavailable, "try again")
		return
	}
	idx := src.Dialect.Verify(r.Header, body, secrets)
	if idx < 0 {
		// A subscription registered since the cache was filled?
		if subs, secrets, err = in.secrets(ctx, name, true); err == nil {
			if idx = src.Dialect.Verify(r.Header, body, secrets); idx < 0 {
				in.missed(name)
			}
		}
	}
	if idx < 0 || secrets[idx] == "" {
		log.Warn().Str("remote", r.RemoteAddr).Msg("webhook delivery with a missing or wrong signature; refused")
		answer(BadSignature, http.StatusUnauthorized, "bad signature")
		return
	}
	sub := subs[idx].ID
	ev, err := src.Dialect.Parse(r.Header, body)
	if err != nil {
		log.Warn().Err(err).Str("subscription", sub).Msg("signed webhook delivery we cannot read; refused")
		answer(Invalid, http.StatusBadRequest, "unreadable event")
		return
	}
	if ev.Ping {
		if err := in.Store.Validated(ctx, name, sub); err != nil {
			log.Warn().Err(err).Msg("could not record the subscription's validation")
		}
		log.Info().Str("subscription", sub).Msg("webhook PING answered")
		in.Metrics.delivery(name, Ping)
		w.Header().Set("Content-Type", "application/json")
		b, _ := json.Marshal(map[string]string{"validation_code": ev.ValidationCode})
		w.Write(b)
		return
	}
	res := ev.Resource
	if !slices.Contains(src.Resources, res) {
		res = ""
	}
	out, err := in.Store.Claim(ctx, Delivery{Source: name, Key: ev.Key, Resource: res, Hash: ev.Hash, Subscription: sub})
	if err != nil {
		log.Error().Err(err).Str("key", ev.Key).Msg("webhook delivery not recorded; the provider will resend")
		answer(Unavailable, http.StatusServiceUnavailable, "try again")
		return
	}
	l := log.Debug()
	if out == Conflict {
		l = log.Warn().Str("received_hash", hex.EncodeToString(ev.Hash))
	}
	l.Str("key", ev.Key).Str("entity", ev.Entity).Str("resource", string(res)).Str("outcome", string(out)).
		Msg(map[Outcome]string{
			Accepted: "webhook accepted; a pass of the resource is due", Duplicate: "webhook repeat; nothing new",
			Conflict:      "webhook CONFLICT: a payload different from the one stored under its key; not processed (tidemark webhooks conflicts)",
			ExpiredReplay: "webhook replayed after its key expired; a pass of the resource is due",
			Ignored:       "webhook about something this source does not mirror",
		}[out])
	in.Metrics.delivery(name, out)
	w.WriteHeader(http.StatusOK)
	if in.Apply && src.Decoder != nil && len(ev.Record) > 0 && res != "" && (out == Accepted || out == ExpiredReplay) {
		in.applyLater(log, name, src, res, ev, arrived)
	}
}

// readBody reads the delivery's body, at most MaxBody bytes, before
// BodyWithin (a body trickling in is cut off there, so that a stalled
// sender holds no connection for ever); false when it answered.
func (in *Intake) readBody(w http.ResponseWriter, r *http.Request, log zerolog.Logger, answer func(Outcome, int, string)) ([]byte, bool) {
	within := cmp.Or(in.BodyWithin, DefaultBodyWithin)
	// Not every ResponseWriter can (a recorder in a test): the server's
	// ReadTimeout bounds the read then.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(within))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, in.MaxBody))
	if err == nil {
		return body, true
	}
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		log.Warn().Int64("max_body", in.MaxBody).Msg("webhook body too large; refused")
		answer(TooLarge, http.StatusRequestEntityTooLarge, "body too large")
		return nil, false
	}
	log.Warn().Err(err).Str("remote", r.RemoteAddr).Dur("within", within).Msg("webhook body not read in time or broken off; refused")
	answer(Invalid, http.StatusBadRequest, "could not read the body")
	return nil, false
}

// applyLater applies an accepted event's record after the answer, a few
// at a time; when all are busy the triggered pass alone brings the change.
// A panic there (a decoder meeting a payload nobody foresaw) is logged
// and counted, and the intake keeps serving: the pass reads the record.
func (in *Intake) applyLater(log zerolog.Logger, name string, src Source, res clients.Resource, ev Event, arrived time.Time) {
	select {
	case in.applying() <- struct{}{}:
	default:
		return
	}
	go func() {
		defer func() { <-in.applying() }()
		defer func() {
			if p := recover(); p != nil {
				in.Metrics.applyPanic(name)
				log.Error().Str("resource", string(res)).Str("panic", fmt.Sprint(p)).Str("stack", string(debug.Stack())).
					Msg("webhook record not applied: the apply panicked (a bug; the pass will read the record)")
			}
		}()
		in.apply(log, name, src, res, ev.Record, observed(ev, arrived), arrived)
	}()
}

// observed is when an event's record was the entity's state: when the
// provider made the event, or its arrival when that is unknown or later
// (a clock ahead of ours). A late event for an edit made in the same
// second as a newer one a pass already fetched then loses the tie, as a
// listing fetched that early would, instead of rolling the row back.
func observed(ev Event, arrived time.Time) time.Time {
	if !ev.CreatedAt.IsZero() && ev.CreatedAt.Before(arrived) {
		return ev.CreatedAt
	}
	return arrived
}
