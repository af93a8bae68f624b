package podenv

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "a", "B": "bee", "EMPTY": "", "A B": "space", "LONG": strings.Repeat("x", 10)}
	lookup := func(n string) (string, bool) { v, ok := vars[n]; return v, ok }
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"$(A)", "a"},
		{"x$(A)y$(B)z", "xaybeez"},
		{"$(UNDEFINED)", "$(UNDEFINED)"},
		{"$(EMPTY)", ""},
		{"$$(A)", "$(A)"},
		{"$$$(A)", "$a"},
		{"$$", "$"},
		{"$", "$"},
		{"a$", "a$"},
		{"$A", "$A"},
		{"$é", "$é"},
		{"$(", "$("},
		{"$(A", "$(A"},
		{"$(A$(B)", "$(A$(B)"}, // the name runs to the first ')': "A$(B"
		{"$()", "$()"},
		{"$(A B)", "space"},
		{"$(A))", "a)"},
		{"(A)", "(A)"},
		{"$$$$", "$$"},
	} {
		got, ok := expand(tc.in, lookup, 1<<20)
		require.True(t, ok, tc.in)
		require.Equal(t, tc.want, got, "expand(%q)", tc.in)
	}
}

func TestExpandStopsAtTheLimit(t *testing.T) {
	lookup := func(string) (string, bool) { return strings.Repeat("x", 100), true }
	_, ok := expand(strings.Repeat("$(X)", 1000), lookup, 10_000)
	require.False(t, ok, "1000 references to 100 bytes exceed 10000")
	got, ok := expand(strings.Repeat("$(X)", 100), lookup, 10_000)
	require.True(t, ok)
	require.Len(t, got, 10_000)
	_, ok = expand(strings.Repeat("y", 11), lookup, 10)
	require.False(t, ok, "a literal longer than the limit")
}

func TestExpandCommandAndArgs(t *testing.T) {
	b, err := New(nil, Options{MaxBytes: 1000})
	require.NoError(t, err)
	env := []EnvVar{{"GREETING", "hello"}, {"WHO", "world"}, {"WHO", "podkit"}}
	c := &v1.Container{
		Name:    "c",
		Command: []string{"/bin/echo", "$(GREETING)"},
		Args:    []string{"$(WHO)", "$$(WHO)", "$(NOPE)"},
	}
	cmd, args, err := b.ExpandCommandAndArgs(c, env)
	require.NoError(t, err)
	require.Equal(t, []string{"/bin/echo", "hello"}, cmd)
	require.Equal(t, []string{"podkit", "$(WHO)", "$(NOPE)"}, args, "the last definition wins")
	require.Equal(t, []string{"$(WHO)", "$$(WHO)", "$(NOPE)"}, c.Args, "the container is not modified")

	cmd, args, err = b.ExpandCommandAndArgs(&v1.Container{Name: "none"}, env)
	require.NoError(t, err)
	require.Nil(t, cmd)
	require.Nil(t, args)

	big := []EnvVar{{"BIG", strings.Repeat("b", 100)}}
	_, _, err = b.ExpandCommandAndArgs(&v1.Container{Name: "c", Args: []string{strings.Repeat("$(BIG)", 11)}}, big)
	require.True(t, IsConfigError(err), "%v", err)
	require.ErrorContains(t, err, "longer than 1000 bytes")

	_, _, err = b.ExpandCommandAndArgs(nil, env)
	require.EqualError(t, err, "podenv: nil container")
}

func TestExpandSubPathExpr(t *testing.T) {
	b, err := New(nil, Options{})
	require.NoError(t, err)
	env := []EnvVar{{"POD_NAME", "web-0"}, {"EMPTY", ""}}
	c := &v1.Container{Name: "c"}
	got, err := b.ExpandSubPathExpr(c, &v1.VolumeMount{Name: "logs", SubPathExpr: "logs/$(POD_NAME)/$$x"}, env)
	require.NoError(t, err)
	require.Equal(t, "logs/web-0/$x", got)

	_, err = b.ExpandSubPathExpr(c, &v1.VolumeMount{Name: "logs", SubPathExpr: "$(ZED)/$(EMPTY)/$(ZED)/$(ALPHA)"}, env)
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "missing value for ALPHA, EMPTY, ZED", ce.Message)
	require.Equal(t, "c", ce.Container)

	_, err = b.ExpandSubPathExpr(c, nil, env)
	require.Error(t, err)
}
