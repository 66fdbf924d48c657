package redact_test

import (
	"strings"
	"testing"

	"github.com/tidemarkhq/tidemark/internal/redact"
)

func TestURLKeepsNoSecret(t *testing.T) {
	for raw, want := range map[string]string{
		"https://tidemark:PASSWORD@host/hook":                   "https://tidemark:xxxxx@host/hook",
		"https://host/hook?token=PASSWORD&x=1":                  "https://host/hook?token=xxxxx&x=1",
		"https://host/hook?api_key=PASSWORD":                    "https://host/hook?api_key=xxxxx",
		"postgres://postgres@127.0.0.1:5432/db?sslmode=disable": "postgres://postgres@127.0.0.1:5432/db?sslmode=disable",
		"https://host/hook":                                     "https://host/hook",
		"https://u:PASSWORD@host:bad port/%zz":                  "https://xxxxx@host:bad port/%zz",
	} {
		got := redact.URL(raw)
		if got != want || strings.Contains(got, "PASSWORD") {
			t.Errorf("URL(%q) = %q, want %q", raw, got, want)
		}
	}
}
