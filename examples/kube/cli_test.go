package kube_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// overrides returns kubectl run's --overrides putting the pod in the pool.
func overrides(pool string) string {
	return fmt.Sprintf(`{"spec":{"nodeSelector":{%q:%q},"tolerations":[{"key":%q,"operator":"Equal","value":%q,"effect":"NoSchedule"}]}}`,
		poolLabel, pool, poolLabel, pool)
}

// testKubectl drives podkit pods with kubectl alone: run, get -w, logs
// (-f, --tail, --timestamps, --previous, --since, --limit-bytes) and
// delete --grace-period.
func testKubectl(t *testing.T, h *harness) {
	h.hostFilesPool(t, "cli", 1)
	ns := h.namespace(t, "cli")
	k := h.kubectl
	dir := t.TempDir()
	run := func(t *testing.T, name, restart, script string) {
		k.run(t, "run", name, "-n", ns, "--image=none", "--restart="+restart, "--overrides="+overrides("cli"),
			"--env=D="+dir, "--command", "--", "/bin/sh", "-c", script)
	}

	t.Run("RunGetWatchLogsFollow", func(t *testing.T) {
		watch := k.start(t, "get", "pods", "-n", ns, "-l", "run=counter", "-w")
		run(t, "counter", "Never", `for i in 1 2 3 4 5; do echo "count $i"; sleep 0.3; done`)
		// -f returns when the container has ended and its log is written.
		out := k.run(t, "logs", "-f", "-n", ns, "counter")
		assert.Equal(t, "count 1\ncount 2\ncount 3\ncount 4\ncount 5\n", out)
		// The watch shows the pod Completed. Running before it is not
		// certain: the status writer writes the newest status a pod
		// reached while its write waited, and a pod this short may be
		// done by then on a loaded machine.
		watch.waitOutput(t, "counter", "Completed")
	})

	t.Run("LogOptions", func(t *testing.T) {
		run(t, "lines", "Never", `for i in 1 2 3 4 5; do echo "line $i"; done; touch $D/lines.early; `+
			`while [ ! -e $D/lines.go ]; do sleep 0.05; done; echo late; exec sleep 3600`)
		waitForFile(t, filepath.Join(dir, "lines.early"))
		waitPods(t, h.c.Admin(), ns, "run=lines", "Running", allRunning(1))
		early := time.Now()

		assert.Equal(t, "line 4\nline 5\n", k.run(t, "logs", "-n", ns, "lines", "--tail=2"))
		assert.Equal(t, "line 1\nli", k.run(t, "logs", "-n", ns, "lines", "--limit-bytes=9"))
		stamped := strings.Split(strings.TrimSuffix(k.run(t, "logs", "-n", ns, "lines", "--timestamps"), "\n"), "\n")
		require.Len(t, stamped, 5)
		for i, l := range stamped {
			ts, text, ok := strings.Cut(l, " ")
			require.True(t, ok, "%q", l)
			when, err := time.Parse(time.RFC3339Nano, ts)
			require.NoError(t, err, "the timestamp of %q", l)
			assert.WithinDuration(t, early, when, time.Minute)
			assert.Equal(t, fmt.Sprintf("line %d", i+1), text)
		}

		// --since counts whole seconds back from when the agent reads the
		// request. Once the early lines are more than 15 s old, a late
		// line is logged; a --since just short of the early lines' age
		// leaves them out whenever the request is read, and takes the
		// late line if it is read within about 13 s (kubectl's start and
		// the request's way, slow on a loaded machine).
		require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, clusterTimeout, true,
			func(context.Context) (bool, error) { return time.Since(early) > 15*time.Second, nil }))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "lines.go"), nil, 0o600))
		var late time.Time
		require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, clusterTimeout, true,
			func(context.Context) (bool, error) {
				ts, text, _ := strings.Cut(strings.TrimSpace(k.run(t, "logs", "-n", ns, "lines", "--tail=1", "--timestamps")), " ")
				if text != "late" {
					return false, nil
				}
				var err error
				late, err = time.Parse(time.RFC3339Nano, ts)
				return true, err
			}))
		since := int(math.Floor(time.Since(early).Seconds())) - 1
		require.Greater(t, float64(since), time.Since(late).Seconds()+2, "the late line is well within --since")
		assert.Equal(t, "late\n", k.run(t, "logs", "-n", ns, "lines", fmt.Sprintf("--since=%ds", since)))
		assert.Equal(t, "line 1\nline 2\nline 3\nline 4\nline 5\nlate\n", k.run(t, "logs", "-n", ns, "lines", "--since=1h"))
	})

	t.Run("Previous", func(t *testing.T) {
		// The first run fails; the second (restarted at once) stays.
		run(t, "restarter", "Always", `if [ -e $D/restarter.ran ]; then echo second; exec sleep 3600; fi; touch $D/restarter.ran; echo first; exit 1`)
		waitPods(t, h.c.Admin(), ns, "run=restarter", "restarted once and running", func(pods []v1.Pod) bool {
			return len(pods) == 1 && len(pods[0].Status.ContainerStatuses) == 1 &&
				pods[0].Status.ContainerStatuses[0].RestartCount == 1 && pods[0].Status.ContainerStatuses[0].State.Running != nil
		})
		assert.Equal(t, "first\n", k.run(t, "logs", "-n", ns, "restarter", "--previous"))
		assert.Equal(t, "second\n", k.run(t, "logs", "-n", ns, "restarter"))
		_, errOut, err := k.try(t, "logs", "-n", ns, "restarter", "--previous", "-c", "nope")
		require.Error(t, err)
		assert.Contains(t, errOut, "nope")
	})

	t.Run("DeleteGracePeriod", func(t *testing.T) {
		// It ignores SIGTERM (noting it), so only the SIGKILL at the end
		// of the grace period stops it.
		run(t, "stubborn", "Never", `trap 'echo term >> $D/stubborn.term' TERM; touch $D/stubborn.ready; while true; do sleep 0.1; done`)
		pods := waitPods(t, h.c.Admin(), ns, "run=stubborn", "Running", allRunning(1))
		waitForFile(t, filepath.Join(dir, "stubborn.ready"))
		start := time.Now()
		out := k.run(t, "delete", "pod", "-n", ns, "stubborn", "--grace-period=2")
		took := time.Since(start)
		assert.Contains(t, out, `pod "stubborn" deleted`)
		assert.GreaterOrEqual(t, took, 2*time.Second, "kubectl delete waits for the pod to be gone, after its grace period")
		assert.Equal(t, []string{"term"}, lines(t, filepath.Join(dir, "stubborn.term")), "SIGTERM came first")
		waitGone(t, h.c.Admin(), ns, pods[0].UID)
		_, err := h.c.Admin().CoreV1().Pods(ns).Get(testContextFor(t, clusterTimeout), "stubborn", metav1.GetOptions{})
		assert.Error(t, err, "gone from the API server")
	})
}
