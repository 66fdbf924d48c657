package clockify

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

// decoder normalizes pages of one source. refs (never nil from
// newDecoder) resolves the zones and clients entries do not carry.
type decoder struct {
	decode.Errors
	refs *refs
}

func newDecoder(source string, hc *httpx.Client) decoder {
	return decoder{decode.NewErrors(source, hc), newRefs()}
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
	return d.decodeListM(r, page, body, version, fetched, nil)
}

// decodeListM is decodeList noting in ms the users and projects refs did
// not know. A users or projects page teaches refs their zones and clients.
func (d decoder) decodeListM(r clients.Resource, page int, body []byte, version, fetched time.Time, ms *misses) ([]clients.Record, error) {
	elems, err := d.elements(r, page, body, false)
	if err != nil {
		return nil, err
	}
	recs := make([]clients.Record, len(elems))
	for i, raw := range elems {
		rec := &recs[i]
		rec.Raw, rec.Version, rec.FetchedAt = raw, version.UTC(), fetched
		if fe := d.fill(r, raw, rec, ms); fe != nil {
			return nil, d.Elem(r, page, i, fe, raw)
		}
	}
	return recs, nil
}

// fill decodes one record of r into rec's typed fields and id.
func (d decoder) fill(r clients.Resource, raw []byte, rec *clients.Record, ms *misses) *decode.FieldError {
	switch r {
	case clients.TimeEntries:
		return fillEntry(raw, rec, d.refs, ms)
	case clients.Projects:
		if _, fe := fillRef[projectJSON](schema.Projects, raw, rec); fe != nil {
			return fe
		}
		d.refs.clients.set(rec.ID, schema.Projects.Text(*rec, "client_id"))
		return nil
	case clients.Clients:
		_, fe := fillRef[clientJSON](schema.Clients, raw, rec)
		return fe
	case clients.Users:
		j, fe := fillRef[userJSON](schema.Users, raw, rec)
		if fe != nil {
			return fe
		}
		d.refs.zones.set(rec.ID, j.zone())
		return nil
	case clients.Tasks:
		_, fe := fillRef[taskJSON](schema.Tasks, raw, rec)
		return fe
	}
	return decode.Field("", "unknown resource "+string(r))
}

// refJSON is the JSON of a project, client, user or task: its id and the
// values of its table's columns.
type refJSON interface {
	values() (id *string, v schema.Values, fe *decode.FieldError)
}

// fillRef decodes raw as a J into rec: its id, then its row of t.
func fillRef[J any, P interface {
	*J
	refJSON
}](t *schema.Table, raw []byte, rec *clients.Record) (*J, *decode.FieldError) {
	var j J
	if fe := decode.Unmarshal(raw, &j); fe != nil {
		return nil, fe
	}
	// The id is checked first: its error wins over the values'.
	id, v, valuesFE := P(&j).values()
	var fe *decode.FieldError
	if rec.ID, fe = reqID(id, "id"); fe != nil {
		return nil, fe
	}
	if valuesFE != nil {
		return nil, valuesFE
	}
	rec.Row = t.Row(v)
	return &j, nil
}

type changeJSON struct {
	ID            *string         `json:"id"`
	CreatedAt     *string         `json:"createdAt"`
	UpdatedAt     *string         `json:"updatedAt"`
	DeletedAt     *string         `json:"deletedAt"`
	Document      json.RawMessage `json:"document"`
	TimeInterval  json.RawMessage `json:"timeInterval"`
	AuditMetadata *struct {
		CreatedAt *string `json:"createdAt"`
		UpdatedAt *string `json:"updatedAt"`
	} `json:"auditMetadata"`
}

// errShape marks a feed page whose elements have a shape this client does
// not know (bare ids, objects with neither a document nor a time entry's
// fields, an envelope without response): the feed changed, and the client
// falls back to listings (see the package doc). It is in the chain of the
// decode error, whose text does not change.
var errShape = errors.New("unknown change-feed shape")

type shapeError struct{ err *httpx.Error }

func (e shapeError) Error() string   { return e.err.Error() }
func (e shapeError) Unwrap() []error { return []error{e.err, errShape} }

// decodeFeed normalizes a change-feed page. It returns the records and the
// number of changes on the page (which decides whether it was short).
func (d decoder) decodeFeed(k feedKind, page int, body []byte, fetched time.Time) ([]clients.Record, int, error) {
	return d.decodeFeedM(k, page, body, fetched, nil)
}

func (d decoder) decodeFeedM(k feedKind, page int, body []byte, fetched time.Time, ms *misses) ([]clients.Record, int, error) {
	const r = clients.TimeEntries
	elems, err := d.elements(r, page, body, true)
	if err != nil {
		var he *httpx.Error
		if errors.As(err, &he) && (strings.HasPrefix(he.What, "want an object") || he.Field == "response") {
			return nil, 0, shapeError{he}
		}
		return nil, 0, err
	}
	recs := make([]clients.Record, len(elems))
	for i, raw := range elems {
		if fe, unknown := fillChange(k, raw, &recs[i], fetched, d.refs, ms); fe != nil {
			he := d.Elem(r, page, i, fe, raw)
			if unknown {
				return nil, 0, shapeError{he}
			}
			return nil, 0, he
		}
	}
	return recs, len(elems), nil
}

// fillChange normalizes one feed element, of either shape (package doc):
// the documented change document {id, <stamp>, document:{entry}}, or what
// the live feed serves, the entry itself plus documentCode and
// auditMetadata.{createdAt,updatedAt}; a deletion {deletedAt,
// document:{_id|id,…}, id}. unknown says the element is neither.
func fillChange(k feedKind, raw []byte, rec *clients.Record, fetched time.Time, rf *refs, ms *misses) (fe *decode.FieldError, unknown bool) {
	var j changeJSON
	if fe := decode.Unmarshal(raw, &j); fe != nil {
		return fe, false
	}
	doc := bytes.TrimSpace(j.Document)
	hasDoc := len(doc) > 0 && doc[0] == '{'
	if len(doc) > 0 && !hasDoc && string(doc) != "null" {
		return decode.Field("document", "want an object, got "+decode.KindOf(doc)), true
	}
	// The live shape: the entity itself, stamped by auditMetadata.
	entity := !hasDoc && k != feedDeleted && len(j.TimeInterval) > 0
	created, updated := j.CreatedAt, j.UpdatedAt
	cField, uField := "createdAt", "updatedAt"
	if entity || (j.AuditMetadata != nil && created == nil && updated == nil) {
		cField, uField = "auditMetadata.createdAt", "auditMetadata.updatedAt"
		created, updated = nil, nil
		if j.AuditMetadata != nil {
			created, updated = j.AuditMetadata.CreatedAt, j.AuditMetadata.UpdatedAt
		}
	}
	var at time.Time
	switch k {
	case feedCreated:
		at, fe = reqTime(created, cField)
	case feedUpdated:
		at, fe = reqTime(updated, uField)
	default:
		at, fe = reqTime(j.DeletedAt, "deletedAt")
	}
	if fe != nil {
		return fe, false
	}
	// A created entry may have been updated since (inside the window, so
	// /updated leaves it out): its document is the later state, and its
	// version must be that state's stamp, not the creation's.
	if k == feedCreated && updated != nil {
		up, fe := reqTime(updated, uField)
		if fe != nil {
			return fe, false
		}
		if up.After(at) {
			at = up
		}
	}
	rec.Version, rec.FetchedAt = at, fetched
	if k == feedDeleted {
		// A tombstone: the whole change document is kept as Raw. The
		// entity's id is document.id, or document._id (the live feed);
		// the element's own id is the change's, used only without a
		// document.
		rec.Raw = raw
		rec.DeletedAt = &at
		var id *string
		field := "document.id"
		if hasDoc {
			var dj struct {
				ID    *string `json:"id"`
				MID   *string `json:"_id"`
				Inner *struct {
					ID *string `json:"id"`
				} `json:"document"`
			}
			if fe := decode.Unmarshal(doc, &dj); fe != nil {
				return decode.Under("document", fe), false
			}
			id = dj.ID
			if id == nil && dj.MID != nil {
				id, field = dj.MID, "document._id"
			}
		}
		if id == nil {
			id, field = j.ID, "id"
		}
		rec.ID, fe = reqID(id, field)
		return fe, false
	}
	if entity {
		rec.Raw = raw
		return fillEntry(raw, rec, rf, ms), false
	}
	if !hasDoc {
		return decode.Field("document", "missing: a "+string(k)+" change must carry the time entry"), true
	}
	rec.Raw = doc
	if fe := fillEntry(doc, rec, rf, ms); fe != nil {
		return decode.Under("document", fe), false
	}
	if j.ID != nil && *j.ID != rec.ID {
		return decode.Field("id", fmt.Sprintf("%q differs from document.id %q", *j.ID, rec.ID)), false
	}
	return nil, false
}

type entryJSON struct {
	ID        *string `json:"id"`
	UserID    *string `json:"userId"`
	ProjectID *string `json:"projectId"`
	TaskID    *string `json:"taskId"`
	ClientID  *string `json:"clientId"`
	// Hydrated entries (and webhook bodies) embed the project, the user
	// and the tags.
	Project *struct {
		ClientID *string `json:"clientId"`
	} `json:"project"`
	User *struct {
		Settings *struct {
			TimeZone string `json:"timeZone"`
		} `json:"settings"`
	} `json:"user"`
	Tags []struct {
		Name *string `json:"name"`
	} `json:"tags"`
	TagIDs       []string `json:"tagIds"`
	Description  *string  `json:"description"`
	Billable     bool     `json:"billable"`
	IsLocked     bool     `json:"isLocked"`
	TimeInterval *struct {
		Start    *string         `json:"start"`
		End      *string         `json:"end"`
		Duration json.RawMessage `json:"duration"`
		TimeZone string          `json:"timeZone"`
	} `json:"timeInterval"`
}

// fillEntry normalizes one time entry (see the package doc for the day,
// the zone, the client and the tags). hours come from
// timeInterval.duration, ISO 8601 text or a number of seconds (or end −
// start when it is null on a stopped entry); a running entry (end null)
// has hours 0, is_running and no ended_at. rf and ms may be nil.
func fillEntry(raw []byte, rec *clients.Record, rf *refs, ms *misses) *decode.FieldError {
	var j entryJSON
	if fe := decode.Unmarshal(raw, &j); fe != nil {
		return fe
	}
	ids := decode.IDs[*string]{Req: reqID, Opt: optID}
	rec.ID = ids.Need(j.ID, "id")
	user := ids.Need(j.UserID, "userId")
	project, task, client := ids.May(j.ProjectID, "projectId"), ids.May(j.TaskID, "taskId"), ids.May(j.ClientID, "clientId")
	if ids.Err != nil {
		return ids.Err
	}
	var fe *decode.FieldError
	// What the row takes from other records (the project's client, the
	// user's zone) is hashed with the raw (Record.Derived): when it
	// changes, the row is rewritten though the entry did not change.
	var derived []byte
	if client == "" {
		switch {
		case j.Project != nil && j.Project.ClientID != nil:
			if client, fe = optID(j.Project.ClientID, "project.clientId"); fe != nil {
				return fe
			}
		case project != "":
			var ok bool
			if client, ok = rf.clients.get(project); !ok {
				ms.project(project)
			}
			derived = append(derived, "client_id="+client...)
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
	var ended any
	switch {
	case ti.End == nil:
		hoursText = "0"
	case len(ti.Duration) > 0 && string(ti.Duration) != "null":
		ns, err := durationOf(ti.Duration)
		if err != nil {
			return decode.Field("timeInterval.duration", err.Error())
		}
		hoursText = hoursOf(ns)
		end, fe := reqTime(ti.End, "timeInterval.end")
		if fe != nil {
			return fe
		}
		ended = end
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
		ended = end
	}
	// The day: in the entry's own zone, else its user's, else UTC.
	var userZone string
	if j.User != nil && j.User.Settings != nil && j.User.Settings.TimeZone != "" {
		userZone = j.User.Settings.TimeZone
	} else if z, ok := rf.zones.get(user); ok {
		userZone = z
		derived = append(derived, "\nuser_zone="+z...)
	} else if ti.TimeZone == "" || loadZone(ti.TimeZone) == nil {
		ms.user(user)
	}
	rec.Derived = derived
	y, m, d, zone := DateIn(start, ti.TimeZone, userZone)
	row := make([]any, schema.TimeEntries.Width())
	row[schema.TE.SpentDate], row[schema.TE.Hours] = clients.Date{Year: y, Month: m, Day: d}, clients.Decimal(hoursText)
	row[schema.TE.Started], row[schema.TE.Ended], row[schema.TE.Zone], row[schema.TE.Tags] = start, ended, zone, tagsOf(&j)
	if j.Description != nil {
		row[schema.TE.Notes] = *j.Description
	}
	// Clockify has no approval, billing or invoice state on an entry.
	row[schema.TE.User], row[schema.TE.Project], row[schema.TE.Task], row[schema.TE.Client], row[schema.TE.Invoice] = user, project, schema.OrNull(task), schema.OrNull(client), nil
	row[schema.TE.Billable], row[schema.TE.Locked], row[schema.TE.Running], row[schema.TE.Closed], row[schema.TE.Billed] = j.Billable, j.IsLocked, ti.End == nil, false, false
	row[schema.TE.Approval], row[schema.TE.ExtRef] = nil, nil
	rec.Row = row
	return nil
}

// tagsOf is the tags column: the names when the body carries tag objects
// with names (hydrated entries, webhooks), else the tagIds, else null.
func tagsOf(j *entryJSON) any {
	var list []string
	switch {
	case len(j.Tags) > 0 && j.Tags[0].Name != nil:
		for _, t := range j.Tags {
			if t.Name != nil {
				list = append(list, *t.Name)
			}
		}
	case j.TagIDs != nil:
		list = j.TagIDs
	case j.Tags != nil:
		list = []string{}
	default:
		return nil
	}
	if list == nil {
		list = []string{}
	}
	b, _ := json.Marshal(list)
	return json.RawMessage(b)
}

// durationOf reads timeInterval.duration: ISO 8601 text ("PT3H") or a
// number of seconds (4, 5400.5), as nanoseconds.
func durationOf(v json.RawMessage) (int64, error) {
	if v[0] == '"' {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return 0, fmt.Errorf("want an ISO 8601 duration like PT8H30M or seconds, got %s", v)
		}
		return parseDuration(s)
	}
	var n json.Number
	if err := json.Unmarshal(v, &n); err != nil {
		return 0, fmt.Errorf("want an ISO 8601 duration like PT8H30M or a number of seconds, got %s", decode.KindOf(v))
	}
	secs, err := strconv.ParseFloat(n.String(), 64)
	if err != nil || secs < 0 || secs > maxSeconds {
		return 0, fmt.Errorf("want a number of seconds in 0..%d, got %s", int64(maxSeconds), n)
	}
	// Whole seconds exactly; a fraction to the nanosecond.
	if i, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
		return i * 1_000_000_000, nil
	}
	return int64(secs*1e9 + 0.5), nil
}

type projectJSON struct {
	ID       *string `json:"id"`
	Name     string  `json:"name"`
	ClientID *string `json:"clientId"`
	Archived bool    `json:"archived"`
	Billable bool    `json:"billable"`
}

func (j *projectJSON) values() (*string, schema.Values, *decode.FieldError) {
	client, fe := optID(j.ClientID, "clientId")
	return j.ID, schema.Values{"name": j.Name, "client_id": client, "is_active": !j.Archived, "is_billable": j.Billable}, fe
}

type clientJSON struct {
	ID           *string `json:"id"`
	Name         string  `json:"name"`
	CurrencyCode *string `json:"currencyCode"`
	Archived     bool    `json:"archived"`
}

func (j *clientJSON) values() (*string, schema.Values, *decode.FieldError) {
	return j.ID, schema.Values{"name": j.Name, "currency": orNil(j.CurrencyCode), "is_active": !j.Archived}, nil
}

// orNil is *p, or nil (NULL) when the key was left out.
func orNil(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

type userJSON struct {
	ID       *string `json:"id"`
	Name     string  `json:"name"`
	Email    *string `json:"email"`
	Status   string  `json:"status"`
	Settings *struct {
		TimeZone string `json:"timeZone"`
	} `json:"settings"`
}

// zone is the user's settings.timeZone ("" when none).
func (j *userJSON) zone() string {
	if j.Settings == nil {
		return ""
	}
	return j.Settings.TimeZone
}

// values puts Clockify's single name into first_name: splitting a name
// into first and last is not something to guess.
func (j *userJSON) values() (*string, schema.Values, *decode.FieldError) {
	return j.ID, schema.Values{"first_name": j.Name, "email": orNil(j.Email), "is_active": j.Status == "ACTIVE"}, nil
}

type taskJSON struct {
	ID     *string `json:"id"`
	Name   string  `json:"name"`
	Status string  `json:"status"`
}

func (j *taskJSON) values() (*string, schema.Values, *decode.FieldError) {
	return j.ID, schema.Values{"name": j.Name, "is_active": j.Status == "ACTIVE"}, nil
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
