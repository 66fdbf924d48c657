package httpx

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestCompleteJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{``, false},
		{" \n\t", false},
		{`{`, false},
		{`[`, false},
		{`{}`, true},
		{" [] \n", true},
		{`{"a":"}"`, false},
		{`{"a":"}"}`, true},
		{`{"a":"\"}`, false},
		{`{"a":"\"}"}`, true},
		{`{"a":"\\"}`, true},
		{`{"a":"\\\"}`, false},
		{`{"a":"\\\\"}`, true},
		{`{"a":"x\`, false},
		{`{"a":[1,2,{"b":null}]`, false},
		{`{"a":[1,2,{"b":null}]}`, true},
		{`"abc`, false},
		{`"abc"`, true},
		{`"a\"`, false},
		// Complete but malformed: nothing is missing.
		{`{"a":}`, true},
		{`{]`, true},
		{`{"a":1} trailing`, true},
		{`<html></html>`, true},
		{`12`, true},
		{`nul`, true},
	} {
		if got := completeJSON([]byte(tc.in)); got != tc.want {
			t.Errorf("completeJSON(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func FuzzCompleteJSON(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, ` {"a":1} `, `[1,"x",null,true,{"b":[]}]`, `"s"`, `12`, `{"a":"\\\""}`,
		`{"a":"}]\"["}`, `[[[[]]]]`, `{"k":"\u00e9 \\ \/"}`, `{"a":}`, `{`, `[1,`, "\t[\n]\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Add(harvestPage(1))
	f.Fuzz(func(t *testing.T, b []byte) {
		complete := completeJSON(b) // must not panic on anything
		if !json.Valid(b) {
			return
		}
		if !complete {
			t.Fatalf("valid JSON %q reported incomplete", b)
		}
		doc := bytes.Trim(b, " \t\r\n")
		if doc[0] != '{' && doc[0] != '[' {
			return // a prefix of a scalar may itself be valid (12 of 123)
		}
		// Every prefix that stops before the top-level value closes.
		end := len(bytes.TrimRight(b, " \t\r\n"))
		for i := 1; i < end; i++ {
			p := b[:i]
			if len(bytes.Trim(p, " \t\r\n")) == 0 {
				continue
			}
			if completeJSON(p) {
				t.Fatalf("prefix %q of %q reported complete", p, b)
			}
		}
	})
}

// harvestPage renders a Harvest-like time entry page of n entries.
func harvestPage(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"time_entries":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"spent_date":"2026-02-%02d","hours":%d.25,"hours_without_timer":%d.25,"rounded_hours":%d.5,`+
			`"notes":"Sprint %d: review of \"billing\" flow, fixed {edge} case [PR #%d]\nfollow-up with C:\\ path","is_locked":false,"locked_reason":null,`+
			`"is_closed":false,"is_billed":%t,"timer_started_at":null,"started_time":"9:%02dam","ended_time":"11:%02dam","is_running":false,`+
			`"billable":true,"budgeted":true,"billable_rate":150.0,"cost_rate":80.0,"created_at":"2026-02-%02dT09:%02d:11Z","updated_at":"2026-03-01T10:%02d:42Z",`+
			`"user":{"id":%d,"name":"Jane Doe"},"client":{"id":%d,"name":"Acme \u00e9 Co","currency":"EUR"},`+
			`"project":{"id":%d,"name":"Website Redesign","code":"WR-%d"},"task":{"id":%d,"name":"Development"},`+
			`"user_assignment":{"id":%d,"is_project_manager":false,"is_active":true,"budget":null,"created_at":"2025-01-05T10:00:00Z","updated_at":"2025-06-05T10:00:00Z","hourly_rate":150.0},`+
			`"task_assignment":{"id":%d,"billable":true,"is_active":true,"created_at":"2025-01-05T10:00:00Z","updated_at":"2025-06-05T10:00:00Z","hourly_rate":150.0,"budget":null},`+
			`"invoice":null,"external_reference":null}`,
			4_000_000+i, 1+i%28, i%8, i%8, i%8, i%40, 1000+i, i%3 == 0, i%60, i%60, 1+i%28, i%60, i%60,
			100+i%20, 500+i%50, 9000+i%30, i%30, 700+i%12, 80_000+i, 90_000+i)
	}
	b.WriteString(`],"per_page":2000,"total_pages":1,"total_entries":`)
	fmt.Fprintf(&b, "%d", n)
	b.WriteString(`,"next_page":null,"previous_page":null,"page":1,"links":{"first":"https://api.harvestapp.com/v2/time_entries?page=1&per_page=2000","next":null,"previous":null,"last":"https://api.harvestapp.com/v2/time_entries?page=1&per_page=2000"}}`)
	return []byte(b.String())
}

// benchPage is about 2 MB, built on first use.
var benchPage = sync.OnceValue(func() []byte {
	n := 1
	for len(harvestPage(n)) < 2<<20 {
		n *= 2
	}
	lo, hi := n/2, n
	for lo < hi {
		m := (lo + hi) / 2
		if len(harvestPage(m)) < 2<<20 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return harvestPage(lo)
})

func BenchmarkCompleteJSON(b *testing.B) {
	benchPage := benchPage()
	if !json.Valid(benchPage) || !completeJSON(benchPage) {
		b.Fatal("bench page is not whole JSON")
	}
	b.SetBytes(int64(len(benchPage)))
	for b.Loop() {
		if !completeJSON(benchPage) {
			b.Fatal("incomplete")
		}
	}
}

// BenchmarkJSONValid is the yardstick completeJSON is meant to beat.
func BenchmarkJSONValid(b *testing.B) {
	benchPage := benchPage()
	b.SetBytes(int64(len(benchPage)))
	for b.Loop() {
		if !json.Valid(benchPage) {
			b.Fatal("invalid")
		}
	}
}
