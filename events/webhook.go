package events

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/internal/redact"
)

// Endpoint is a webhook consumer: every event, POSTed to URL, signed per
// Standard Webhooks (https://www.standardwebhooks.com).
type Endpoint struct {
	// Name is the consumer's name: its position and its deliveries.
	Name string
	URL  string
	// Secrets are whsec_ + base64 keys. Each delivery carries one v1
	// signature per secret, so a receiver rotating its secret accepts
	// deliveries throughout.
	Secrets []string
	// Window is how long a failing delivery is retried before it is
	// dead-lettered (default 24h).
	Window time.Duration
	// Timeout bounds one POST (default 10s).
	Timeout time.Duration
}

// deliveryKind is the River job kind of a webhook delivery.
const deliveryKind = "tidemark_webhook"

// DeliveryQueue is the River queue of webhook deliveries.
const DeliveryQueue = "tidemark_webhooks"

// deliveryArgs is one delivery of one event to one endpoint.
type deliveryArgs struct {
	Consumer string `json:"consumer"`
	Seq      int64  `json:"seq"`
	EventID  string `json:"event_id"`
}

func (deliveryArgs) Kind() string { return deliveryKind }

// insertOpts: the resend window, not an attempt count, ends retries.
var insertOpts = &river.InsertOpts{Queue: DeliveryQueue, MaxAttempts: 100_000}

// Sign returns the webhook-signature header value for a message: one
// "v1,<base64 HMAC-SHA256 of id.timestamp.body>" per secret, space-separated.
func Sign(secrets []string, id string, ts time.Time, body []byte) (string, error) {
	sigs := make([]string, 0, len(secrets))
	for i, s := range secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
		if err != nil || !strings.HasPrefix(s, "whsec_") {
			return "", fmt.Errorf("webhook secret %d is not whsec_ + base64", i) // never the secret itself
		}
		m := hmac.New(sha256.New, key)
		fmt.Fprintf(m, "%s.%d.", id, ts.Unix())
		m.Write(body)
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	}
	return strings.Join(sigs, " "), nil
}

// payload is the body of a delivery (Standard Webhooks' type, timestamp,
// data). Everything but row is fixed by the event, so a resend carries the
// same event.
type payload struct {
	Type      string      `json:"type"` // <resource>.<kind>
	Timestamp time.Time   `json:"timestamp"`
	Data      payloadData `json:"data"`
}

type payloadData struct {
	Event
	// Row is the record as the mirror holds it at send time, when it still
	// has the event's content; null once a later change superseded it (that
	// change has its own event).
	Row json.RawMessage `json:"row"`
	// PreviousAttributes are, for an updated event of a resource with
	// history on, the typed columns the change changed and their values
	// before it (Event.Previous); absent otherwise.
	PreviousAttributes map[string]json.RawMessage `json:"previous_attributes,omitempty"`
}

// WebhookParams configure the webhook deliveries.
type WebhookParams struct {
	Pool      *pgxpool.Pool
	Endpoints []Endpoint
	// Retention is the change feed's: dead letters are kept as long.
	Retention time.Duration
	// RetryBase is the first retry's delay (default 5s), doubling with
	// jitter up to an hour, within the endpoint's window.
	RetryBase time.Duration
	// HTTPClient posts the deliveries (default: a plain client; Endpoint
	// Timeout bounds each POST). Redirects are never followed, whatever
	// its CheckRedirect: a 3xx is a failed attempt.
	HTTPClient *http.Client
	Log        zerolog.Logger
	// PollEvery is the dispatchers' polling fallback (default 5s).
	PollEvery time.Duration
}

// Webhooks runs the webhook consumers: a dispatcher per endpoint, which
// reads the feed as a consumer of that name and enqueues one River job per
// event in the transaction that moves its position (so exactly one job per
// event and endpoint), and River's workers, which POST them.
type Webhooks struct {
	p      WebhookParams
	byName map[string]Endpoint
	river  *river.Client[pgx.Tx]

	mu   sync.Mutex
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// NewWebhooks validates the endpoints and builds the River client.
func NewWebhooks(p WebhookParams) (*Webhooks, error) {
	if p.Pool == nil {
		return nil, errors.New("webhooks: no database pool")
	}
	p.RetryBase = cmpOr(p.RetryBase, 5*time.Second)
	p.Retention = cmpOr(p.Retention, DefaultRetention)
	p.PollEvery = cmpOr(p.PollEvery, 5*time.Second)
	// A redirect is a failed attempt, not followed (as Svix does): a 307
	// would re-POST the signed body to whatever host the endpoint names.
	// Also on a client of the caller's (a copy).
	hc := http.Client{}
	if p.HTTPClient != nil {
		hc = *p.HTTPClient
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	p.HTTPClient = &hc
	w := &Webhooks{p: p, byName: map[string]Endpoint{}}
	for i, ep := range p.Endpoints {
		ep.Window = cmpOr(ep.Window, 24*time.Hour)
		ep.Timeout = cmpOr(ep.Timeout, 10*time.Second)
		if ep.Name == "" || ep.URL == "" {
			return nil, fmt.Errorf("webhooks: endpoint %d needs a name and a url", i)
		}
		if _, err := Sign(ep.Secrets, "", time.Time{}, nil); err != nil || len(ep.Secrets) == 0 {
			return nil, fmt.Errorf("webhooks: endpoint %q: want one or two whsec_ secrets", ep.Name)
		}
		w.byName[ep.Name] = ep
	}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &deliveryWorker{w: w}); err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	rc, err := river.NewClient(riverpgxv5.New(p.Pool), &river.Config{
		Queues:                      map[string]river.QueueConfig{DeliveryQueue: {MaxWorkers: 10}},
		Workers:                     workers,
		CancelledJobRetentionPeriod: p.Retention,
		DiscardedJobRetentionPeriod: p.Retention,
		FetchCooldown:               20 * time.Millisecond,
		FetchPollInterval:           time.Second,
		// River's own lines go to our log, warnings and worse only.
		Logger: slog.New(slog.NewJSONHandler(p.Log, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return nil, fmt.Errorf("webhooks: river client: %w", err)
	}
	w.river = rc
	return w, nil
}

// Start starts River's workers and a dispatcher per endpoint.
func (w *Webhooks) Start(ctx context.Context) error {
	if len(w.byName) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	w.mu.Lock()
	w.stop = cancel
	w.mu.Unlock()
	if err := w.river.Start(ctx); err != nil {
		cancel()
		return fmt.Errorf("webhooks: start river: %w", err)
	}
	for _, ep := range w.p.Endpoints {
		w.wg.Go(func() { w.dispatch(ctx, ep.Name) })
	}
	return nil
}

// Stop stops the dispatchers and lets River finish the POSTs in hand.
func (w *Webhooks) Stop(ctx context.Context) error {
	w.mu.Lock()
	stop := w.stop
	w.mu.Unlock()
	if stop == nil {
		return nil
	}
	stop()
	w.wg.Wait()
	return w.river.Stop(ctx)
}

// dispatch enqueues a delivery per event for one endpoint until ctx ends.
// A disabled or behind-the-horizon consumer is reported and looked at again
// a minute later (an operator re-enables or resets it).
func (w *Webhooks) dispatch(ctx context.Context, name string) {
	log := w.p.Log.With().Str("consumer", name).Logger()
	for {
		err := Consume(ctx, w.p.Pool, name, func(ctx context.Context, tx pgx.Tx, ev Event) error {
			_, err := w.river.InsertTx(ctx, tx, deliveryArgs{Consumer: name, Seq: ev.Seq, EventID: ev.ID}, insertOpts)
			return err
		}, PollEvery(w.p.PollEvery), Logger(log))
		if ctx.Err() != nil {
			return
		}
		log.Error().Err(err).Msg("webhook consumer stopped; checking again in a minute")
		if !sleep(ctx, time.Minute) {
			return
		}
	}
}

// deliveryWorker POSTs one delivery.
type deliveryWorker struct {
	river.WorkerDefaults[deliveryArgs]
	w *Webhooks
}

// NextRetry: jittered doubling from RetryBase, at most an hour, and never
// past the window's end, where the last attempt is made.
func (d *deliveryWorker) NextRetry(job *river.Job[deliveryArgs]) time.Time {
	ep := d.w.byName[job.Args.Consumer]
	delay := d.w.p.RetryBase << min(job.Attempt-1, 20)
	delay = min(delay, time.Hour)
	delay = delay/2 + time.Duration(rand.Int64N(int64(delay)/2+1))
	next := time.Now().Add(delay)
	if end := job.CreatedAt.Add(ep.Window); ep.Window > 0 && next.After(end) {
		next = end
	}
	return next
}

func (d *deliveryWorker) Timeout(job *river.Job[deliveryArgs]) time.Duration {
	return cmpOr(d.w.byName[job.Args.Consumer].Timeout, 10*time.Second) + 5*time.Second
}

func (d *deliveryWorker) Work(ctx context.Context, job *river.Job[deliveryArgs]) error {
	a := job.Args
	ep, ok := d.w.byName[a.Consumer]
	if !ok {
		return river.JobCancel(fmt.Errorf("no webhook endpoint %q is configured any more", a.Consumer))
	}
	body, status, err := d.w.body(ctx, a)
	if err != nil {
		return err
	}
	if status != "active" {
		return river.JobCancel(fmt.Errorf("consumer %q is %s: not delivered (redrive after `tidemark events reset --consumer %s --enable`)", a.Consumer, status, a.Consumer))
	}
	if body == nil {
		return river.JobCancel(fmt.Errorf("event %s (seq %d) was deleted by retention before it could be delivered", a.EventID, a.Seq))
	}
	err = d.post(ctx, ep, a.EventID, body)
	if err == nil {
		return nil
	}
	if errors.Is(err, errGone) {
		note := fmt.Sprintf("%s answered 410 Gone at %s: deliveries stopped; fix the endpoint, then `tidemark events reset --consumer %s --enable` and `tidemark events redrive --consumer %s`",
			redact.URL(ep.URL), time.Now().UTC().Format(time.RFC3339), a.Consumer, a.Consumer)
		if derr := pgx.BeginFunc(ctx, d.w.p.Pool, func(tx pgx.Tx) error { return Disable(ctx, tx, a.Consumer, note) }); derr != nil {
			return fmt.Errorf("%w (and disabling the consumer failed: %v)", err, derr)
		}
		d.w.p.Log.Error().Str("consumer", a.Consumer).Str("url", redact.URL(ep.URL)).Msg("webhook endpoint answered 410 Gone: consumer disabled")
		return river.JobCancel(err)
	}
	if time.Since(job.CreatedAt) >= ep.Window {
		return river.JobCancel(fmt.Errorf("resend window of %s exhausted after %d attempts, dead-lettered: %w", ep.Window, job.Attempt, err))
	}
	return err
}

var errGone = errors.New("endpoint answered 410 Gone")

// body builds a delivery's body from the event (nil when retention deleted
// it) and returns the consumer's status.
func (w *Webhooks) body(ctx context.Context, a deliveryArgs) ([]byte, string, error) {
	var out []byte
	var status string
	err := pgx.BeginFunc(ctx, w.p.Pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT status FROM event_consumers WHERE name = $1`, a.Consumer).Scan(&status); err != nil {
			return fmt.Errorf("read consumer %q: %w", a.Consumer, err)
		}
		rows, err := tx.Query(ctx, selectSQL+` WHERE seq = $1`, a.Seq)
		if err != nil {
			return err
		}
		evs, err := pgx.CollectRows(rows, scanEvent)
		if err != nil || len(evs) == 0 {
			return err
		}
		ev := evs[0]
		row, current, err := ev.Row(ctx, tx)
		if err != nil {
			return err
		}
		if !current {
			row = json.RawMessage("null")
		}
		prev, err := ev.Previous(ctx, tx)
		if err != nil {
			return err
		}
		out, err = json.Marshal(payload{Type: string(ev.Resource) + "." + string(ev.Kind), Timestamp: ev.RecordedAt.UTC(),
			Data: payloadData{Event: ev, Row: row, PreviousAttributes: prev}})
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("build delivery of %s: %w", a.EventID, err)
	}
	return out, status, nil
}

// post sends one signed delivery; any 2xx is success.
func (d *deliveryWorker) post(ctx context.Context, ep Endpoint, id string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, ep.Timeout)
	defer cancel()
	now := time.Now()
	sig, err := Sign(ep.Secrets, id, now, body)
	if err != nil {
		return river.JobCancel(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytes.NewReader(body))
	if err != nil {
		return river.JobCancel(fmt.Errorf("webhook %q, url %s: %w", ep.Name, redact.URL(ep.URL), withoutURL(err)))
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("user-agent", "tidemark-webhooks")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := d.w.p.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", redact.URL(ep.URL), withoutURL(err))
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusGone:
		return errGone
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return fmt.Errorf("POST %s: %s: redirects are not followed (update the endpoint's url)", redact.URL(ep.URL), resp.Status)
	default:
		return fmt.Errorf("POST %s: %s: %s", redact.URL(ep.URL), resp.Status, strings.TrimSpace(string(snippet)))
	}
}

// withoutURL drops the URL Go's client and parser put in their errors (the
// caller prints it through redact.URL): Go hides the password, not a
// token in the query.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// Delivery is one webhook delivery as `tidemark events deliveries` shows it.
type Delivery struct {
	JobID     int64      `json:"job_id"`
	Consumer  string     `json:"consumer"`
	EventID   string     `json:"event_id"`
	Seq       int64      `json:"seq"`
	State     string     `json:"state"` // River's: available, retryable, running, completed, cancelled (dead), discarded (dead)
	Attempts  int        `json:"attempts"`
	LastError string     `json:"last_error,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	Finalized *time.Time `json:"finalized_at,omitempty"`
}

// Dead says whether the delivery was dead-lettered.
func (d Delivery) Dead() bool {
	return d.State == string(rivertype.JobStateCancelled) || d.State == string(rivertype.JobStateDiscarded)
}

// DeliveriesParams select deliveries.
type DeliveriesParams struct {
	Consumer string // "" for every consumer
	DeadOnly bool
	Limit    int // default 100
}

var deadStates = []rivertype.JobState{rivertype.JobStateCancelled, rivertype.JobStateDiscarded}

// listClient is a River client that only reads and inserts jobs.
func listClient(pool *pgxpool.Pool) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, &deliveryWorker{w: &Webhooks{}})
	return river.NewClient(riverpgxv5.New(pool), &river.Config{Workers: workers})
}

// Deliveries lists webhook deliveries, newest first.
func Deliveries(ctx context.Context, pool *pgxpool.Pool, p DeliveriesParams) ([]Delivery, error) {
	rc, err := listClient(pool)
	if err != nil {
		return nil, err
	}
	lp := river.NewJobListParams().Kinds(deliveryKind).First(cmp0(p.Limit, 100)).OrderBy(river.JobListOrderByID, river.SortOrderDesc)
	if p.DeadOnly {
		lp = lp.States(deadStates...)
	}
	if p.Consumer != "" {
		lp = lp.Where("args->>'consumer' = @consumer", river.NamedArgs{"consumer": p.Consumer})
	}
	res, err := rc.JobList(ctx, lp)
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	out := make([]Delivery, 0, len(res.Jobs))
	for _, j := range res.Jobs {
		var a deliveryArgs
		if err := json.Unmarshal(j.EncodedArgs, &a); err != nil {
			return nil, fmt.Errorf("delivery job %d: %w", j.ID, err)
		}
		d := Delivery{JobID: j.ID, Consumer: a.Consumer, EventID: a.EventID, Seq: a.Seq, State: string(j.State),
			Attempts: j.Attempt, CreatedAt: j.CreatedAt, Finalized: j.FinalizedAt}
		if n := len(j.Errors); n > 0 {
			d.LastError = j.Errors[n-1].Error
		}
		out = append(out, d)
	}
	return out, nil
}

func cmp0(n, def int) int {
	if n > 0 {
		return n
	}
	return def
}

// RedriveParams select dead letters to send again.
type RedriveParams struct {
	Consumer string // required
	EventID  string // "" for every dead delivery of the consumer
}

// Redrive sends dead-lettered deliveries again: each gets a new job (a new
// resend window) in the transaction that deletes the dead one. The event id,
// and so webhook-id, stays the same. It returns how many it redrove.
func Redrive(ctx context.Context, pool *pgxpool.Pool, p RedriveParams) (int, error) {
	if p.Consumer == "" {
		return 0, errors.New("redrive: which consumer? (--consumer)")
	}
	rc, err := listClient(pool)
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		dead, err := Deliveries(ctx, pool, DeliveriesParams{Consumer: p.Consumer, DeadOnly: true, Limit: 1000})
		if err != nil {
			return n, err
		}
		var todo []Delivery
		for _, d := range dead {
			if p.EventID == "" || d.EventID == p.EventID {
				todo = append(todo, d)
			}
		}
		if len(todo) == 0 {
			return n, nil
		}
		// Oldest first, so the endpoint sees them in feed order.
		err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			for i := len(todo) - 1; i >= 0; i-- {
				d := todo[i]
				if _, err := rc.JobDeleteTx(ctx, tx, d.JobID); err != nil {
					return err
				}
				if _, err := rc.InsertTx(ctx, tx, deliveryArgs{Consumer: d.Consumer, Seq: d.Seq, EventID: d.EventID}, insertOpts); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return n, fmt.Errorf("redrive: %w", err)
		}
		n += len(todo)
	}
}
