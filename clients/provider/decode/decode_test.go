package decode_test

import (
	"testing"

	"github.com/tidemarkhq/tidemark/clients/provider/decode"
)

func TestDigits(t *testing.T) {
	for s, want := range map[string]bool{
		"1": true, "0042": true, "1234567890123456789": true,
		"": false, "12345678901234567890": false, "-1": false, "1.0": false, "x1": false,
	} {
		if got := decode.Digits(s); got != want {
			t.Errorf("Digits(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestIDsKeepTheFirstError(t *testing.T) {
	req := func(v, field string) (string, *decode.FieldError) {
		if v == "" {
			return "", decode.Missing(field)
		}
		return v, nil
	}
	opt := func(v, field string) (string, *decode.FieldError) {
		if v == "bad" {
			return "", decode.Field(field, "want an id")
		}
		return v, nil
	}
	for _, tc := range []struct {
		name                string
		user, project, task string
		want                string // the error's field, "" for none
	}{
		{"all there", "u", "p", "t", ""},
		{"optional left out", "u", "", "", ""},
		{"required missing", "", "bad", "bad", "user"},
		{"first bad optional", "u", "bad", "bad", "project"},
		{"last bad optional", "u", "p", "bad", "task"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids := decode.IDs[string]{Req: req, Opt: opt}
			user, project, task := ids.Need(tc.user, "user"), ids.May(tc.project, "project"), ids.May(tc.task, "task")
			switch {
			case tc.want == "" && ids.Err != nil:
				t.Fatalf("unexpected error %v", ids.Err)
			case tc.want == "" && (user != tc.user || project != tc.project || task != tc.task):
				t.Fatalf("ids %q %q %q", user, project, task)
			case tc.want != "" && (ids.Err == nil || ids.Err.Field != tc.want):
				t.Fatalf("error %v, want one on %s", ids.Err, tc.want)
			}
		})
	}
}
