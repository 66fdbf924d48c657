package clockify

import (
	"bytes"
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

// feedKind names one of the change feeds: /entities/{kind}.
type feedKind string

const (
	feedCreated feedKind = "created"
	feedUpdated feedKind = "updated"
	feedDeleted feedKind = "deleted"
)

// stampField is the change document's field that carries the change's
// time (see the package doc: only deletedAt is documented).
func (k feedKind) stampField() string {
	switch k {
	case feedCreated:
		return "createdAt"
	case feedUpdated:
		return "updatedAt"
	}
	return "deletedAt"
}

// decoder normalizes pages of one source.
type decoder struct{ decode.Errors }

func newDecoder(source string, hc *httpx.Client) decoder {
	return decoder{decode.NewErrors(source, hc)}
}

// validID accepts Clockify's ids (24 hex digits) and, leniently, any short
// token of letters, digits, '-' and '_': ids are kept as they are, and they
// go into URL paths unescaped.
func validID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// elements splits a bare JSON array page into its elements' exact bytes.
// With envelope, {"response":[...]} is accepted too (the change feed).
func (d decoder) elements(r clients.Resource, page int, body []byte, envelope bool) ([]json.RawMessage, error) {
	var elems []json.RawMessage
	if envelope && decode.FirstByte(body) == '{' {
		var env struct {
			Response *[]json.RawMessage `json:"response"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			field, what := decode.Describe(err)
			return nil, d.Page(r, page, field, what, body)
		}
		if env.Response == nil {
			return nil, d.Errf(string(r), page, "response", "missing: want an array of changes", body)
		}
		elems = *env.Response
	} else if err := json.Unmarshal(body, &elems); err != nil {
		field, what := decode.Describe(err)
		if field == "" && strings.HasPrefix(what, "want an object") {
			what = "want an array" + strings.TrimPrefix(what, "want an object")
		}
		return nil, d.Page(r, page, field, what, body)
	}
	for i, e := range elems {
		if decode.FirstByte(e) != '{' {
			return nil, d.Elem(r, page, i, decode.Field("", "want an object, got "+decode.KindOf(e)), e)
		}
	}
	return elems, nil
}

// decodeList normalizes a listing page: every record gets version (the
// page's clock) and fetched.
func (d decoder) decodeList(r clients.Resource, page int, body []byte, version, fetched time.Time) ([]clients.Record, error) {
	elems, err := d.elements(r, page, body, false)
	if err != nil {
		return nil, err
	}
	recs := make([]clients.Record, len(elems))
	for i, raw := range elems {
		rec := &recs[i]
		rec.Raw, rec.Version, rec.FetchedAt = raw, version.UTC(), fetched
		if fe := fill(r, raw, rec); fe != nil {
			return nil, d.Elem(r, page, i, fe, raw)
		}
	}
	return recs, nil
}

// fill decodes one record of r into rec's typed fields and id.
func fill(r clients.Resource, raw []byte, rec *clients.Record) *decode.FieldError {
	switch r {
	case clients.TimeEntries:
		return fillEntry(raw, rec)
	case clients.Projects:
		var j projectJSON
		if fe := decode.Unmarshal(raw, &j); fe != nil {
			return fe
		}
		return j.fill(rec)
	case clients.Clients:
		var j clientJSON
		if fe := decode.Unmarshal(raw, &j); fe != nil {
			return fe
		}
		return j.fill(rec)
	case clients.Users:
		var j userJSON
		if fe := decode.Unmarshal(raw, &j); fe != nil {
			return fe
		}
		return j.fill(rec)
	case clients.Tasks:
		var j taskJSON
		if fe := decode.Unmarshal(raw, &j); fe != nil {
			return fe
		}
		return j.fill(rec)
	}
	return decode.Field("", "unknown resource "+string(r))
}

// decodeIDs reads only the ids of a listing page (users for the per-user
// listings, projects for their tasks).
func (d decoder) decodeIDs(r clients.Resource, page int, body []byte) ([]string, error) {
	elems, err := d.elements(r, page, body, false)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(elems))
	for i, raw := range elems {
		var j struct {
			ID *string `json:"id"`
		}
		fe := decode.Unmarshal(raw, &j)
		if fe == nil {
			ids[i], fe = reqID(j.ID, "id")
		}
		if fe != nil {
			return nil, d.Elem(r, page, i, fe, raw)
		}
	}
	return ids, nil
}

type changeJSON struct {
	ID        *string         `json:"id"`
	CreatedAt *string         `json:"createdAt"`
	UpdatedAt *string         `json:"updatedAt"`
	DeletedAt *string         `json:"deletedAt"`
	Document  json.RawMessage `json:"document"`
}

// decodeFeed normalizes a change-feed page. It returns the records and the
// number of changes on the page (which decides whether it was short).
func (d decoder) decodeFeed(k feedKind, page int, body []byte, fetched time.Time) ([]clients.Record, int, error) {
	const r = clients.TimeEntries
	elems, err := d.elements(r, page, body, true)
	if err != nil {
		return nil, 0, err
	}
	recs := make([]clients.Record, len(elems))
	for i, raw := range elems {
		if fe := fillChange(k, raw, &recs[i], fetched); fe != nil {
			return nil, 0, d.Elem(r, page, i, fe, raw)
		}
	}
	return recs, len(elems), nil
}

func fillChange(k feedKind, raw []byte, rec *clients.Record, fetched time.Time) *decode.FieldError {
	var j changeJSON
	if fe := decode.Unmarshal(raw, &j); fe != nil {
		return fe
	}
	var st *string
	switch k {
	case feedCreated:
		st = j.CreatedAt
	case feedUpdated:
		st = j.UpdatedAt
	default:
		st = j.DeletedAt
	}
	at, fe := reqTime(st, k.stampField())
	if fe != nil {
		return fe
	}
	// A created entry may have been updated since (inside the window, so
	// /updated leaves it out): its document is the later state, and its
	// version must be that state's stamp, not the creation's.
	if k == feedCreated && j.UpdatedAt != nil {
		up, fe := reqTime(j.UpdatedAt, "updatedAt")
		if fe != nil {
			return fe
		}
		if up.After(at) {
			at = up
		}
	}
	rec.Version, rec.FetchedAt = at, fetched
	doc := bytes.TrimSpace(j.Document)
	hasDoc := len(doc) > 0 && doc[0] == '{'
	if len(doc) > 0 && !hasDoc && string(doc) != "null" {
		return decode.Field("document", "want an object, got "+decode.KindOf(doc))
	}
	if k == feedDeleted {
		// A tombstone: the whole change document is kept as Raw.
		rec.Raw = raw
		rec.DeletedAt = &at
		var id *string
		if hasDoc {
			var dj struct {
				ID *string `json:"id"`
			}
			if fe := decode.Unmarshal(doc, &dj); fe != nil {
				return decode.Under("document", fe)
			}
			id = dj.ID
		}
		field := "document.id"
		if id == nil {
			id, field = j.ID, "id"
		}
		rec.ID, fe = reqID(id, field)
		return fe
	}
	if !hasDoc {
		return decode.Field("document", "missing: a "+string(k)+" change must carry the time entry")
	}
	rec.Raw = doc
	if fe := fillEntry(doc, rec); fe != nil {
		return decode.Under("document", fe)
	}
	if j.ID != nil && *j.ID != rec.ID {
		return decode.Field("id", fmt.Sprintf("%q differs from document.id %q", *j.ID, rec.ID))
	}
	return nil
}

type entryJSON struct {
	ID        *string `json:"id"`
	UserID    *string `json:"userId"`
	ProjectID *string `json:"projectId"`
	TaskID    *string `json:"taskId"`
	ClientID  *string `json:"clientId"`
	Project   *struct {
		ClientID *string `json:"clientId"`
	} `json:"project"`
	Description  *string `json:"description"`
	Billable     bool    `json:"billable"`
	IsLocked     bool    `json:"isLocked"`
	TimeInterval *struct {
		Start    *string `json:"start"`
		End      *string `json:"end"`
		Duration *string `json:"duration"`
	} `json:"timeInterval"`
}

// fillEntry normalizes one time entry. spent_date is the UTC date of
// timeInterval.start; hours come from timeInterval.duration (or end −
// start when the duration is null on a stopped entry); a running entry
// (end null) has hours 0 and is_running.
func fillEntry(raw []byte, rec *clients.Record) *decode.FieldError {
	var j entryJSON
	if fe := decode.Unmarshal(raw, &j); fe != nil {
		return fe
	}
	var fe *decode.FieldError
	if rec.ID, fe = reqID(j.ID, "id"); fe != nil {
		return fe
	}
	user, fe := reqID(j.UserID, "userId")
	if fe != nil {
		return fe
	}
	project, fe := optID(j.ProjectID, "projectId")
	if fe != nil {
		return fe
	}
	task, fe := optID(j.TaskID, "taskId")
	if fe != nil {
		return fe
	}
	client, fe := optID(j.ClientID, "clientId")
	if fe != nil {
		return fe
	}
	if client == "" && j.Project != nil {
		if client, fe = optID(j.Project.ClientID, "project.clientId"); fe != nil {
			return fe
		}
	}
	ti := j.TimeInterval
	if ti == nil {
		return decode.Missing("timeInterval")
	}
	start, fe := reqTime(ti.Start, "timeInterval.start")
	if fe != nil {
		return fe
	}
	var hoursText string
	switch {
	case ti.End == nil:
		hoursText = "0"
	case ti.Duration != nil:
		h, err := hours(*ti.Duration)
		if err != nil {
			return decode.Field("timeInterval.duration", err.Error())
		}
		hoursText = h
		if _, fe := reqTime(ti.End, "timeInterval.end"); fe != nil {
			return fe
		}
	default:
		end, fe := reqTime(ti.End, "timeInterval.end")
		if fe != nil {
			return fe
		}
		if end.Before(start) {
			return decode.Field("timeInterval.end", "before timeInterval.start")
		}
		if end.Sub(start) > maxSeconds*time.Second {
			return decode.Field("timeInterval.end", "too far after timeInterval.start")
		}
		hoursText = hoursOf(int64(end.Sub(start)))
	}
	row := make([]any, schema.TimeEntries.Width())
	row[teSpentDate], row[teHours] = clients.DateOf(start), clients.Decimal(hoursText)
	if j.Description != nil {
		row[teNotes] = *j.Description
	}
	// Clockify has no approval, billing or invoice state on an entry.
	row[teUser], row[teProject], row[teTask], row[teClient], row[teInvoice] = user, project, schema.OrNull(task), schema.OrNull(client), nil
	row[teBillable], row[teLocked], row[teRunning], row[teClosed], row[teBilled] = j.Billable, j.IsLocked, ti.End == nil, false, false
	rec.Row = row
	return nil
}

// Positions of the columns the decoder fills, resolved once.
var (
	teSpentDate, teHours, teNotes = schema.TimeEntries.Index("spent_date"), schema.TimeEntries.Index("hours"), schema.TimeEntries.Index("notes")
	teUser, teProject, teTask     = schema.TimeEntries.Index("user_id"), schema.TimeEntries.Index("project_id"), schema.TimeEntries.Index("task_id")
	teClient, teInvoice           = schema.TimeEntries.Index("client_id"), schema.TimeEntries.Index("invoice_id")
	teBillable, teRunning         = schema.TimeEntries.Index("billable"), schema.TimeEntries.Index("is_running")
	teLocked, teClosed, teBilled  = schema.TimeEntries.Index("is_locked"), schema.TimeEntries.Index("is_closed"), schema.TimeEntries.Index("is_billed")
)

type projectJSON struct {
	ID       *string `json:"id"`
	Name     string  `json:"name"`
	ClientID *string `json:"clientId"`
	Archived bool    `json:"archived"`
	Billable bool    `json:"billable"`
}

func (j *projectJSON) fill(rec *clients.Record) *decode.FieldError {
	var fe *decode.FieldError
	if rec.ID, fe = reqID(j.ID, "id"); fe != nil {
		return fe
	}
	client, fe := optID(j.ClientID, "clientId")
	if fe != nil {
		return fe
	}
	rec.Row = schema.Projects.Row(schema.Values{"name": j.Name, "client_id": client, "is_active": !j.Archived, "is_billable": j.Billable})
	return nil
}

type clientJSON struct {
	ID           *string `json:"id"`
	Name         string  `json:"name"`
	CurrencyCode *string `json:"currencyCode"`
	Archived     bool    `json:"archived"`
}

func (j *clientJSON) fill(rec *clients.Record) *decode.FieldError {
	var fe *decode.FieldError
	if rec.ID, fe = reqID(j.ID, "id"); fe != nil {
		return fe
	}
	v := schema.Values{"name": j.Name, "is_active": !j.Archived}
	if j.CurrencyCode != nil {
		v["currency"] = *j.CurrencyCode
	}
	rec.Row = schema.Clients.Row(v)
	return nil
}

type userJSON struct {
	ID     *string `json:"id"`
	Name   string  `json:"name"`
	Email  *string `json:"email"`
	Status string  `json:"status"`
}

// fill puts Clockify's single name into FirstName: splitting a name into
// first and last is not something to guess.
func (j *userJSON) fill(rec *clients.Record) *decode.FieldError {
	var fe *decode.FieldError
	if rec.ID, fe = reqID(j.ID, "id"); fe != nil {
		return fe
	}
	v := schema.Values{"first_name": j.Name, "is_active": j.Status == "ACTIVE"}
	if j.Email != nil {
		v["email"] = *j.Email
	}
	rec.Row = schema.Users.Row(v)
	return nil
}

type taskJSON struct {
	ID     *string `json:"id"`
	Name   string  `json:"name"`
	Status string  `json:"status"`
}

func (j *taskJSON) fill(rec *clients.Record) *decode.FieldError {
	var fe *decode.FieldError
	if rec.ID, fe = reqID(j.ID, "id"); fe != nil {
		return fe
	}
	rec.Row = schema.Tasks.Row(schema.Values{"name": j.Name, "is_active": j.Status == "ACTIVE"})
	return nil
}

func reqID(s *string, field string) (string, *decode.FieldError) {
	if s == nil || *s == "" {
		return "", decode.Missing(field)
	}
	return optID(s, field)
}

func optID(s *string, field string) (string, *decode.FieldError) {
	if s == nil || *s == "" {
		return "", nil
	}
	if !validID(*s) {
		return "", decode.Field(field, fmt.Sprintf("want a Clockify id, got %q", *s))
	}
	return *s, nil
}

func reqTime(s *string, field string) (time.Time, *decode.FieldError) {
	if s == nil || *s == "" {
		return time.Time{}, decode.Missing(field)
	}
	t, err := time.Parse(time.RFC3339, *s)
	if err != nil {
		return time.Time{}, decode.Field(field, fmt.Sprintf("want yyyy-MM-ddThh:mm:ssZ, got %q", *s))
	}
	return t.UTC(), nil
}

// HoursPrecision is the number of decimals hours are rounded to (half up).
const HoursPrecision = 6

// maxSeconds bounds a duration so that its nanoseconds fit an int64.
const maxSeconds = 9_000_000_000

// hours converts an ISO 8601 duration (PnDTnHnMnS, seconds with up to nine
// decimals) into hours as exact decimal text: integer arithmetic on
// nanoseconds, rounded half up to HoursPrecision decimals, trailing zeros
// dropped: PT8H30M → "8.5", PT45M → "0.75", PT1H0M30S → "1.008333",
// PT0S → "0".
func hours(s string) (string, error) {
	ns, err := parseDuration(s)
	if err != nil {
		return "", err
	}
	return hoursOf(ns), nil
}

func hoursOf(ns int64) string {
	const unit = 3_600_000_000_000 / 1_000_000 // ns per micro-hour
	micro := (ns + unit/2) / unit
	s := strconv.FormatInt(micro/1_000_000, 10)
	frac := fmt.Sprintf("%06d", micro%1_000_000)
	frac = strings.TrimRight(frac, "0")
	if frac != "" {
		s += "." + frac
	}
	return s
}

// parseDuration parses the ISO 8601 durations Clockify sends: P, an optional
// day count, then T and hours, minutes and seconds in that order, each
// optional but at least one component present.
func parseDuration(s string) (int64, error) {
	bad := func(why string) (int64, error) {
		return 0, fmt.Errorf("want an ISO 8601 duration like PT8H30M, got %q (%s)", s, why)
	}
	if len(s) < 3 || s[0] != 'P' {
		return bad("no leading P")
	}
	i := 1
	var secs, nanos int64
	comps := 0
	num := func() (int64, int64, bool, bool) { // value, nanos, fractional, ok
		start := i
		var v int64
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			if v > maxSeconds {
				return 0, 0, false, false
			}
			v = v*10 + int64(s[i]-'0')
			i++
		}
		if i == start {
			return 0, 0, false, false
		}
		if i < len(s) && (s[i] == '.' || s[i] == ',') {
			i++
			fs := i
			var f int64
			for i < len(s) && s[i] >= '0' && s[i] <= '9' {
				if i-fs >= 9 {
					return 0, 0, false, false
				}
				f = f*10 + int64(s[i]-'0')
				i++
			}
			if i == fs {
				return 0, 0, false, false
			}
			for range 9 - (i - fs) {
				f *= 10
			}
			return v, f, true, true
		}
		return v, 0, false, true
	}
	if i < len(s) && s[i] != 'T' {
		v, _, frac, ok := num()
		if !ok || frac || i >= len(s) || s[i] != 'D' {
			return bad("bad day count")
		}
		i++
		secs += v * 86400
		comps++
	}
	if i < len(s) {
		if s[i] != 'T' {
			return bad("want T before the time")
		}
		i++
		order := "HMS"
		tcomps := 0
		for i < len(s) {
			v, f, frac, ok := num()
			if !ok || i >= len(s) {
				return bad("bad number")
			}
			u := strings.IndexByte(order, s[i])
			if u < 0 {
				return bad(fmt.Sprintf("unit %q out of order or unknown", s[i]))
			}
			if frac && s[i] != 'S' {
				return bad("only seconds may have decimals")
			}
			order = order[u+1:]
			i++
			switch s[i-1] {
			case 'H':
				secs += v * 3600
			case 'M':
				secs += v * 60
			case 'S':
				secs += v
				nanos = f
			}
			if secs > maxSeconds {
				return bad("out of range")
			}
			tcomps++
		}
		if tcomps == 0 {
			return bad("nothing after T")
		}
		comps += tcomps
	}
	if comps == 0 || secs > maxSeconds {
		return bad("empty or out of range")
	}
	return secs*1_000_000_000 + nanos, nil
}
