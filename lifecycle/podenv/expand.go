package podenv

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
)

// expand replaces the variable references of s, as the kubelet expands
// env values, command and args:
//
//   - $(NAME) becomes NAME's value when lookup defines NAME, and stays
//     $(NAME), as written, when it does not;
//   - $$ becomes $, so $$(NAME) is the text $(NAME);
//   - a $ followed by anything else, a lone $ at the end, and a $( with
//     no closing parenthesis stay as they are.
//
// ok is false, and the result empty, when the result would be longer than
// limit bytes: a short value can reference a long one many times.
func expand(s string, lookup func(name string) (string, bool), limit int) (_ string, ok bool) {
	if !strings.Contains(s, "$") {
		return s, len(s) <= limit
	}
	var b strings.Builder
	write := func(p string) bool {
		if b.Len()+len(p) > limit {
			return false
		}
		b.WriteString(p)
		return true
	}
	start := 0 // s[start:i] is copied as it is
	for i := 0; i+1 < len(s); {
		if s[i] != '$' {
			i++
			continue
		}
		if !write(s[start:i]) {
			return "", false
		}
		var out string
		switch s[i+1] {
		case '$':
			out, i = "$", i+2
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				out, i = "$(", i+2
				break
			}
			name := s[i+2 : i+2+end]
			if v, defined := lookup(name); defined {
				out = v
			} else {
				out = "$(" + name + ")"
			}
			i += 2 + end + 1
		default:
			_, size := utf8.DecodeRuneInString(s[i+1:])
			out, i = s[i:i+1+size], i+1+size
		}
		if !write(out) {
			return "", false
		}
		start = i
	}
	if !write(s[start:]) {
		return "", false
	}
	return b.String(), true
}

// lookupIn returns a lookup over env (the last definition of a name wins).
func lookupIn(env []EnvVar) func(string) (string, bool) {
	m := make(map[string]string, len(env))
	for _, e := range env {
		m[e.Name] = e.Value
	}
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// ExpandCommandAndArgs returns container's command and args with the
// references to env's variables expanded, as the kubelet does before it
// starts a container: $(NAME) becomes NAME's value, $$ a $, and a
// reference to a variable env does not define stays as written. env is
// what Build returned for the container.
//
// The runtime calls it from its hook, after Build, when it resolves what
// to run (it is pure: any goroutine). The error, a *ConfigError, says
// that the expanded command and args would exceed Options.MaxBytes.
func (b *Builder) ExpandCommandAndArgs(container *v1.Container, env []EnvVar) (command, args []string, err error) {
	if container == nil {
		return nil, nil, fmt.Errorf("podenv: nil container")
	}
	lookup := lookupIn(env)
	budget := b.maxBytes
	expandAll := func(in []string) ([]string, bool) {
		if len(in) == 0 {
			return nil, true
		}
		out := slices.Clone(in)
		for i, s := range in {
			v, ok := expand(s, lookup, budget)
			if !ok {
				return nil, false
			}
			budget -= len(v)
			out[i] = v
		}
		return out, true
	}
	command, okCommand := expandAll(container.Command)
	args, okArgs := expandAll(container.Args)
	if !okCommand || !okArgs {
		return nil, nil, configErrorf(container.Name, "the command and args, expanded, are longer than %d bytes", b.maxBytes)
	}
	return command, args, nil
}

// ExpandSubPathExpr returns a volume mount's subPathExpr with env's
// variables expanded, as the kubelet does: $(NAME) becomes NAME's value
// and $$ a $; unlike in a command, a reference to a variable that is
// undefined or empty is an error (a *ConfigError naming them, sorted),
// since the mount would land elsewhere. The result is a path relative to
// the volume, to resolve safely (lifecycle/volume's SubPath).
//
// The runtime calls it from its hook, after Build (pure: any goroutine).
func (b *Builder) ExpandSubPathExpr(container *v1.Container, mount *v1.VolumeMount, env []EnvVar) (string, error) {
	if container == nil || mount == nil {
		return "", fmt.Errorf("podenv: nil container or volume mount")
	}
	defined := lookupIn(env)
	var missing []string
	out, ok := expand(mount.SubPathExpr, func(name string) (string, bool) {
		v, isSet := defined(name)
		if !isSet || v == "" {
			if !slices.Contains(missing, name) {
				missing = append(missing, name)
			}
		}
		return v, true
	}, b.maxBytes)
	switch {
	case len(missing) > 0:
		slices.Sort(missing)
		return "", configErrorf(container.Name, "missing value for %s", strings.Join(missing, ", "))
	case !ok:
		return "", configErrorf(container.Name, "subPathExpr of volume mount %q, expanded, is longer than %d bytes", mount.Name, b.maxBytes)
	}
	return out, nil
}
