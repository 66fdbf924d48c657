package upsert

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

var canonicalCases = []struct {
	name string
	a, b string
	same bool
}{
	{"key order", `{"a":1,"b":2}`, `{"b":2,"a":1}`, true},
	{"whitespace", "{ \"a\" : [1, 2],\n\t\"b\":{} }", `{"a":[1,2],"b":{}}`, true},
	{"nested key order", `{"user":{"name":"Kim","id":1},"id":7}`, `{"id":7,"user":{"id":1,"name":"Kim"}}`, true},
	{"objects in arrays", `[{"b":1,"a":2},{"d":3,"c":4}]`, `[{"a":2,"b":1},{"c":4,"d":3}]`, true},
	{"duplicate key: last wins, as in jsonb", `{"a":1,"a":2}`, `{"a":2}`, true},
	{"escaped key sorts by its text", `{"b":1,"\u0061":2}`, `{"\u0061":2,"b":1}`, true},
	{"different value", `{"a":1}`, `{"a":2}`, false},
	{"numbers as given", `{"a":1.0}`, `{"a":1}`, false},
	{"strings as given", `{"a":"\u00e9"}`, `{"a":"é"}`, false},
	{"array order matters", `[1,2]`, `[2,1]`, false},
	{"null is not absent", `{"a":null}`, `{}`, false},
	{"different key", `{"a":1}`, `{"b":1}`, false},
}

func TestContentHash(t *testing.T) {
	t.Parallel()
	for _, tc := range canonicalCases {
		ha, err := ContentHash([]byte(tc.a))
		if err != nil {
			t.Fatalf("%s: %s: %v", tc.name, tc.a, err)
		}
		hb, err := ContentHash([]byte(tc.b))
		if err != nil {
			t.Fatalf("%s: %s: %v", tc.name, tc.b, err)
		}
		if (ha == hb) != tc.same {
			ca, _ := canonical([]byte(tc.a))
			cb, _ := canonical([]byte(tc.b))
			t.Errorf("%s: same hash = %v, want %v (canonical %s vs %s)", tc.name, ha == hb, tc.same, ca, cb)
		}
	}
	got, err := canonical([]byte(" {\"z\": [ true, false, null ], \"a\" : {\"y\":\"x\", \"b\": -1.5e3}} "))
	if want := `{"a":{"b":-1.5e3,"y":"x"},"z":[true,false,null]}`; err != nil || string(got) != want {
		t.Errorf("canonical = %s, %v; want %s", got, err, want)
	}
}

var invalidJSON = []string{
	``, `{`, `{"a":}`, `{"a" 1}`, `{a:1}`, `[1,]`, `[1 2]`, `{"a":1} x`, `{"a":1}{}`, "\"\xff\"",
	`nul`, `tru`, `01`, `1.`, `.5`, `1e`, `-`, "\"a\nb\"", `"\x"`, `"\u12"`, `{"a":1,}`, `"abc`,
}

func TestContentHashRefusesInvalidJSON(t *testing.T) {
	t.Parallel()
	for _, s := range invalidJSON {
		if _, err := ContentHash([]byte(s)); err == nil {
			t.Errorf("ContentHash(%q) = nil error, want invalid JSON", s)
		}
	}
	deep := bytes.Repeat([]byte("["), maxDepth+1)
	if _, err := ContentHash(deep); err == nil {
		t.Error("nesting beyond maxDepth accepted")
	}
}

// FuzzContentHash: never panics; anything accepted is valid JSON with the
// same meaning; the canonical form is a fixed point.
func FuzzContentHash(f *testing.F) {
	for _, tc := range canonicalCases {
		f.Add([]byte(tc.a))
		f.Add([]byte(tc.b))
	}
	for _, s := range invalidJSON {
		f.Add([]byte(s))
	}
	f.Add(harvestJSON(1, t0, "notes \"quoted\" é", "1.25"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c1, err := canonical(raw)
		if err != nil {
			return
		}
		if !json.Valid(raw) || !json.Valid(c1) {
			t.Fatalf("accepted invalid JSON %q (canonical %q)", raw, c1)
		}
		c2, err := canonical(c1)
		if err != nil || !bytes.Equal(c1, c2) {
			t.Fatalf("canonical form not idempotent: %q -> %q -> %q (%v)", raw, c1, c2, err)
		}
		var v1, v2 any
		d1 := json.NewDecoder(bytes.NewReader(raw))
		d1.UseNumber()
		d2 := json.NewDecoder(bytes.NewReader(c1))
		d2.UseNumber()
		if d1.Decode(&v1) == nil && d2.Decode(&v2) == nil && !reflect.DeepEqual(v1, v2) {
			t.Fatalf("canonical form changed the content: %q -> %q", raw, c1)
		}
		h1, _ := ContentHash(raw)
		h2, _ := ContentHash(c1)
		if h1 != h2 {
			t.Fatalf("hash differs between %q and its canonical form", raw)
		}
	})
}

func BenchmarkContentHash(b *testing.B) {
	raw := harvestJSON(1, t0, "Worked on the thing", "1.25")
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := ContentHash(raw); err != nil {
			b.Fatal(err)
		}
	}
}
