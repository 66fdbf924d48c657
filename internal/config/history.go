package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tidemarkhq/tidemark/schema"
)

// History is a source's `history:` (issue 31): which resources keep every
// version, and for how long. Three forms:
//
//	history: all                          # every resource of the source
//	history: [time_entries, invoices]     # these
//	history: {resources: all, keep: 730d} # with retention
//
// Default off. A child table (invoice_line_items) is kept through its
// parent's versions: naming it turns its parent's history on.
type History struct {
	Resources HistoryResources `yaml:"resources"`
	// Keep prunes versions whose valid time ended more than Keep ago; 0
	// keeps them for ever (the default).
	Keep Days `yaml:"keep"`
}

// HistoryResources is `all` or a list of resource names.
type HistoryResources []string

// On reports whether the source keeps any history.
func (h History) On() bool { return len(h.Resources) > 0 }

func (h *History) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.MappingNode:
		type plain History
		return n.Decode((*plain)(h))
	default:
		return n.Decode(&h.Resources)
	}
}

func (r *HistoryResources) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		switch strings.ToLower(n.Value) {
		case "all":
			*r = HistoryResources{"all"}
		case "off", "false", "no", "":
			*r = nil
		default:
			return &Error{Line: n.Line, Msg: fmt.Sprintf("invalid history %q (want all, off, or a list of resources)", n.Value)}
		}
		return nil
	case yaml.SequenceNode:
		var names []string
		if err := n.Decode(&names); err != nil {
			return &Error{Line: n.Line, Msg: "want a list of resource names"}
		}
		*r = names
		return nil
	}
	return &Error{Line: n.Line, Msg: "want all, off, or a list of resources"}
}

// Days is a duration that also takes days ("730d"), for retention.
type Days time.Duration

// D returns d as a time.Duration.
func (d Days) D() time.Duration { return time.Duration(d) }

func parseDays(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days < 0 {
			return 0, fmt.Errorf("invalid duration %q (want e.g. 90d or 2160h)", s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("invalid duration %q (want e.g. 90d or 2160h)", s)
	}
	return v, nil
}

func (d *Days) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseDays(n.Value)
	if err != nil {
		return &Error{Line: n.Line, Msg: err.Error()}
	}
	*d = Days(v)
	return nil
}

var (
	historyType = reflect.TypeFor[History]()
	daysType    = reflect.TypeFor[Days]()
)

// checkHistory is checkValues' rule for the history keys: it names the key.
func checkHistory(n *yaml.Node, t reflect.Type, path string) error {
	switch t {
	case daysType:
		if _, err := parseDays(n.Value); err != nil || n.Kind != yaml.ScalarNode {
			return &Error{Line: n.Line, Key: path, Msg: fmt.Sprintf("invalid duration %q (want e.g. 90d or 2160h)", n.Value)}
		}
	case historyType:
		if n.Kind == yaml.ScalarNode {
			if v := strings.ToLower(n.Value); v != "all" && v != "off" && v != "false" && v != "no" && v != "" {
				return &Error{Line: n.Line, Key: path, Msg: fmt.Sprintf("invalid value %q (want all, off, a list of resources, or {resources: ..., keep: ...})", n.Value)}
			}
		}
	}
	return nil
}

// validateHistory resolves `all`, maps a child table to its parent and
// refuses a resource the source does not mirror.
func (s *Source) validateHistory(fail func(key, format string, args ...any) error, key func(string) string) error {
	if len(s.History.Resources) == 0 {
		return nil
	}
	if len(s.History.Resources) == 1 && s.History.Resources[0] == "all" {
		s.History.Resources = slices.Clone(s.Resources)
		return nil
	}
	var out []string
	for j, name := range s.History.Resources {
		k := fmt.Sprintf("history[%d]", j)
		if parent, ok := childParent(name); ok {
			name = parent
		} else if _, err := schema.Parse(name); err != nil {
			return fail(key(k), "%v", err)
		}
		if !slices.Contains(s.Resources, name) {
			return fail(key(k), "%s is not among the source's resources (%s)", name, strings.Join(s.Resources, ", "))
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	s.History.Resources = out
	return nil
}

// childParent returns the parent resource of a child table's name.
func childParent(name string) (string, bool) {
	for _, t := range schema.All() {
		for _, c := range t.Children {
			if string(c.Name) == name {
				return string(t.Name), true
			}
		}
	}
	return "", false
}

// HistoryOn reports whether the source keeps the history of resource r.
func (s *Source) HistoryOn(r string) bool { return slices.Contains(s.History.Resources, r) }
