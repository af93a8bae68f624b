package processruntime_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// The sandbox's init and the log shims run on one P (GOMAXPROCS=1, what a
// stage's start costs least with), and the container's command never
// gets that setting: its environment is the container's.
func TestStagesRunOnOnePButContainersDoNot(t *testing.T) {
	rt := sandboxed(t, processruntime.Options{})
	pod := newPod(v1.RestartPolicyNever, "c", `echo "gomaxprocs=[$GOMAXPROCS]"; exec sleep 3600`)
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	t.Cleanup(func() { terminate(t, rt, pod, 1) })
	waitLog(t, rt, pod.UID, "c", "gomaxprocs=")
	assert.Contains(t, readLogs(t, rt, pod.UID, "c", processruntime.LogOptions{}), "gomaxprocs=[]")

	var inits int
	for _, p := range processes(t, pod.UID) {
		if p.Sandbox {
			inits++
			assert.Contains(t, environ(t, p.PID), "GOMAXPROCS=1", "the init's environment")
		}
	}
	assert.Equal(t, 1, inits, "the pod's init among its processes")
	shims := logShims(t, rt.PodDir(pod.UID))
	require.NotEmpty(t, shims, "the container's log shim")
	for _, pid := range shims {
		assert.Contains(t, environ(t, pid), "GOMAXPROCS=1", "the log shim's environment")
	}
}

// environ returns process pid's environment.
func environ(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	require.NoError(t, err)
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}
