package action

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// ExpandStatic expands $(VAR) references in cmd with the values of the
// container's env entries that have a literal value (valueFrom entries
// are not resolved), as the kubelet does for an exec probe's command: a
// later entry of the same name wins; a reference to a name with no such
// entry, or an unterminated "$(", stays as written; "$$" is a literal "$".
// The result is a new slice; cmd is not modified.
func ExpandStatic(cmd []string, env []v1.EnvVar) []string {
	if len(cmd) == 0 {
		return nil
	}
	vars := make(map[string]string, len(env))
	for _, e := range env {
		if e.ValueFrom == nil {
			vars[e.Name] = e.Value
		}
	}
	out := make([]string, len(cmd))
	for i, s := range cmd {
		out[i] = expand(s, vars)
	}
	return out
}

// expand replaces the references in s by the expansion rules of
// ExpandStatic.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i++
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
