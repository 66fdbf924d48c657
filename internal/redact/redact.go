// Package redact prints URLs without the secrets they may carry: every
// URL that reaches an error, a log line, stored text or a command's output
// goes through URL. Go's HTTP client strips the password from its own
// errors; printing the configured URL beside them must not add it back.
package redact

import (
	"net/url"
	"strings"
)

// URL is raw with its password, and the values of query parameters named
// like a credential (?token=, ?api_key=, ?sig=...), replaced by "xxxxx";
// the rest stays, so that the URL still says where (sslmode=disable
// included). A string that does not parse as a URL keeps nothing between
// "://" and the last "@" of its authority.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return opaque(raw)
	}
	if u.RawQuery != "" {
		q, secret := u.Query(), false
		for k := range q {
			if credential(k) {
				q[k], secret = []string{"xxxxx"}, true
			}
		}
		if secret {
			u.RawQuery = q.Encode()
		}
	}
	return u.Redacted()
}

// credential reports whether a query parameter's name says it carries one.
func credential(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"pass", "pwd", "token", "secret", "key", "sig", "auth", "session", "code"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// opaque drops the userinfo of a URL that does not parse.
func opaque(raw string) string {
	i := strings.Index(raw, "://")
	if i < 0 {
		return raw
	}
	rest := raw[i+3:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
		return raw[:i+3] + "xxxxx" + rest[at:]
	}
	return raw
}
