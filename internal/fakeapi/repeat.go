package fakeapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// Repeat is how the kit makes a listing serve its first page for ever:
// a caching proxy, or a provider that ignores its own paging.
type Repeat int

const (
	// RepeatFirstPage drops the paging parameters the dialect names
	// (Dialect.PageParams, PageFields) from every request: whatever page
	// is asked for, the first is served, with its links and headers.
	RepeatFirstPage Repeat = iota + 1
	// StuckNext is RepeatFirstPage whose JSON "next" link points at the
	// request itself, on every page, the last one too: a links.next that
	// does not move.
	StuckNext
)

// String names the kind in words (test names).
func (m Repeat) String() string {
	switch m {
	case RepeatFirstPage:
		return "first_page_repeated"
	case StuckNext:
		return "next_link_stuck"
	}
	return "repeat " + strconv.Itoa(int(m))
}

// Repeats lists every kind.
var Repeats = []Repeat{RepeatFirstPage, StuckNext}

// Repeat makes every listing serve its first page from now on (0: heal).
func (k *Kit) Repeat(m Repeat) {
	k.mu.Lock()
	k.repeat = m
	k.mu.Unlock()
}

// repeating rewrites r so that it asks for the first page, and w so that
// a StuckNext body's next link points at r as it was sent.
func (k *Kit) repeating(m Repeat, w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request, func()) {
	self := "http://" + r.Host + r.URL.RequestURI()
	q := r.URL.Query()
	for _, p := range k.d.PageParams {
		q.Del(p)
	}
	r2 := r.Clone(r.Context())
	r2.URL.RawQuery = q.Encode()
	r2.RequestURI = r2.URL.RequestURI()
	if len(k.d.PageFields) > 0 && r.Body != nil {
		body, _ := io.ReadAll(r.Body)
		var obj map[string]any
		if json.Unmarshal(body, &obj) == nil {
			for _, f := range k.d.PageFields {
				delete(obj, f)
			}
			body, _ = json.Marshal(obj)
		}
		r2.Body, r2.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	}
	if m != StuckNext {
		return w, r2, func() {}
	}
	bw := &bufWriter{ResponseWriter: w}
	return bw, r2, func() { bw.flush(self) }
}

// nextLink is a JSON "next" link (Harvest's links.next).
var nextLink = regexp.MustCompile(`"next"\s*:\s*("[^"]*"|null)`)

// bufWriter holds a body until the handler is done, to rewrite its link.
type bufWriter struct {
	http.ResponseWriter
	status int
	buf    bytes.Buffer
}

func (w *bufWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *bufWriter) Write(b []byte) (int, error) { return w.buf.Write(b) }

func (w *bufWriter) flush(self string) {
	link, _ := json.Marshal(self)
	body := nextLink.ReplaceAllLiteral(w.buf.Bytes(), append([]byte(`"next":`), link...))
	w.Header().Del("Content-Length")
	if !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		body = w.buf.Bytes()
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.ResponseWriter.WriteHeader(max(w.status, http.StatusOK))
	_, _ = w.ResponseWriter.Write(body)
}
