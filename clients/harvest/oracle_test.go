package harvest

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/provider/decode"
	"github.com/tidemarkhq/tidemark/schema"
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

func (c *common) fill(rec *clients.Record) *decode.FieldError {
	s, ok := id(string(c.ID))
	if !ok {
		if c.ID == "" {
			return decode.Missing("id")
		}
		return decode.Field("id", fmt.Sprintf("want an integer id, got %q", string(c.ID)))
	}
	rec.ID = s
	if c.UpdatedAt == "" {
		return decode.Missing("updated_at")
	}
	t, err := time.Parse(time.RFC3339, c.UpdatedAt)
	if err != nil {
		return decode.Field("updated_at", fmt.Sprintf("want RFC 3339, got %q", c.UpdatedAt))
	}
	rec.Version = t.UTC()
	return nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func project(j *projectJSON, row []any, rec *clients.Record) *decode.FieldError {
	if fe := j.common.fill(rec); fe != nil {
		return fe
	}
	client, fe := optRef(string(j.Client.ID), "client.id")
	if fe != nil {
		return fe
	}
	p := schema.Projects
	row[p.Index("name")], row[p.Index("code")], row[p.Index("client_id")] = j.Name, schema.OrNull(deref(j.Code)), schema.OrNull(client)
	row[p.Index("is_active")], row[p.Index("is_billable")] = j.IsActive, j.IsBillable
	return nil
}

func client(j *clientJSON, row []any, rec *clients.Record) *decode.FieldError {
	if fe := j.common.fill(rec); fe != nil {
		return fe
	}
	c := schema.Clients
	row[c.Index("name")], row[c.Index("currency")], row[c.Index("is_active")] = j.Name, schema.OrNull(deref(j.Currency)), j.IsActive
	return nil
}

func user(j *userJSON, row []any, rec *clients.Record) *decode.FieldError {
	if fe := j.common.fill(rec); fe != nil {
		return fe
	}
	u := schema.Users
	row[u.Index("first_name")], row[u.Index("last_name")] = schema.OrNull(j.FirstName), schema.OrNull(j.LastName)
	row[u.Index("email")], row[u.Index("is_active")] = schema.OrNull(deref(j.Email)), j.IsActive
	return nil
}

func task(j *taskJSON, row []any, rec *clients.Record) *decode.FieldError {
	if fe := j.common.fill(rec); fe != nil {
		return fe
	}
	row[schema.Tasks.Index("name")], row[schema.Tasks.Index("is_active")] = j.Name, j.IsActive
	return nil
}

type timeEntryJSON struct {
	common
	SpentDate string          `json:"spent_date"`
	Hours     json.Number     `json:"hours"`
	Notes     *string         `json:"notes"`
	User      ref             `json:"user"`
	Project   ref             `json:"project"`
	Task      ref             `json:"task"`
	Client    ref             `json:"client"`
	Invoice   ref             `json:"invoice"`
	Billable  bool            `json:"billable"`
	IsLocked  bool            `json:"is_locked"`
	IsClosed  bool            `json:"is_closed"`
	IsBilled  bool            `json:"is_billed"`
	IsRunning bool            `json:"is_running"`
	Approval  *string         `json:"approval_status"`
	ExtRef    json.RawMessage `json:"external_reference"`
}

func timeEntry(j *timeEntryJSON, row []any, rec *clients.Record) *decode.FieldError {
	if fe := j.common.fill(rec); fe != nil {
		return fe
	}
	if j.SpentDate == "" {
		return decode.Missing("spent_date")
	}
	d, err := clients.ParseDate(j.SpentDate)
	if err != nil {
		return decode.Field("spent_date", fmt.Sprintf("want YYYY-MM-DD, got %q", j.SpentDate))
	}
	if !validDecimal(string(j.Hours)) {
		return decode.Field("hours", "missing or not a number")
	}
	user, fe := reqRef(string(j.User.ID), "user.id")
	if fe != nil {
		return fe
	}
	project, fe := reqRef(string(j.Project.ID), "project.id")
	if fe != nil {
		return fe
	}
	task, fe := optRef(string(j.Task.ID), "task.id")
	if fe != nil {
		return fe
	}
	client, fe := optRef(string(j.Client.ID), "client.id")
	if fe != nil {
		return fe
	}
	invoice, fe := optRef(string(j.Invoice.ID), "invoice.id")
	if fe != nil {
		return fe
	}
	v := schema.Values{
		"spent_date": d, "hours": clients.Decimal(j.Hours), "user_id": user, "project_id": project,
		"task_id": task, "client_id": client, "invoice_id": invoice,
		"billable": j.Billable, "is_locked": j.IsLocked, "is_closed": j.IsClosed, "is_billed": j.IsBilled, "is_running": j.IsRunning,
	}
	if j.Notes != nil {
		v["notes"] = *j.Notes
	}
	if j.Approval != nil && *j.Approval != "" {
		v["approval_status"] = *j.Approval
	}
	if len(j.ExtRef) > 0 && string(j.ExtRef) != "null" {
		if j.ExtRef[0] != '{' {
			return decode.Field("external_reference", "want an object or null")
		}
		v["external_reference"] = j.ExtRef
	}
	copy(row, schema.TimeEntries.Row(v))
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
		recs[i].Row = make([]any, schema.TimeEntries.Width())
		if timeEntry(&j, recs[i].Row, &recs[i]) != nil {
			return nil, false
		}
		recs[i].Raw = raw
	}
	return recs, true
}

// recordText renders a record with its row's values and their Go types.
func recordText(r clients.Record) string {
	return fmt.Sprintf("%s %s %s %#v", r.ID, r.Version.Format("2006-01-02T15:04:05.999999999Z07:00"), r.Raw, r.Row)
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
	recs := make([]clients.Record, len(arr))
	d := newDecoder("acme", nil)
	var err error
	switch r {
	case clients.Projects:
		err = decode.Objects(d.Errors, r, schema.Projects, 1, arr, recs, time.Time{}, project)
	case clients.Clients:
		err = decode.Objects(d.Errors, r, schema.Clients, 1, arr, recs, time.Time{}, client)
	case clients.Users:
		err = decode.Objects(d.Errors, r, schema.Users, 1, arr, recs, time.Time{}, user)
	case clients.Tasks:
		err = decode.Objects(d.Errors, r, schema.Tasks, 1, arr, recs, time.Time{}, task)
	default:
		return nil, false
	}
	return recs, err == nil
}

func anyRecordText(r clients.Record) string { return recordText(r) }
