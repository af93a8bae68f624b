package processruntime_test

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// envHelperLogging makes the previous agent (TestMain) run loggingPod.
const envHelperLogging = "PROCESSRUNTIME_TEST_AGENT_LOGGING"

// loggingPod's container writes numbered lines without end, in bursts.
func loggingPod(uid types.UID) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "logger", Namespace: "test", UID: uid},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyAlways,
			Containers: []v1.Container{{Name: "counter", Command: []string{"sh", "-c",
				`i=0; while :; do i=$((i+1)); echo $i; if [ $((i % 100)) = 0 ]; then sleep 0.01; fi; done`}}},
		},
	}
}

func TestAnAgentCrashLosesNoLogLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	uid := types.UID(fmt.Sprintf("logger-%d", time.Now().UnixNano()))
	crashAgentWith(t, dir, uid, []string{envHelperLogging + "=1"}, 1)
	logDir := filepath.Join(dir, "pods", string(uid), "logs", "counter")

	// No agent runs: the log shim keeps draining the container, which
	// neither dies of SIGPIPE nor blocks on a full pipe.
	atCrash, _ := dirBytes(t, logDir)
	eventually(t, 10*time.Second, "the log grows with no agent running", func() bool {
		now, _ := dirBytes(t, logDir)
		return now > atCrash+128<<10
	})
	require.Len(t, leaders(t, uid, -1), 1, "the container still runs")

	// A new agent adopts the container and reads on.
	rt := openRuntime(t, processruntime.Options{StateDir: dir})
	pod := loggingPod(uid)
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	c, _ := status(t, rt, uid).Container("counter")
	require.Equal(t, processruntime.ContainerStateRunning, c.State)
	require.Zero(t, c.RestartCount, "adopted, not restarted")
	before := readLogs(t, rt, uid, "counter", processruntime.LogOptions{})
	waitLog(t, rt, uid, "counter", "\n"+strconv.Itoa(strings.Count(before, "\n")+1000)+"\n")
	terminate(t, rt, pod, 1)
	assert.Empty(t, logShims(t, filepath.Join(dir, "pods", string(uid))), "the log shim ended with the pod")

	// Every line, from the first, with no gap and no repeat.
	log := readLogs(t, rt, uid, "counter", processruntime.LogOptions{})
	lines := strings.Split(strings.TrimSuffix(log, "\n"), "\n")
	for i, l := range lines {
		require.Equal(t, strconv.Itoa(i+1), l, "line %d", i+1)
	}
	t.Logf("%d lines, %d bytes logged across the agent's crash", len(lines), len(log))
}
