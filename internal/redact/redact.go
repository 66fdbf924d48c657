// Package redact prints URLs without the secrets they may carry: every
// URL that reaches an error, a log line, stored text or a command's output
// goes through URL. Go's HTTP client strips the password from its own
// errors; printing the configured URL beside them must not add it back.
package redact

import (
	"net/url"
	"strings"
)

// URL is raw with its password and its query values replaced by "xxxxx"
// (a token is often passed as ?token=...). A string that does not parse
// as a URL keeps nothing between "://" and the last "@" of its authority.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return opaque(raw)
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{"xxxxx"}
		}
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
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
