package toggl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
)

// common holds the fields every Toggl record has: its id, its last update
// (`at`, the version) and the deletion stamp.
type common struct {
	ID              json.Number `json:"id"`
	At              *string     `json:"at"`
	ServerDeletedAt *string     `json:"server_deleted_at"`
}

type entryJSON struct {
	common
	ProjectID   json.Number `json:"project_id"`
	TaskID      json.Number `json:"task_id"`
	UserID      json.Number `json:"user_id"`
	Billable    bool        `json:"billable"`
	Description *string     `json:"description"`
	Start       *string     `json:"start"`
	Duration    json.Number `json:"duration"`
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

type userJSON struct {
	common
	Email    string `json:"email"`
	Fullname string `json:"fullname"`
	Inactive bool   `json:"inactive"`
}

// decoder normalizes pages of one source.
type decoder struct {
	source string
	// errf builds decode errors; it redacts the client's secrets.
	errf func(resource string, page int, field, what string, body []byte) *httpx.Error
}

func newDecoder(source string, hc *httpx.Client) decoder {
	d := decoder{source: source}
	if hc != nil {
		d.errf = hc.DecodeError
	} else {
		d.errf = func(resource string, page int, field, what string, body []byte) *httpx.Error {
			return httpx.DecodeError(source, resource, page, field, what, body)
		}
	}
	return d
}

type fieldErr struct{ field, what string }

// decodePage parses one list response (a bare JSON array, Toggl's only
// shape) into normalized records. Records' Raw are slices of body. clock is
// the source's clock when it served the page: a running timer's hours run to
// it.
func (d decoder) decodePage(r clients.Resource, page int, body []byte, fetched, clock time.Time) ([]clients.Record, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(body, &raws); err != nil {
		field, what := describe(err)
		if field == "" {
			field = "(page)"
		}
		if t := firstByte(body); t != '[' && t != 0 && json.Valid(body) {
			what = "want an array of records, got " + kindOf(t)
		}
		return nil, d.errf(string(r), page, field, what, body)
	}
	if raws == nil {
		return nil, d.errf(string(r), page, "(page)", "want an array of records, got null", body)
	}
	recs := make([]clients.Record, len(raws))
	var err error
	switch r {
	case clients.TimeEntries:
		err = decodeAll(d, r, page, raws, recs, fetched, func(j *entryJSON, t *clients.TimeEntry, rec *clients.Record) *fieldErr {
			return entry(j, t, rec, clock)
		})
	case clients.Projects:
		err = decodeAll(d, r, page, raws, recs, fetched, project)
	case clients.Clients:
		err = decodeAll(d, r, page, raws, recs, fetched, client)
	case clients.Users:
		err = decodeAll(d, r, page, raws, recs, fetched, user)
	case clients.Tasks:
		err = decodeAll(d, r, page, raws, recs, fetched, task)
	default:
		return nil, fmt.Errorf("%s: resource %s: %w", d.source, r, clients.ErrUnsupported)
	}
	if err != nil {
		return nil, err
	}
	return recs, nil
}

func firstByte(b []byte) byte {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

func kindOf(c byte) string {
	switch c {
	case '{':
		return "object"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// decodeAll decodes each raw record into J and lets fill set the typed
// columns. Typed values are allocated in one block per page.
func decodeAll[J any, T any](d decoder, r clients.Resource, page int, raws []json.RawMessage, recs []clients.Record,
	fetched time.Time, fill func(*J, *T, *clients.Record) *fieldErr,
) error {
	typed := make([]T, len(raws))
	for i, raw := range raws {
		var j J
		if t := firstByte(raw); t != '{' {
			return d.errf(string(r), page, fmt.Sprintf("%s[%d]", r, i), "want an object, got "+kindOf(t), raw)
		}
		if err := json.Unmarshal(raw, &j); err != nil {
			field, what := describe(err)
			if field == "" {
				return d.errf(string(r), page, fmt.Sprintf("%s[%d]", r, i), what, raw)
			}
			return d.errf(string(r), page, fmt.Sprintf("%s[%d].%s", r, i, field), what, raw)
		}
		rec := &recs[i]
		rec.Raw = raw
		rec.FetchedAt = fetched
		if fe := fill(&j, &typed[i], rec); fe != nil {
			return d.errf(string(r), page, fmt.Sprintf("%s[%d].%s", r, i, fe.field), fe.what, raw)
		}
	}
	return nil
}

// describe turns an encoding/json error into a field path and a phrase.
func describe(err error) (field, what string) {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		if te.Field == "" {
			return "", fmt.Sprintf("want an object, got %s", te.Value)
		}
		// Embedded structs show up in the path by their Go name.
		field := strings.ReplaceAll(te.Field, "common.", "")
		return field, fmt.Sprintf("want %s, got %s", jsonKind(te.Type.Kind().String()), te.Value)
	case errors.As(err, &se):
		return "", fmt.Sprintf("not JSON (%s at byte %d)", se.Error(), se.Offset)
	}
	return "", err.Error()
}

func jsonKind(k string) string {
	switch k {
	case "bool":
		return "boolean"
	case "ptr", "struct":
		return "object"
	case "slice":
		return "array"
	}
	return k // string (json.Number is a string kind: a number)
}

// id validates a Toggl integer id and returns it as decimal text.
func id(s string) (string, bool) {
	if s == "" || len(s) > 19 {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return "", false
		}
	}
	if _, err := strconv.ParseInt(s, 10, 64); err != nil {
		return "", false
	}
	return s, true
}

func optID(v json.Number, field string) (string, *fieldErr) {
	if v == "" {
		return "", nil
	}
	s, ok := id(string(v))
	if !ok {
		return "", &fieldErr{field, fmt.Sprintf("want an integer id, got %q", string(v))}
	}
	return s, nil
}

func reqID(v json.Number, field string) (string, *fieldErr) {
	if v == "" {
		return "", &fieldErr{field, "missing"}
	}
	return optID(v, field)
}

// parseStamp parses an RFC 3339 stamp with any offset into UTC.
func parseStamp(p *string, field string, required bool) (time.Time, *fieldErr) {
	if p == nil || *p == "" {
		if required {
			return time.Time{}, &fieldErr{field, "missing"}
		}
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, *p)
	if err != nil {
		return time.Time{}, &fieldErr{field, fmt.Sprintf("want RFC 3339, got %q", *p)}
	}
	return t.UTC(), nil
}

// fill sets the id, the version (at; a deletion stamp later than at wins,
// so that a tombstone is never older than the last live state) and
// DeletedAt.
func (c *common) fill(rec *clients.Record) *fieldErr {
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

func entry(j *entryJSON, t *clients.TimeEntry, rec *clients.Record, clock time.Time) *fieldErr {
	if fe := j.common.fill(rec); fe != nil {
		return fe
	}
	start, fe := parseStamp(j.Start, "start", true)
	if fe != nil {
		return fe
	}
	if j.Duration == "" {
		return &fieldErr{"duration", "missing"}
	}
	secs, err := strconv.ParseInt(string(j.Duration), 10, 64)
	if err != nil {
		return &fieldErr{"duration", fmt.Sprintf("want whole seconds, got %q", string(j.Duration))}
	}
	if secs < 0 {
		// A running timer: Toggl sends -start (unix seconds). It has run
		// from start until the source's clock.
		t.IsRunning = true
		secs = max(int64(clock.Sub(start)/time.Second), 0)
	}
	if t.UserID, fe = reqID(j.UserID, "user_id"); fe != nil {
		return fe
	}
	if t.ProjectID, fe = optID(j.ProjectID, "project_id"); fe != nil {
		return fe
	}
	if t.TaskID, fe = optID(j.TaskID, "task_id"); fe != nil {
		return fe
	}
	t.SpentDate = clients.DateOf(start)
	t.Hours = Hours(secs)
	t.Notes = j.Description
	t.Billable = j.Billable
	rec.TimeEntry = t
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

func project(j *projectJSON, p *clients.Project, rec *clients.Record) *fieldErr {
	if fe := j.common.fill(rec); fe != nil {
		return fe
	}
	var fe *fieldErr
	if p.ClientID, fe = optID(j.ClientID, "client_id"); fe != nil {
		return fe
	}
	p.Name, p.IsActive = j.Name, j.Active
	if j.Billable != nil {
		p.IsBillable = *j.Billable
	}
	rec.Project = p
	return nil
}

func client(j *clientJSON, c *clients.Client, rec *clients.Record) *fieldErr {
	if fe := j.common.fill(rec); fe != nil {
		return fe
	}
	c.Name, c.IsActive = j.Name, !j.Archived
	rec.Client = c
	return nil
}

func task(j *taskJSON, t *clients.Task, rec *clients.Record) *fieldErr {
	if fe := j.common.fill(rec); fe != nil {
		return fe
	}
	t.Name, t.IsActive = j.Name, j.Active
	rec.Task = t
	return nil
}

// user splits fullname at its first space into first and last name.
func user(j *userJSON, u *clients.User, rec *clients.Record) *fieldErr {
	if fe := j.common.fill(rec); fe != nil {
		return fe
	}
	first, last, _ := strings.Cut(strings.TrimSpace(j.Fullname), " ")
	u.FirstName, u.LastName = first, strings.TrimSpace(last)
	u.Email, u.IsActive = j.Email, !j.Inactive
	rec.User = u
	return nil
}
