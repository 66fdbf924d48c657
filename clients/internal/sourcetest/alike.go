package sourcetest

// What every provider reports alike, checked the same way for each.

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
)

// Malformed is a page the fake kit breaks (M), and the field and the words
// its decode error must then say.
type Malformed struct {
	M           fakeapi.Malformation
	Field, What string
}

// EachMalformation runs f in a parallel subtest per malformation of a
// listing's page that every provider reports alike: a body that is not
// JSON, an HTML page, and a first record without its version or with one
// of the wrong type, which name version (the version field's path, e.g.
// time_entries[0].updated_at).
func EachMalformation(t *testing.T, version string, f func(t *testing.T, m Malformed)) {
	for _, m := range []Malformed{
		{fakeapi.BadJSON, "(page)", "not JSON"},
		{fakeapi.HTMLPage, "(page)", "body: <!DOCTYPE html>"},
		{fakeapi.MissingVersion, version, "missing"},
		{fakeapi.WrongType, version, "want string, got number"},
	} {
		t.Run(m.M.String(), func(t *testing.T) {
			t.Parallel()
			f(t, m)
		})
	}
}

// Refusal is a change to valid Params that New must refuse, with the
// config key its error must name.
type Refusal[P any] struct {
	Key    string
	Change func(*P)
}

// WantValidation holds a provider's Params validation: newFn accepts ok,
// and refuses ok after each refusal's change with an error naming its key.
// Besides the provider's own refusals, every provider refuses an empty
// name or token, a base_url that is not HTTP and a resource it does not
// serve (its Params fields Name, Token, BaseURL and Resources). It returns
// the client built from ok.
func WantValidation[P, C any](t *testing.T, newFn func(P) (C, error), ok P, refusals []Refusal[P]) C {
	t.Helper()
	common := []Refusal[P]{
		{"name", setField[P]("Name", "")},
		{"token", setField[P]("Token", "")},
		{"base_url", setField[P]("BaseURL", "ftp://x")},
		{"resources", setField[P]("Resources", []clients.Resource{"invoice"})},
	}
	for _, r := range append(common, refusals...) {
		p := ok
		r.Change(&p)
		if _, err := newFn(p); err == nil || !strings.Contains(err.Error(), r.Key) {
			t.Errorf("want error naming %s, got %v", r.Key, err)
		}
	}
	c, err := newFn(ok)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// setField is a change that sets the field of P named field to v.
func setField[P any](field string, v any) func(*P) {
	return func(p *P) {
		f := reflect.ValueOf(p).Elem().FieldByName(field)
		if !f.IsValid() {
			panic(fmt.Sprintf("sourcetest: %T has no field %s", *p, field))
		}
		f.Set(reflect.ValueOf(v))
	}
}
