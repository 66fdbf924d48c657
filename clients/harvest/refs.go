package harvest

import (
	"fmt"
	"strings"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
)

// refFields holds the fields of projects, clients, users and tasks as read
// from the body ("" when absent or null).
type refFields struct {
	id, updatedAt                                    string
	name, code, currency, firstName, lastName, email string
	client                                           string // project's client id
	isActive, isBillable                             bool
}

// refKeys lists the keys each resource reads; others are skipped, as
// encoding/json skips keys its struct does not name.
var refKeysOf = map[clients.Resource][]string{
	clients.Projects: {"id", "updated_at", "name", "code", "client", "is_active", "is_billable"},
	clients.Clients:  {"id", "updated_at", "name", "currency", "is_active"},
	clients.Users:    {"id", "updated_at", "first_name", "last_name", "email", "is_active"},
	clients.Tasks:    {"id", "updated_at", "name", "is_active"},
}

func (f *refFields) read(s *scanner, text string, keys []string) *fieldErr {
	switch k := s.peek(); k {
	case kNull:
		_, _, _ = s.literal()
		return nil
	case kObject:
	default:
		return &fieldErr{"", "want an object, got " + k.String()}
	}
	var fe *fieldErr
	var set bool // presence of a nullable text; null leaves ""
	err := s.object(func(key []byte) error {
		switch canon(key, keys) {
		case "id":
			fe = s.num(text, &f.id, "id")
		case "updated_at":
			fe = s.strField(text, &f.updatedAt, "updated_at")
		case "name":
			fe = s.strField(text, &f.name, "name")
		case "first_name":
			fe = s.strField(text, &f.firstName, "first_name")
		case "last_name":
			fe = s.strField(text, &f.lastName, "last_name")
		case "code":
			fe = s.optStr(text, &f.code, &set, "code")
		case "currency":
			fe = s.optStr(text, &f.currency, &set, "currency")
		case "email":
			fe = s.optStr(text, &f.email, &set, "email")
		case "client":
			fe = s.ref(text, &f.client, "client", "client.id")
		case "is_active":
			fe = s.boolean(&f.isActive, "is_active")
		case "is_billable":
			fe = s.boolean(&f.isBillable, "is_billable")
		default:
			return s.skip()
		}
		if fe != nil {
			return errStop
		}
		return nil
	})
	switch {
	case fe != nil:
		return fe
	case err != nil:
		return syntaxFE
	}
	return nil
}

// fill checks id and version, as for every resource.
func (f *refFields) fill(rec *clients.Record) *fieldErr {
	s, ok := id(f.id)
	if !ok {
		if f.id == "" {
			return &fieldErr{"id", "missing"}
		}
		return &fieldErr{"id", fmt.Sprintf("want an integer id, got %q", f.id)}
	}
	rec.ID = strings.Clone(s)
	if f.updatedAt == "" {
		return &fieldErr{"updated_at", "missing"}
	}
	v, ok := parseStamp(f.updatedAt)
	if !ok {
		return &fieldErr{"updated_at", fmt.Sprintf("want RFC 3339, got %q", f.updatedAt)}
	}
	rec.Version = v
	return nil
}

// refSink decodes the records of one of the small resources during the
// envelope scan, like entrySink.
type refSink[T any] struct {
	keys    []string
	body    []byte
	text    string
	fetched time.Time
	recs    []clients.Record
	typed   []T
	set     func(*refFields, *T) *fieldErr
	link    func(*clients.Record, *T)
	err     *fieldErr
	errAt   int
}

func newRefSink[T any](r clients.Resource, body []byte, fetched time.Time, set func(*refFields, *T) *fieldErr, link func(*clients.Record, *T)) *refSink[T] {
	return &refSink[T]{keys: refKeysOf[r], body: body, text: string(body), fetched: fetched, set: set, link: link}
}

func (k *refSink[T]) reset() { k.recs, k.typed, k.err = k.recs[:0], k.typed[:0], nil }

func (k *refSink[T]) elem(s *scanner, i, lo int) bool {
	if k.err != nil {
		return false
	}
	var f refFields
	if fe := f.read(s, k.text, k.keys); fe != nil {
		k.err, k.errAt = fe, i
		return false
	}
	k.recs = append(k.recs, clients.Record{Raw: k.body[lo:s.i:s.i], FetchedAt: k.fetched})
	var zero T
	k.typed = append(k.typed, zero)
	fe := f.fill(&k.recs[i])
	if fe == nil {
		fe = k.set(&f, &k.typed[i])
	}
	if fe != nil {
		k.err, k.errAt = fe, i
	}
	return true
}

func (k *refSink[T]) failed() (*fieldErr, int) { return k.err, k.errAt }

func (k *refSink[T]) records() []clients.Record {
	for i := range k.recs {
		k.link(&k.recs[i], &k.typed[i])
	}
	return k.recs
}

func setProject(f *refFields, p *clients.Project) *fieldErr {
	var fe *fieldErr
	if p.ClientID, fe = optRef(f.client, "client.id"); fe != nil {
		return fe
	}
	p.Name, p.Code, p.IsActive, p.IsBillable = f.name, f.code, f.isActive, f.isBillable
	return nil
}

func setClient(f *refFields, c *clients.Client) *fieldErr {
	c.Name, c.Currency, c.IsActive = f.name, f.currency, f.isActive
	return nil
}

func setUser(f *refFields, u *clients.User) *fieldErr {
	u.FirstName, u.LastName, u.Email, u.IsActive = f.firstName, f.lastName, f.email, f.isActive
	return nil
}

func setTask(f *refFields, t *clients.Task) *fieldErr {
	t.Name, t.IsActive = f.name, f.isActive
	return nil
}

// pageSink is an elemSink that also hands over its records or its error.
type pageSink interface {
	elemSink
	failed() (*fieldErr, int)
	records() []clients.Record
}

func (k *entrySink) failed() (*fieldErr, int) { return k.err, k.errAt }

// sinkFor returns the decoder of r's records, nil for an unknown resource.
func sinkFor(r clients.Resource, body []byte, fetched time.Time) pageSink {
	switch r {
	case clients.TimeEntries:
		return newEntrySink(body, fetched)
	case clients.Projects:
		return newRefSink(r, body, fetched, setProject, func(rec *clients.Record, p *clients.Project) { rec.Project = p })
	case clients.Clients:
		return newRefSink(r, body, fetched, setClient, func(rec *clients.Record, c *clients.Client) { rec.Client = c })
	case clients.Users:
		return newRefSink(r, body, fetched, setUser, func(rec *clients.Record, u *clients.User) { rec.User = u })
	case clients.Tasks:
		return newRefSink(r, body, fetched, setTask, func(rec *clients.Record, t *clients.Task) { rec.Task = t })
	}
	return nil
}
