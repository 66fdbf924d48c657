package harvest

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
)

// The encoding/json decoding that the single-pass decoder replaced, kept as
// the reference the differential fuzz target compares against.

type ref struct {
	ID json.Number `json:"id"`
}

type common struct {
	ID        json.Number `json:"id"`
	UpdatedAt string      `json:"updated_at"`
}

type projectJSON struct {
	common
	Name       string  `json:"name"`
	Code       *string `json:"code"`
	Client     ref     `json:"client"`
	IsActive   bool    `json:"is_active"`
	IsBillable bool    `json:"is_billable"`
}

type clientJSON struct {
	common
	Name     string  `json:"name"`
	Currency *string `json:"currency"`
	IsActive bool    `json:"is_active"`
}

type userJSON struct {
	common
	FirstName string  `json:"first_name"`
	LastName  string  `json:"last_name"`
	Email     *string `json:"email"`
	IsActive  bool    `json:"is_active"`
}

type taskJSON struct {
	common
	Name     string `json:"name"`
	IsActive bool   `json:"is_active"`
}

// decodeAll decodes each raw record into J and lets fill set the typed
// columns. Typed values are allocated in one block per page.
func decodeAll[J any, T any](d decoder, r clients.Resource, page int, raws [][]byte, recs []clients.Record,
	fetched time.Time, fill func(*J, *T, *clients.Record) *fieldErr,
) error {
	typed := make([]T, len(raws))
	for i, raw := range raws {
		var j J
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

func (c *common) fill(rec *clients.Record) *fieldErr {
	s, ok := id(string(c.ID))
	if !ok {
		if c.ID == "" {
			return &fieldErr{"id", "missing"}
		}
		return &fieldErr{"id", fmt.Sprintf("want an integer id, got %q", string(c.ID))}
	}
	rec.ID = s
	if c.UpdatedAt == "" {
		return &fieldErr{"updated_at", "missing"}
	}
	t, err := time.Parse(time.RFC3339, c.UpdatedAt)
	if err != nil {
		return &fieldErr{"updated_at", fmt.Sprintf("want RFC 3339, got %q", c.UpdatedAt)}
	}
	rec.Version = t.UTC()
	return nil
}

func project(j *projectJSON, p *clients.Project, rec *clients.Record) *fieldErr {
	if fe := j.common.fill(rec); fe != nil {
		return fe
	}
	var fe *fieldErr
	if p.ClientID, fe = optRef(string(j.Client.ID), "client.id"); fe != nil {
		return fe
	}
	p.Name = j.Name
	if j.Code != nil {
		p.Code = *j.Code
	}
	p.IsActive, p.IsBillable = j.IsActive, j.IsBillable
	rec.Project = p
	return nil
}

func client(j *clientJSON, c *clients.Client, rec *clients.Record) *fieldErr {
	if fe := j.common.fill(rec); fe != nil {
		return fe
	}
	c.Name = j.Name
	if j.Currency != nil {
		c.Currency = *j.Currency
	}
	c.IsActive = j.IsActive
	rec.Client = c
	return nil
}

func user(j *userJSON, u *clients.User, rec *clients.Record) *fieldErr {
	if fe := j.common.fill(rec); fe != nil {
		return fe
	}
	u.FirstName, u.LastName = j.FirstName, j.LastName
	if j.Email != nil {
		u.Email = *j.Email
	}
	u.IsActive = j.IsActive
	rec.User = u
	return nil
}

func task(j *taskJSON, t *clients.Task, rec *clients.Record) *fieldErr {
	if fe := j.common.fill(rec); fe != nil {
		return fe
	}
	t.Name, t.IsActive = j.Name, j.IsActive
	rec.Task = t
	return nil
}

type timeEntryJSON struct {
	common
	SpentDate string      `json:"spent_date"`
	Hours     json.Number `json:"hours"`
	Notes     *string     `json:"notes"`
	User      ref         `json:"user"`
	Project   ref         `json:"project"`
	Task      ref         `json:"task"`
	Client    ref         `json:"client"`
	Invoice   ref         `json:"invoice"`
	Billable  bool        `json:"billable"`
	IsLocked  bool        `json:"is_locked"`
	IsClosed  bool        `json:"is_closed"`
	IsBilled  bool        `json:"is_billed"`
	IsRunning bool        `json:"is_running"`
}

func timeEntry(j *timeEntryJSON, t *clients.TimeEntry, rec *clients.Record) *fieldErr {
	if fe := j.common.fill(rec); fe != nil {
		return fe
	}
	if j.SpentDate == "" {
		return &fieldErr{"spent_date", "missing"}
	}
	d, err := clients.ParseDate(j.SpentDate)
	if err != nil {
		return &fieldErr{"spent_date", fmt.Sprintf("want YYYY-MM-DD, got %q", j.SpentDate)}
	}
	if !validDecimal(string(j.Hours)) {
		return &fieldErr{"hours", "missing or not a number"}
	}
	var fe *fieldErr
	if t.UserID, fe = reqRef(string(j.User.ID), "user.id"); fe != nil {
		return fe
	}
	if t.ProjectID, fe = reqRef(string(j.Project.ID), "project.id"); fe != nil {
		return fe
	}
	if t.TaskID, fe = optRef(string(j.Task.ID), "task.id"); fe != nil {
		return fe
	}
	if t.ClientID, fe = optRef(string(j.Client.ID), "client.id"); fe != nil {
		return fe
	}
	if t.InvoiceID, fe = optRef(string(j.Invoice.ID), "invoice.id"); fe != nil {
		return fe
	}
	t.SpentDate = d
	t.Hours = clients.Decimal(j.Hours)
	t.Notes = j.Notes
	t.Billable, t.IsLocked, t.IsClosed, t.IsBilled, t.IsRunning = j.Billable, j.IsLocked, j.IsClosed, j.IsBilled, j.IsRunning
	rec.TimeEntry = t
	return nil
}

// oracleEntries decodes a page of time entries the encoding/json way.
func oracleEntries(body []byte) ([]clients.Record, bool) {
	var env struct {
		TimeEntries []json.RawMessage `json:"time_entries"`
		Links       *struct {
			Next *string `json:"next"`
		} `json:"links"`
	}
	if json.Unmarshal(body, &env) != nil || env.TimeEntries == nil || env.Links == nil {
		return nil, false
	}
	recs := make([]clients.Record, len(env.TimeEntries))
	for i, raw := range env.TimeEntries {
		var j timeEntryJSON
		if json.Unmarshal(raw, &j) != nil {
			return nil, false
		}
		recs[i].TimeEntry = new(clients.TimeEntry)
		if timeEntry(&j, recs[i].TimeEntry, &recs[i]) != nil {
			return nil, false
		}
		recs[i].Raw = raw
	}
	return recs, true
}

func recordText(r clients.Record) string {
	te := *r.TimeEntry
	notes := "<nil>"
	if te.Notes != nil {
		notes = *te.Notes
	}
	te.Notes = nil
	return fmt.Sprintf("%s %s %s %+v notes=%q", r.ID, r.Version.Format("2006-01-02T15:04:05.999999999Z07:00"), r.Raw, te, notes)
}

// oraclePage decodes a page of any resource the encoding/json way.
func oraclePage(r clients.Resource, body []byte) ([]clients.Record, bool) {
	if r == clients.TimeEntries {
		return oracleEntries(body)
	}
	var env map[string]json.RawMessage
	var links struct {
		Next *string `json:"next"`
	}
	var arr []json.RawMessage
	if json.Unmarshal(body, &env) != nil {
		return nil, false
	}
	// The envelope as a struct would read it: exact key, else case-folded.
	get := func(name string) (json.RawMessage, bool) {
		if v, ok := env[name]; ok {
			return v, true
		}
		for k, v := range env {
			if strings.EqualFold(k, name) {
				return v, true
			}
		}
		return nil, false
	}
	var envS struct {
		Arr   []json.RawMessage `json:"-"`
		Links *struct {
			Next *string `json:"next"`
		} `json:"links"`
	}
	if json.Unmarshal(body, &envS) != nil || envS.Links == nil {
		return nil, false
	}
	_ = links
	raw, ok := get(string(r))
	if !ok || json.Unmarshal(raw, &arr) != nil || arr == nil {
		return nil, false
	}
	raws := make([][]byte, len(arr))
	for i := range arr {
		raws[i] = arr[i]
	}
	recs := make([]clients.Record, len(raws))
	d := newDecoder("acme", nil)
	var err error
	switch r {
	case clients.Projects:
		err = decodeAll(d, r, 1, raws, recs, time.Time{}, project)
	case clients.Clients:
		err = decodeAll(d, r, 1, raws, recs, time.Time{}, client)
	case clients.Users:
		err = decodeAll(d, r, 1, raws, recs, time.Time{}, user)
	case clients.Tasks:
		err = decodeAll(d, r, 1, raws, recs, time.Time{}, task)
	default:
		return nil, false
	}
	return recs, err == nil
}

func anyRecordText(r clients.Record) string {
	if r.TimeEntry != nil {
		return recordText(r)
	}
	var typed any
	switch {
	case r.Project != nil:
		typed = *r.Project
	case r.Client != nil:
		typed = *r.Client
	case r.User != nil:
		typed = *r.User
	case r.Task != nil:
		typed = *r.Task
	}
	return fmt.Sprintf("%s %s %s %+v", r.ID, r.Version.Format("2006-01-02T15:04:05.999999999Z07:00"), r.Raw, typed)
}
