package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/podworker"
)

// A container that starts a child in a session of its own (setsid): the
// node shutdown stops the child with its pod, whatever the containment.
func TestShutdownStopsAChildThatLeftItsSession(t *testing.T) {
	t.Parallel()
	for _, cgroups := range []string{"auto", "off"} {
		t.Run(cgroups, func(t *testing.T) {
			t.Parallel()
			opts := testOptions(t)
			opts.cgroups = cgroups
			// Static pod UIDs hash the node name: the subtests' pods differ.
			opts.nodeName = "node-" + cgroups
			opts.manifests = t.TempDir()
			writeManifest(t, opts.manifests, "escaper", `apiVersion: v1
kind: Pod
metadata: {name: escaper}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: example.com/escaper
    command: [sh, -c, "setsid sleep 300 & echo $! > escaped.pid; exec sleep 300"]
`)
			a, out, stop, wait := startAgent(t, opts)
			var pid int
			waitFor(t, a, "the escaped child", func() bool {
				for _, info := range a.workers.Pods() {
					b, err := os.ReadFile(filepath.Join(a.rt.PodDir(info.UID), "scratch", "escaped.pid"))
					if err == nil {
						pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
					}
				}
				return pid > 0
			})
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
			uids := a.uids()
			stop()
			require.NoError(t, wait(), "output:\n%s", out.String())
			requireNoProcess(t, a.rt, uids...)
			assert.Contains(t, out.String(), "containment: ")
		})
	}
}

// The check at the end of a run kills what it finds, rather than only
// reporting it.
func TestTheLastCheckKillsSurvivors(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	opts.manifests = t.TempDir()
	a, err := newAgent(opts, &syncBuffer{}, logr.Discard())
	require.NoError(t, err)
	defer a.rt.Close()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "survivor", Namespace: "default", UID: "survivor-uid"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "main", Command: []string{"sleep", "300"}}}},
	}
	_, err = a.rt.SyncPod(context.Background(), podworker.SyncPodCreate, pod, nil, processruntime.PodStatus{})
	require.NoError(t, err)
	procs, err := a.rt.Processes()
	require.NoError(t, err)
	containers := 0
	for _, p := range procs {
		if !p.Sandbox {
			containers++
		}
	}
	require.Equal(t, 1, containers, "the container's process, and its pod's sandbox if it has one: %+v", procs)

	err = a.checkNoProcessLeft()
	require.Error(t, err)
	// Each is killed, or gone by then: killing a pod's sandbox first takes
	// the rest of the pod with it.
	assert.Regexp(t, fmt.Sprintf(`%d processes .* killed [1-%d] of them`, len(procs), len(procs)), err.Error())
	// The runtime reaps its child and records the exit.
	require.NoError(t, a.rt.SyncTerminatingPod(context.Background(), pod, processruntime.PodStatus{}, 1, nil))
	left, err := a.rt.Processes()
	require.NoError(t, err)
	assert.Empty(t, left)
	st, err := a.rt.PodStatus(context.Background(), pod.UID, time.Time{})
	require.NoError(t, err)
	c, _ := st.Container("main")
	require.NotNil(t, c.Exit)
	assert.Equal(t, int32(137), c.Exit.Code, "it was killed by the check, not by the termination's SIGTERM")
	require.NoError(t, a.rt.SyncTerminatedPod(context.Background(), pod, processruntime.PodStatus{}), "cleaned up, it holds nothing of the machine's")
}
