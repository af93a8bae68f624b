package releaseversion

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/component-base/version"
)

// TestSet: a binary built without the linker's version reports the
// release of its build information once set ran, in every field kubectl
// version shows. (A test binary's build information lists no modules, so
// the test gives them.)
func TestSet(t *testing.T) {
	require.Contains(t, version.Get().GitVersion, "v0.0.0-master", "built without the linker's version")
	got, err := set([]*debug.Module{{Path: "k8s.io/kubernetes", Version: "v1.37.2"}})
	require.NoError(t, err)
	assert.Equal(t, "v1.37.2", got)
	v := version.Get()
	assert.Equal(t, "v1.37.2", v.GitVersion)
	assert.Equal(t, "1", v.Major)
	assert.Equal(t, "37", v.Minor)
	assert.Equal(t, "clean", v.GitTreeState)
	again, err := set([]*debug.Module{{Path: "k8s.io/kubernetes", Version: "v1.38.0"}})
	require.NoError(t, err)
	assert.Equal(t, "v1.37.2", again, "a version set is kept")
}

// TestFromDeps: k8s.io/kubernetes's release wins; else component-base's
// staging version names the release; replacements count; v0.0.0 (the
// staging modules' placeholder) is no release.
func TestFromDeps(t *testing.T) {
	for _, tc := range []struct {
		name string
		deps []*debug.Module
		want string
	}{
		{"kubernetes", []*debug.Module{{Path: "k8s.io/component-base", Version: "v0.36.1"}, {Path: "k8s.io/kubernetes", Version: "v1.37.2"}}, "v1.37.2"},
		{"component-base", []*debug.Module{{Path: "k8s.io/component-base", Version: "v0.37.2"}}, "v1.37.2"},
		{"replaced", []*debug.Module{{Path: "k8s.io/component-base", Version: "v0.0.0", Replace: &debug.Module{Path: "k8s.io/component-base", Version: "v0.37.2"}}}, "v1.37.2"},
		{"placeholder", []*debug.Module{{Path: "k8s.io/component-base", Version: "v0.0.0"}}, ""},
		{"none", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fromDeps(tc.deps)
			if tc.want == "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "releaseversion: ")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
