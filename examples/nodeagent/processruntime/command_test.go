package processruntime

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A container's argv follows Kubernetes' rules over its image's
// configuration: command wins over the image; args alone go after the
// image's entrypoint (busybox has none, so args run as the command);
// neither runs entrypoint + cmd.
func TestLaunchCommandRules(t *testing.T) {
	t.Parallel()
	table, err := NewImageTable(map[string]ImageConfig{
		"example.com/app": {Entrypoint: []string{"/app/run"}, Cmd: []string{"--serve", "$(MODE)"}},
		"reset":           {Entrypoint: []string{""}, Cmd: []string{"sh"}},
		"empty":           {},
		"busybox:custom":  {Cmd: []string{"ash"}},
	})
	require.NoError(t, err)
	// As on a node without busybox: the rules, not busybox's applets
	// (TestBusyboxCommandsAreTheNodesBusyboxApplets).
	r := &Runtime{path: DefaultPath, imageConfigs: table, multicalls: multicalls{found: map[string]*multicallProgram{"busybox": {}}}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}}
	env := []v1.EnvVar{{Name: "MODE", Value: "fast"}}
	for name, tc := range map[string]struct {
		c      v1.Container
		want   []string
		reason string
	}{
		"command and args, image ignored": {v1.Container{Image: "example.com/app", Command: []string{"sh", "-c"}, Args: []string{"echo $(MODE)"}}, []string{"sh", "-c", "echo $(MODE)"}, ""},
		"command only drops image cmd":    {v1.Container{Image: "example.com/app", Command: []string{"/bin/true"}}, []string{"/bin/true"}, ""},
		"busybox args only":               {v1.Container{Image: "busybox:1.36", Args: []string{"sh", "-c", "echo hi"}}, []string{"sh", "-c", "echo hi"}, ""},
		"busybox neither":                 {v1.Container{Image: "registry.k8s.io/busybox"}, []string{"sh"}, ""},
		"agent's entry beats the default": {v1.Container{Image: "busybox:custom"}, []string{"ash"}, ""},
		"args after entrypoint":           {v1.Container{Image: "example.com/app:1", Args: []string{"--port", "$(MODE)"}}, []string{"/app/run", "--port", "$(MODE)"}, ""},
		"entrypoint and cmd":              {v1.Container{Image: "example.com/app"}, []string{"/app/run", "--serve", "$(MODE)"}, ""},
		"entrypoint reset":                {v1.Container{Image: "reset", Args: []string{"env"}}, []string{"env"}, ""},
		"unknown image, args":             {v1.Container{Image: "example.com/other", Args: []string{"--x"}}, nil, ReasonCreateContainerConfigError},
		"unknown image, neither":          {v1.Container{Image: "example.com/other"}, nil, ReasonCreateContainerConfigError},
		"known image without a command":   {v1.Container{Image: "empty"}, nil, ReasonCreateContainerError},
		"empty command":                   {v1.Container{Image: "x", Command: []string{""}}, nil, ReasonCreateContainerError},
	} {
		c := tc.c
		c.Name, c.Env = "c", env
		l, waiting := r.launchOf(pod, &c)
		if tc.reason != "" {
			require.NotNil(t, waiting, name)
			assert.Equal(t, tc.reason, waiting.Reason, name)
			assert.Contains(t, waiting.Message, c.Image, name)
			continue
		}
		require.Nil(t, waiting, name)
		assert.Equal(t, tc.want, l.argv, name)
	}

	c := v1.Container{Name: "c", Image: "example.com/other", Args: []string{"--x"}}
	_, waiting := r.launchOf(pod, &c)
	assert.Equal(t, `container has args but no command, and image "example.com/other" is not in this node's image table, so its entrypoint and cmd are unknown: give the container a command, or add the image to the node's image configs`, waiting.Message)
}

// The image's env is under the container's, its PATH finds the command,
// its workingDir is the default; each name is in the environment once,
// with the value that wins.
func TestLaunchImageEnvAndWorkingDir(t *testing.T) {
	t.Parallel()
	table, err := NewImageTable(map[string]ImageConfig{
		"tool": {Cmd: []string{"tool"}, WorkingDir: "/srv", Env: []string{"PATH=/opt/tool/bin:/usr/bin", "MODE=image", "ONLY=image", "PODKIT_POD_UID=forged"}},
	})
	require.NoError(t, err)
	r := &Runtime{path: DefaultPath, imageConfigs: table}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}}
	c := v1.Container{Name: "c", Image: "tool:1", Env: []v1.EnvVar{{Name: "MODE", Value: "spec"}}}
	l, waiting := r.launchOf(pod, &c)
	require.Nil(t, waiting)
	assert.Equal(t, "/opt/tool/bin:/usr/bin", l.path)
	assert.Equal(t, "/srv", l.dir)
	vars := map[string]int{}
	for _, kv := range l.env {
		k, _, _ := strings.Cut(kv, "=")
		vars[k]++
	}
	for k, n := range vars {
		assert.Equal(t, 1, n, k)
	}
	got := envMap(l.env)
	assert.Equal(t, "spec", got["MODE"], "the container's env wins")
	assert.Equal(t, "image", got["ONLY"])
	assert.Equal(t, "/opt/tool/bin:/usr/bin", got["PATH"])
	assert.Equal(t, "u", got[EnvPodUID], "the runtime's variables win over the image's")

	c.WorkingDir, c.Env = "/work", append(c.Env, v1.EnvVar{Name: "PATH", Value: "/bin"})
	l, _ = r.launchOf(pod, &c)
	assert.Equal(t, "/work", l.dir)
	assert.Equal(t, "/bin", l.path, "the container's PATH wins")

	// The image's user stands in for runAsUser.
	table, err = NewImageTable(map[string]ImageConfig{"nonroot": {Cmd: []string{"x"}, User: "65532:65532"}})
	require.NoError(t, err)
	r.imageConfigs = table
	nr := &v1.Container{Name: "c", Image: "gcr.io/distroless/nonroot"}
	pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: new(true)}
	uid, gid, _, waiting := r.identity(pod, nr, effectiveSecurity(pod, nr))
	assert.Nil(t, waiting, "runAsNonRoot is met by the image's user")
	assert.Equal(t, []uint32{65532, 65532}, []uint32{uid, gid})
	nr.Image = "busybox"
	_, _, _, waiting = r.identity(pod, nr, effectiveSecurity(pod, nr))
	require.NotNil(t, waiting)
	assert.Contains(t, waiting.Message, "image will run as root")
}

func TestDedupEnvKeepsLastValueAtFirstPlace(t *testing.T) {
	t.Parallel()
	assert.Equal(t, []string{"A=3", "B=2", "C="}, dedupEnv([]string{"A=1", "B=2", "A=3", "C="}))
	assert.Empty(t, dedupEnv(nil))
}
