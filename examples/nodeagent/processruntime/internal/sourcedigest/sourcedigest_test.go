package sourcedigest_test

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/sourcedigest"
)

func TestDigestFollowsTheSourceNotTheTests(t *testing.T) {
	base := fstest.MapFS{
		"a.go":      {Data: []byte("package a\n")},
		"b.go":      {Data: []byte("package a\nvar B = 1\n")},
		"a_test.go": {Data: []byte("package a\n")},
		"README.md": {Data: []byte("x")},
	}
	d := sourcedigest.Of(base)
	require.Len(t, d, 64)
	require.Equal(t, d, sourcedigest.Of(base), "the same files give the same digest")

	with := func(name, data string) fstest.MapFS {
		m := fstest.MapFS{}
		for k, v := range base {
			m[k] = v
		}
		if data == "" {
			delete(m, name)
		} else {
			m[name] = &fstest.MapFile{Data: []byte(data)}
		}
		return m
	}
	require.Equal(t, d, sourcedigest.Of(with("a_test.go", "package a\nfunc TestX() {}\n")), "a test changed")
	require.Equal(t, d, sourcedigest.Of(with("README.md", "y")), "a file other than Go source changed")
	require.NotEqual(t, d, sourcedigest.Of(with("b.go", "package a\nvar B = 2\n")), "a source file changed")
	require.NotEqual(t, d, sourcedigest.Of(with("c.go", "package a\n")), "a source file added")
	require.NotEqual(t, d, sourcedigest.Of(with("b.go", "")), "a source file removed")
	// Bytes moved from the end of one file to the start of the next.
	shifted := with("a.go", "package a\npackage a\n")
	shifted["b.go"] = &fstest.MapFile{Data: []byte("var B = 1\n")}
	require.NotEqual(t, d, sourcedigest.Of(shifted))
}
