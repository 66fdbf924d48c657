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
	recs, env, err := d.decodeListing(r, page, body, fetched)
	return recs, env.next, err
}

// decodeListing is decodePage that also returns the envelope's counts.
func (d decoder) decodeListing(r clients.Resource, page int, body []byte, fetched time.Time) ([]clients.Record, envelope, error) {
	var none envelope
	sink := sinkFor(r, body, fetched)
	var es elemSink
	if sink != nil {
		es = sink
	}
	env, err := scanEnvelope(body, r, es)
	if err != nil {
		return nil, none, d.syntaxError(r, page, body)
	}
	if env.typeErr != nil {
		return nil, none, d.errf(string(r), page, cmpStr(env.typeErr.field, "(page)"), env.typeErr.what, body)
	}
	if !env.found {
		return nil, none, d.errf(string(r), page, string(r), "missing: want an array of records", body)
	}
	if !env.links {
		return nil, none, d.errf(string(r), page, "links", "missing", body)
	}
	if sink == nil { // not reached: an unknown resource has no array
		return nil, none, fmt.Errorf("%s: resource %s: %w", d.source, r, clients.ErrUnsupported)
	}
	if fe, i := sink.failed(); fe != nil {
		sp := env.elems[i]
		return nil, none, d.recordErr(r, page, i, fe, body[sp.lo:sp.hi])
	}
	env.elems = nil
	return sink.records(), env, nil
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
