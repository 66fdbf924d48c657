package harvest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
)

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

// decodePage parses one list response into normalized records and the next
// link ("" when the listing is complete). Records' Raw are slices of body.
func (d decoder) decodePage(r clients.Resource, page int, body []byte, fetched time.Time) ([]clients.Record, string, error) {
	var sink *entrySink
	var es elemSink
	if r == clients.TimeEntries {
		sink = newEntrySink(body, fetched)
		es = sink
	}
	env, err := scanEnvelope(body, r, es)
	if err != nil {
		return nil, "", d.syntaxError(r, page, body)
	}
	if env.typeErr != nil {
		return nil, "", d.errf(string(r), page, cmpStr(env.typeErr.field, "(page)"), env.typeErr.what, body)
	}
	if !env.found {
		return nil, "", d.errf(string(r), page, string(r), "missing: want an array of records", body)
	}
	if !env.links {
		return nil, "", d.errf(string(r), page, "links", "missing", body)
	}
	if sink != nil {
		if sink.err != nil {
			sp := env.elems[sink.errAt]
			return nil, "", d.entryErr(page, sink.errAt, sink.err, body[sp.lo:sp.hi])
		}
		return sink.records(), env.next, nil
	}
	raws := make([][]byte, len(env.elems))
	for i, sp := range env.elems {
		raws[i] = body[sp.lo:sp.hi:sp.hi]
	}
	recs := make([]clients.Record, len(raws))
	switch r {
	case clients.Projects:
		err = decodeAll(d, r, page, raws, recs, fetched, project)
	case clients.Clients:
		err = decodeAll(d, r, page, raws, recs, fetched, client)
	case clients.Users:
		err = decodeAll(d, r, page, raws, recs, fetched, user)
	case clients.Tasks:
		err = decodeAll(d, r, page, raws, recs, fetched, task)
	default:
		return nil, "", fmt.Errorf("%s: resource %s: %w", d.source, r, clients.ErrUnsupported)
	}
	if err != nil {
		return nil, "", err
	}
	return recs, env.next, nil
}

// syntaxError reports a body that is not JSON in encoding/json's words.
func (d decoder) syntaxError(r clients.Resource, page int, body []byte) error {
	var v json.RawMessage
	field, what := "", "not JSON"
	if err := json.Unmarshal(body, &v); err != nil {
		field, what = describe(err)
	}
	return d.errf(string(r), page, cmpStr(field, "(page)"), what, body)
}

type fieldErr struct{ field, what string }

func (e *fieldErr) Error() string { return e.field + ": " + e.what }

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

func cmpStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// id validates a Harvest integer id and returns it as decimal text.
func id(s string) (string, bool) {
	if s == "" || len(s) > 19 {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return "", false
		}
	}
	return s, true
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

// optRef returns the id of a nullable {"id":…} object, "" when null.
func optRef(ref, field string) (string, *fieldErr) {
	if ref == "" {
		return "", nil
	}
	s, ok := id(ref)
	if !ok {
		return "", &fieldErr{field, fmt.Sprintf("want an integer id, got %q", ref)}
	}
	return s, nil
}

func reqRef(ref, field string) (string, *fieldErr) {
	if ref == "" {
		return "", &fieldErr{field, "missing"}
	}
	return optRef(ref, field)
}

func validDecimal(n string) bool {
	if n == "" {
		return false
	}
	_, err := strconv.ParseFloat(n, 64)
	return err == nil
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
