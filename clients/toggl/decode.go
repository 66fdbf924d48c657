package toggl

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/provider/decode"
	"github.com/tidemarkhq/tidemark/schema"
)

// common holds the fields every Toggl record has: its id, its last update
// (`at`, the version) and the deletion stamp.
type common struct {
	ID              json.Number `json:"id"`
	At              *string     `json:"at"`
	ServerDeletedAt *string     `json:"server_deleted_at"`
}

// commonEntry is what a time entry and a report row's entry share.
type commonEntry struct {
	common
	ProjectID   json.Number `json:"project_id"`
	TaskID      json.Number `json:"task_id"`
	UserID      json.Number `json:"user_id"`
	Billable    bool        `json:"billable"`
	Description *string     `json:"description"`
	Start       *string     `json:"start"`
	Stop        *string     `json:"stop"`
}

type entryJSON struct {
	commonEntry
	Duration json.Number `json:"duration"`
	// Tags are the entry's tag names (null when it has none).
	Tags []string `json:"tags"`
	// The v8 names, still in the docs' examples: read when the v9 ones
	// are absent.
	UID json.Number `json:"uid"`
	PID json.Number `json:"pid"`
	TID json.Number `json:"tid"`
}

type projectJSON struct {
	common
	ClientID json.Number `json:"client_id"`
	Name     string      `json:"name"`
	Active   bool        `json:"active"`
	Billable *bool       `json:"billable"`
}

type clientJSON struct {
	common
	Name     string `json:"name"`
	Archived bool   `json:"archived"`
}

type taskJSON struct {
	common
	Name   string `json:"name"`
	Active bool   `json:"active"`
}

// userJSON is an element of GET /workspaces/{wid}/users: documented with
// email, fullname, id, inactive, is_active, is_admin and role, and no `at`
// (APIS.md, "Workspace users"): it is versioned by the listing's clock.
type userJSON struct {
	ID       json.Number `json:"id"`
	Email    string      `json:"email"`
	Fullname string      `json:"fullname"`
	Inactive bool        `json:"inactive"`
	IsActive *bool       `json:"is_active"`
}

// decoder normalizes pages of one source.
type decoder struct {
	decode.Errors
	// owner is the token owner's user id (GET /me), for /me/time_entries
	// entries that do not name their user (the docs' v8-style example has
	// no user_id): every entry of that listing is the owner's.
	owner string
}

func newDecoder(source string, hc *httpx.Client) decoder {
	return decoder{Errors: decode.NewErrors(source, hc)}
}

// envelope is what a listing says of itself. Toggl documents tasks in an
// object {data, page, per_page, sort_field, sort_order, total_count}; the
// other listings are bare arrays (total -1: no total).
type envelope struct{ total, page, perPage int }

// envelopeJSON is the tasks envelope. Data stays raw: absent (nil) is not
// a listing, null is an empty one.
type envelopeJSON struct {
	Data       json.RawMessage `json:"data"`
	Page       *int            `json:"page"`
	PerPage    *int            `json:"per_page"`
	TotalCount *int            `json:"total_count"`
}

// enveloped says which listings may come in the envelope: tasks as
// documented, and projects, paged the same way, in case they do too.
func enveloped(r clients.Resource) bool { return r == clients.Tasks || r == clients.Projects }

// decodePage parses one list response into normalized records, dating
// time entries in UTC (see decodeListing).
func (d decoder) decodePage(r clients.Resource, page int, body []byte, fetched, clock time.Time) ([]clients.Record, error) {
	recs, _, err := d.decodeListing(r, page, body, fetched, clock, time.UTC)
	return recs, err
}

// decodeListing parses one list response (a bare JSON array, or for tasks
// and projects the envelope too) into normalized records and what the
// listing says of itself. Records' Raw are slices of body. clock is the
// source's clock when it served the page: a running timer's hours run to
// it, and records without a version stamp (workspace users) take it. Time
// entries are dated in zone (the user's, as Toggl's reports date them).
func (d decoder) decodeListing(r clients.Resource, page int, body []byte, fetched, clock time.Time, zone *time.Location) ([]clients.Record, envelope, error) {
	env := envelope{total: -1}
	list := body
	if enveloped(r) && decode.FirstByte(body) == '{' {
		var e envelopeJSON
		if err := json.Unmarshal(body, &e); err != nil {
			field, what := decode.Describe(err)
			return nil, env, d.Page(r, page, field, what, body)
		}
		if len(e.Data) == 0 {
			return nil, env, d.Page(r, page, "data", "missing: want an array of records or an envelope {data, page, per_page, total_count}", body)
		}
		if string(e.Data) == "null" {
			e.Data = []byte("[]")
		}
		list = e.Data
		// The counts size the page walk: each is bounded first.
		for _, c := range []struct {
			field string
			v     *int
		}{{"total_count", e.TotalCount}, {"page", e.Page}, {"per_page", e.PerPage}} {
			if c.v == nil {
				continue
			}
			if fe := decode.Count(c.field, int64(*c.v)); fe != nil {
				return nil, env, d.Page(r, page, fe.Field, fe.What, body)
			}
		}
		if e.TotalCount != nil {
			env.total = *e.TotalCount
		}
		if e.Page != nil {
			env.page = *e.Page
		}
		if e.PerPage != nil && *e.PerPage > 0 {
			env.perPage = *e.PerPage
		}
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(list, &raws); err != nil {
		field, what := decode.Describe(err)
		if t := decode.FirstByte(list); t != '[' && t != 0 && json.Valid(list) {
			what = "want an array of records, got " + decode.KindOf(list)
		}
		if len(list) != len(body) && field == "" {
			field = "data"
		}
		return nil, env, d.Page(r, page, field, what, body)
	}
	if raws == nil {
		return nil, env, d.Page(r, page, "", "want an array of records, got null", body)
	}
	recs := make([]clients.Record, len(raws))
	var err error
	switch r {
	case clients.TimeEntries:
		err = decode.Objects(d.Errors, r, schema.TimeEntries, page, raws, recs, fetched, func(j *entryJSON, row []any, rec *clients.Record) *decode.FieldError {
			j.UserID, j.ProjectID, j.TaskID = cmp.Or(j.UserID, j.UID), cmp.Or(j.ProjectID, j.PID), cmp.Or(j.TaskID, j.TID)
			if j.UserID == "" && d.owner != "" {
				j.UserID = json.Number(d.owner)
			}
			return entry(j, row, rec, clock, zone)
		})
	case clients.Projects:
		err = decode.Objects(d.Errors, r, schema.Projects, page, raws, recs, fetched, project)
	case clients.Clients:
		err = decode.Objects(d.Errors, r, schema.Clients, page, raws, recs, fetched, client)
	case clients.Users:
		err = decode.Objects(d.Errors, r, schema.Users, page, raws, recs, fetched, func(j *userJSON, row []any, rec *clients.Record) *decode.FieldError {
			return user(j, row, rec, clock)
		})
	case clients.Tasks:
		err = decode.Objects(d.Errors, r, schema.Tasks, page, raws, recs, fetched, task)
	default:
		return nil, env, fmt.Errorf("%s: resource %s: %w", d.Source, r, clients.ErrUnsupported)
	}
	if err != nil {
		return nil, env, err
	}
	return recs, env, nil
}

// id validates a Toggl integer id and returns it as decimal text.
func id(s string) (string, bool) {
	if !decode.Digits(s) {
		return "", false
	}
	if _, err := strconv.ParseInt(s, 10, 64); err != nil {
		return "", false
	}
	return s, true
}

func optID(v json.Number, field string) (string, *decode.FieldError) {
	if v == "" {
		return "", nil
	}
	s, ok := id(string(v))
	if !ok {
		return "", decode.Field(field, fmt.Sprintf("want an integer id, got %q", string(v)))
	}
	return s, nil
}

func reqID(v json.Number, field string) (string, *decode.FieldError) {
	if v == "" {
		return "", decode.Missing(field)
	}
	return optID(v, field)
}

// parseStamp parses an RFC 3339 stamp with any offset into UTC.
func parseStamp(p *string, field string, required bool) (time.Time, *decode.FieldError) {
	if p == nil || *p == "" {
		if required {
			return time.Time{}, decode.Missing(field)
		}
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, *p)
	if err != nil {
		return time.Time{}, decode.Field(field, fmt.Sprintf("want RFC 3339, got %q", *p))
	}
	return t.UTC(), nil
}

// fill sets the id, the version (at; a deletion stamp later than at wins,
// so that a tombstone is never older than the last live state) and
// DeletedAt.
func (c *common) fill(rec *clients.Record) *decode.FieldError {
	s, fe := reqID(c.ID, "id")
	if fe != nil {
		return fe
	}
	rec.ID = s
	at, fe := parseStamp(c.At, "at", true)
	if fe != nil {
		return fe
	}
	rec.Version = at
	del, fe := parseStamp(c.ServerDeletedAt, "server_deleted_at", false)
	if fe != nil {
		return fe
	}
	if !del.IsZero() {
		rec.DeletedAt = &del
		if del.After(rec.Version) {
			rec.Version = del
		}
	}
	return nil
}

// entry fills a time entry's row. spent_date is start's day in zone, the
// user's own time zone, as Toggl's reports date an entry; started_at and
// ended_at are the instants (ended_at null while the timer runs), time_zone
// names the zone used and tags are the tag names as a JSON array (null when
// Toggl sends none).
func entry(j *entryJSON, row []any, rec *clients.Record, clock time.Time, zone *time.Location) *decode.FieldError {
	if fe := j.common.fill(rec); fe != nil {
		return fe
	}
	start, fe := parseStamp(j.Start, "start", true)
	if fe != nil {
		return fe
	}
	if j.Duration == "" {
		return decode.Missing("duration")
	}
	secs, err := strconv.ParseInt(string(j.Duration), 10, 64)
	if err != nil {
		return decode.Field("duration", fmt.Sprintf("want whole seconds, got %q", string(j.Duration)))
	}
	running := secs < 0
	if running {
		// A running timer: Toggl sends -start (unix seconds). It has run
		// from start until the source's clock.
		secs = max(int64(clock.Sub(start)/time.Second), 0)
	}
	ids := decode.IDs[json.Number]{Req: reqID, Opt: optID}
	user, project, task := ids.Need(j.UserID, "user_id"), ids.May(j.ProjectID, "project_id"), ids.May(j.TaskID, "task_id")
	if ids.Err != nil {
		return ids.Err
	}
	var ended any
	if !running {
		stop, fe := parseStamp(j.Stop, "stop", false)
		if fe != nil {
			return fe
		}
		if stop.IsZero() {
			// A stopped entry without stop (not seen, but possible for
			// duration-only entries): it ended duration after start.
			stop = start.Add(time.Duration(secs) * time.Second)
		}
		ended = stop
	}
	var tags any
	if j.Tags != nil {
		b, err := json.Marshal(j.Tags)
		if err != nil {
			return decode.Field("tags", err.Error())
		}
		tags = json.RawMessage(b)
	}
	if zone == nil {
		zone = time.UTC
	}
	if zone != time.UTC {
		// The day comes from the owner's zone, not from raw: hashed with
		// it (Record.Derived), so that another owner's zone rewrites the
		// row. UTC adds nothing, keeping the hash such rows always had.
		rec.Derived = append(rec.Derived[:0], "zone="+zone.String()...)
	}
	row[schema.TE.SpentDate], row[schema.TE.Hours] = clients.DateOf(start.In(zone)), Hours(secs)
	row[schema.TE.Started], row[schema.TE.Ended], row[schema.TE.Zone], row[schema.TE.Tags] = start, ended, zone.String(), tags
	if j.Description != nil {
		row[schema.TE.Notes] = *j.Description
	}
	// Toggl has no client, invoice, lock, approval or billing state on an
	// entry: those stay NULL or false.
	row[schema.TE.User], row[schema.TE.Project], row[schema.TE.Task], row[schema.TE.Client], row[schema.TE.Invoice] = user, project, schema.OrNull(task), nil, nil
	row[schema.TE.Billable], row[schema.TE.Running], row[schema.TE.Locked], row[schema.TE.Closed], row[schema.TE.Billed] = j.Billable, running, false, false, false
	return nil
}

// Hours renders seconds as hours in exact decimal text, rounded half up to
// 6 decimals by integer arithmetic: 5400 → "1.5", 100 → "0.027778".
func Hours(secs int64) clients.Decimal {
	neg := secs < 0
	if neg {
		secs = -secs
	}
	// Whole hours apart, so that no product overflows.
	whole, rem := secs/3600, secs%3600
	frac := (rem*1_000_000 + 1800) / 3600 // micro-hours, half up
	if frac == 1_000_000 {
		whole, frac = whole+1, 0
	}
	s := strconv.FormatInt(whole, 10)
	if frac != 0 {
		f := fmt.Sprintf("%06d", frac)
		s += "." + strings.TrimRight(f, "0")
	}
	if neg && (whole != 0 || frac != 0) {
		s = "-" + s
	}
	return clients.Decimal(s)
}

func project(j *projectJSON, row []any, rec *clients.Record) *decode.FieldError {
	if fe := j.common.fill(rec); fe != nil {
		return fe
	}
	client, fe := optID(j.ClientID, "client_id")
	if fe != nil {
		return fe
	}
	billable := j.Billable != nil && *j.Billable
	row[schema.PR.Name], row[schema.PR.Code], row[schema.PR.Client], row[schema.PR.Active], row[schema.PR.Billable] = j.Name, nil, schema.OrNull(client), j.Active, billable
	return nil
}

func client(j *clientJSON, row []any, rec *clients.Record) *decode.FieldError {
	if fe := j.common.fill(rec); fe != nil {
		return fe
	}
	row[schema.CL.Name], row[schema.CL.Currency], row[schema.CL.Active] = j.Name, nil, !j.Archived
	return nil
}

func task(j *taskJSON, row []any, rec *clients.Record) *decode.FieldError {
	if fe := j.common.fill(rec); fe != nil {
		return fe
	}
	row[schema.TA.Name], row[schema.TA.Active] = j.Name, j.Active
	return nil
}

// user splits fullname at its first space into first and last name. A
// workspace user has no version stamp of its own: its version is clock, the
// source's clock when it served the listing (its Date header), and the
// write compares it by content hash, so an unchanged user is not rewritten.
// Deleted users are left out of the listing: reconcile finds them.
func user(j *userJSON, row []any, rec *clients.Record, clock time.Time) *decode.FieldError {
	s, fe := reqID(j.ID, "id")
	if fe != nil {
		return fe
	}
	rec.ID, rec.Version = s, clock.UTC()
	first, last, _ := strings.Cut(strings.TrimSpace(j.Fullname), " ")
	active := !j.Inactive && (j.IsActive == nil || *j.IsActive)
	row[schema.US.First], row[schema.US.Last] = schema.OrNull(first), schema.OrNull(strings.TrimSpace(last))
	row[schema.US.Email], row[schema.US.Active] = schema.OrNull(j.Email), active
	return nil
}
