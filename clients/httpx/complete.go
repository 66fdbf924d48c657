package httpx

import (
	"bytes"
	"mime"
	"net/http"
	"strings"
)

// A 2xx body can reach us short while HTTP sees nothing wrong: a server or
// proxy that writes only a prefix sends a Content-Length (or a closing
// chunk, or a close) that matches the prefix. Such a body is a transport
// fault to retry, not a malformed page; telling the two apart needs only
// whether the top-level JSON value ever closes, which one pass over the
// bytes answers, far cheaper than parsing.

// checkComplete reports whether a 2xx body must be whole JSON: it starts
// with '{' or '[' or the Content-Type says JSON. Other bodies (HTML, text,
// empty without a JSON type) are left to the provider to judge.
func checkComplete(method string, status int, h http.Header, body []byte) bool {
	if method == http.MethodHead || status == http.StatusNoContent || status == http.StatusResetContent {
		return false
	}
	if i := skipSpace(body, 0); i < len(body) && (body[i] == '{' || body[i] == '[') {
		return true
	}
	return jsonType(h.Get("Content-Type"))
}

func jsonType(ct string) bool {
	if ct == "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || mt == "text/json" || strings.HasSuffix(mt, "+json")
}

// completeJSON reports whether b holds a whole top-level JSON value, as
// opposed to a prefix of one cut before it closes. It does not validate:
// a complete but malformed body (`{"a":}`, `{]`, HTML, trailing bytes after
// the value) is "complete", because nothing is missing and retrying cannot
// help. Empty or whitespace-only input is incomplete (nothing arrived).
// Top-level numbers and literals cannot be told from their prefixes and
// count as complete.
func completeJSON(b []byte) bool {
	i := skipSpace(b, 0)
	if i == len(b) {
		return false
	}
	switch b[i] {
	case '"':
		return closeString(b, i+1) >= 0
	case '{', '[':
	default:
		return true
	}
	depth := 0
	for i < len(b) {
		switch c := b[i]; c {
		case '"':
			j := closeString(b, i+1)
			if j < 0 {
				return false
			}
			i = j
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				// The top-level value closed; whatever follows cannot
				// have been lost in transit.
				return true
			}
		}
		// Skip the bytes that cannot change the depth in one go.
		i++
		for i < len(b) && !structural[b[i]] {
			i++
		}
	}
	return false
}

// structural marks the bytes that change completeJSON's state outside a
// string.
var structural = [256]bool{'"': true, '{': true, '[': true, '}': true, ']': true}

// closeString returns the index just past the quote closing the string
// whose content starts at i, or -1 when the string does not close. A quote
// is escaped iff an odd run of backslashes precedes it.
func closeString(b []byte, i int) int {
	for {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return -1
		}
		q += i
		n := 0
		for k := q - 1; k >= i && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		i = q + 1
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
