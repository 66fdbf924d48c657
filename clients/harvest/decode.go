package harvest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/provider/decode"
)

// decoder normalizes pages of one source.
type decoder struct{ decode.Errors }

func newDecoder(source string, hc *httpx.Client) decoder {
	return decoder{decode.NewErrors(source, hc)}
}

// decodePage parses one list response into normalized records and the next
// link ("" when the listing is complete). Records' Raw are slices of body.
func (d decoder) decodePage(r clients.Resource, page int, body []byte, fetched time.Time) ([]clients.Record, string, error) {
	recs, env, err := d.decodeListing(r, page, body, fetched)
	return recs, env.next, err
}

// decodeListing is decodePage that also returns the envelope's counts.
func (d decoder) decodeListing(r clients.Resource, page int, body []byte, fetched time.Time) ([]clients.Record, envelope, error) {
	return d.decodeUnder(r, "", page, body, fetched)
}

// decodeUnder is decodeListing for a listing nested under the parent
// record parent ("" for a top-level listing).
func (d decoder) decodeUnder(r clients.Resource, parent string, page int, body []byte, fetched time.Time) ([]clients.Record, envelope, error) {
	var none envelope
	sink := sinkFor(r, parent, body, fetched)
	var es elemSink
	if sink != nil {
		es = sink
	}
	env, err := scanEnvelope(body, r, es)
	if err != nil {
		return nil, none, d.syntaxError(r, page, body)
	}
	if env.typeErr != nil {
		return nil, none, d.Page(r, page, env.typeErr.Field, env.typeErr.What, body)
	}
	if !env.found {
		return nil, none, d.Errf(string(r), page, string(r), "missing: want an array of records", body)
	}
	if !env.links {
		return nil, none, d.Errf(string(r), page, "links", "missing", body)
	}
	if sink == nil { // not reached: an unknown resource has no array
		return nil, none, fmt.Errorf("%s: resource %s: %w", d.Source, r, clients.ErrUnsupported)
	}
	if fe, i := sink.failed(); fe != nil {
		sp := env.elems[i]
		return nil, none, d.Elem(r, page, i, fe, body[sp.lo:sp.hi])
	}
	env.elems = nil
	return sink.records(), env, nil
}

// syntaxError reports a body that is not JSON in encoding/json's words. A
// body that ends before its top-level value closes did not arrive whole:
// the error wraps httpx.ErrBodyCutShort, so that the request is retried
// (httpx.Request.Decode) rather than failed as bad input.
func (d decoder) syntaxError(r clients.Resource, page int, body []byte) error {
	var v json.RawMessage
	field, what := "", "not JSON"
	err := json.Unmarshal(body, &v)
	if err != nil {
		field, what = decode.Describe(err)
	}
	perr := d.Page(r, page, field, what, body)
	var se *json.SyntaxError
	if errors.As(err, &se) && se.Error() == "unexpected end of JSON input" {
		return cutShort{perr}
	}
	return perr
}

// cutShort is a decode error that also says the body did not arrive whole.
type cutShort struct{ error }

func (c cutShort) Is(target error) bool { return target == httpx.ErrBodyCutShort }
func (c cutShort) Unwrap() error        { return c.error }

// id validates a Harvest integer id and returns it as decimal text.
func id(s string) (string, bool) {
	return s, decode.Digits(s)
}

// optRef returns the id of a nullable {"id":…} object, "" when null.
func optRef(ref, field string) (string, *decode.FieldError) {
	if ref == "" {
		return "", nil
	}
	s, ok := id(ref)
	if !ok {
		return "", decode.Field(field, fmt.Sprintf("want an integer id, got %q", ref))
	}
	return s, nil
}

func reqRef(ref, field string) (string, *decode.FieldError) {
	if ref == "" {
		return "", decode.Missing(field)
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

// decodeOne reads a response that is one record, not a list (the company).
func (d decoder) decodeOne(r clients.Resource, body []byte, fetched time.Time) ([]clients.Record, error) {
	dr, ok := declaredReaders[r]
	if !ok {
		return nil, fmt.Errorf("%s: resource %s: %w", d.Source, r, clients.ErrUnsupported)
	}
	if !json.Valid(body) {
		return nil, d.syntaxError(r, 1, body)
	}
	s := scanner{b: body}
	if k := s.peek(); k != kObject {
		return nil, d.Page(r, 1, "", "want an object, got "+k.String(), body)
	}
	rec := clients.Record{Raw: body, FetchedAt: fetched}
	row := make([]any, dr.table.Width())
	if fe := dr.readRecord(&s, string(body), &rec, row, ""); fe != nil {
		return nil, d.Page(r, 1, fe.Field, fe.What, body)
	}
	rec.Row = row
	return []clients.Record{rec}, nil
}
