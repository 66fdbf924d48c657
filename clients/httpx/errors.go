package httpx

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Kind classifies an Error so that callers decide by kind, not by message.
type Kind int

const (
	// KindUnauthorized: 401 or 403. The token or account id is wrong; retrying
	// does not help.
	KindUnauthorized Kind = iota + 1
	// KindNotFound: 404.
	KindNotFound
	// KindRateLimited: 429 or 402 waits could not complete (context ended or
	// the wait bound ran out).
	KindRateLimited
	// KindStatus: any other non-2xx status, after retries for 5xx.
	KindStatus
	// KindTransport: the request could not complete (connection dropped,
	// timeout, refused) after retries, or the context ended.
	KindTransport
	// KindDecode: the response arrived but its body is not what the provider
	// documents.
	KindDecode
)

func (k Kind) String() string {
	switch k {
	case KindUnauthorized:
		return "unauthorized"
	case KindNotFound:
		return "not found"
	case KindRateLimited:
		return "rate limited"
	case KindStatus:
		return "status"
	case KindTransport:
		return "transport"
	case KindDecode:
		return "decode"
	}
	return "unknown"
}

// Sentinels for errors.Is: errors.Is(err, httpx.ErrUnauthorized) holds for
// every *Error of that kind.
var (
	ErrUnauthorized = errors.New("unauthorized")
	ErrNotFound     = errors.New("not found")
	ErrRateLimited  = errors.New("rate limited")
	ErrStatus       = errors.New("unexpected HTTP status")
	ErrTransport    = errors.New("transport failure")
	ErrDecode       = errors.New("decode failure")
)

// ErrBodyCutShort is in the chain of a KindTransport error whose 2xx body
// did not arrive whole (connection dropped or reset mid-body, fewer bytes
// than announced, a JSON document that stops before it closes).
var ErrBodyCutShort = errors.New("response body cut short")

var kindSentinel = map[Kind]error{
	KindUnauthorized: ErrUnauthorized,
	KindNotFound:     ErrNotFound,
	KindRateLimited:  ErrRateLimited,
	KindStatus:       ErrStatus,
	KindTransport:    ErrTransport,
	KindDecode:       ErrDecode,
}

// SnippetLen bounds the body excerpt carried by an Error.
const SnippetLen = 200

// Error is the error every httpx call and provider decoder returns. It never
// holds a request header: secrets cannot leak through it.
type Error struct {
	Kind     Kind
	Source   string
	Resource string
	Page     int // 0 when unknown
	// Method and Path of the request (no query, no host).
	Method, Path string
	Status       int // 0 when no response
	Attempts     int
	// Field and What describe a decode failure.
	Field, What string
	// Body is a sanitized excerpt of the response body, at most SnippetLen
	// bytes, with configured secrets redacted.
	Body string
	// Err is the cause (a context error, a transport error with secrets
	// redacted from its text), or nil.
	Err error
}

func (e *Error) where() string {
	var b strings.Builder
	b.WriteString(e.Source)
	if e.Resource != "" {
		b.WriteString(" ")
		b.WriteString(e.Resource)
	}
	if e.Page > 0 {
		fmt.Fprintf(&b, " page %d", e.Page)
	}
	return b.String()
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Kind == KindDecode {
		fmt.Fprintf(&b, "decode %s: field %s: %s", e.where(), e.Field, e.What)
		if e.Body != "" {
			fmt.Fprintf(&b, "; body: %s", e.Body)
		}
		return b.String()
	}
	b.WriteString(e.where())
	b.WriteString(": ")
	if e.Method != "" {
		fmt.Fprintf(&b, "%s %s: ", e.Method, e.Path)
	}
	switch {
	case e.Status != 0:
		fmt.Fprintf(&b, "HTTP %d", e.Status)
	default:
		b.WriteString(e.Kind.String())
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " after %d attempts", e.Attempts)
	}
	switch e.Kind {
	case KindUnauthorized:
		b.WriteString(" (check the source's token and account id)")
	case KindRateLimited:
		b.WriteString(" (rate limit or quota wait did not complete)")
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if e.Body != "" {
		fmt.Fprintf(&b, "; body: %s", e.Body)
	}
	return b.String()
}

// Unwrap returns the cause, so errors.Is(err, context.Canceled) works.
func (e *Error) Unwrap() error { return e.Err }

// Is matches the sentinel of e's kind.
func (e *Error) Is(target error) bool {
	s, ok := kindSentinel[e.Kind]
	return ok && s == target
}

// Temporary reports whether a later pass may succeed without operator action.
func (e *Error) Temporary() bool {
	switch e.Kind {
	case KindRateLimited, KindTransport:
		return true
	case KindStatus:
		return e.Status >= 500
	}
	return false
}

// DecodeError builds the error providers return for a body they cannot
// normalize: "decode <source> <resource> page <n>: field <f>: <what>; body:
// <snippet>". body may be the whole page or the offending record; only a
// sanitized excerpt is kept. Use Client.DecodeError to also redact the
// client's secrets.
func DecodeError(source, resource string, page int, field, what string, body []byte) *Error {
	return &Error{
		Kind: KindDecode, Source: source, Resource: resource, Page: page,
		Field: field, What: what, Body: snippet(body, nil),
	}
}

// snippet returns a printable excerpt of body of at most SnippetLen bytes,
// with every secret replaced before truncation.
func snippet(body []byte, secrets []string) string {
	if len(body) == 0 {
		return ""
	}
	longest := 0
	for _, s := range secrets {
		longest = max(longest, len(s))
	}
	limit := min(len(body), SnippetLen+longest+8)
	s := redact(string(body[:limit]), secrets)
	s = strings.ToValidUTF8(s, "?")
	var b strings.Builder
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			r = ' '
		}
		if b.Len()+utf8.RuneLen(r) > SnippetLen {
			break
		}
		b.WriteRune(r)
	}
	out := strings.TrimSpace(b.String())
	if len(body) > b.Len() && len(out) > 0 {
		out += "…"
	}
	return out
}

const redacted = "[REDACTED]"

func redact(s string, secrets []string) string {
	for _, sec := range secrets {
		if sec != "" && strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, redacted)
		}
	}
	return s
}

// redactedError carries an error's text with secrets removed, while keeping
// the original for errors.Is/As (its Error() is never the original's).
type redactedError struct {
	msg string
	err error
}

func (r *redactedError) Error() string { return r.msg }
func (r *redactedError) Unwrap() error { return r.err }

// cutShortError describes a 2xx body that did not arrive whole; its text
// holds only counts and an already redacted cause.
type cutShortError struct {
	got, want int64 // bytes received; announced length, or -1
	cause     error // the read error, or nil when the JSON did not close
}

func (e *cutShortError) Error() string {
	var b strings.Builder
	b.WriteString(ErrBodyCutShort.Error())
	if e.want >= 0 {
		fmt.Fprintf(&b, ": %d of %d bytes received", e.got, e.want)
	} else {
		fmt.Fprintf(&b, ": %d bytes received", e.got)
	}
	if e.cause != nil {
		fmt.Fprintf(&b, ": %v", e.cause)
	} else {
		b.WriteString(", the JSON document is incomplete")
	}
	return b.String()
}

func (e *cutShortError) Is(target error) bool { return target == ErrBodyCutShort }
func (e *cutShortError) Unwrap() error        { return e.cause }
