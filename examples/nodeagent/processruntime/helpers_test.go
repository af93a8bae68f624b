package processruntime_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/podworker"
)

// openRuntime opens a runtime over a fresh state directory (unless opts
// names one) and closes it when the test ends, removing its cgroup.
func openRuntime(t *testing.T, opts processruntime.Options) *processruntime.Runtime {
	t.Helper()
	if opts.StateDir == "" {
		opts.StateDir = t.TempDir()
	}
	rt, err := processruntime.Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		rt.Close()
		removeTestCgroup(t, rt)
	})
	return rt
}

// events collects a runtime's events and lets a test wait for one.
type events struct {
	mu      sync.Mutex
	list    []processruntime.Event
	changed chan struct{}
}

func newEvents() *events { return &events{changed: make(chan struct{})} }

// add is the runtime's OnEvent.
func (e *events) add(ev processruntime.Event) {
	e.mu.Lock()
	e.list = append(e.list, ev)
	close(e.changed)
	e.changed = make(chan struct{})
	e.mu.Unlock()
}

// wait blocks until an event matching match has been seen, and returns it.
func (e *events) wait(t *testing.T, what string, match func(processruntime.Event) bool) processruntime.Event {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		e.mu.Lock()
		for _, ev := range e.list {
			if match(ev) {
				e.mu.Unlock()
				return ev
			}
		}
		ch := e.changed
		e.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("no %s event within 10s", what)
		}
	}
}

// count returns how many events match.
func (e *events) count(match func(processruntime.Event) bool) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.list {
		if match(ev) {
			n++
		}
	}
	return n
}

func exitedEvent(uid types.UID, container string, n int) func(processruntime.Event) bool {
	seen := 0
	return func(ev processruntime.Event) bool {
		if ev.UID == uid && ev.Type == processruntime.ContainerExited && ev.Container == container {
			seen++
			return seen >= n
		}
		return false
	}
}

var podSeq atomic.Int64

// newPod returns a pod with the given containers (name, shell script) run
// by sh -c.
func newPod(policy v1.RestartPolicy, containers ...string) *v1.Pod {
	n := podSeq.Add(1)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", n), Namespace: "test", UID: types.UID(fmt.Sprintf("uid-%d-%d", n, time.Now().UnixNano()))},
		Spec:       v1.PodSpec{RestartPolicy: policy},
	}
	for i := 0; i+1 < len(containers); i += 2 {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: containers[i], Image: "example.com/" + containers[i], Command: []string{"sh", "-c", containers[i+1]}})
	}
	return pod
}

// processes returns the live processes carrying uid.
func processes(t *testing.T, uid types.UID) []processruntime.Process {
	t.Helper()
	found, err := processruntime.ScanProcesses(func(u string) bool { return u == string(uid) })
	require.NoError(t, err)
	return found
}

// containerProcesses returns the live processes of uid's containers:
// those of processes but the pod's sandbox.
func containerProcesses(t *testing.T, uid types.UID) []processruntime.Process {
	t.Helper()
	var out []processruntime.Process
	for _, p := range processes(t, uid) {
		if !p.Sandbox {
			out = append(out, p)
		}
	}
	return out
}

// termIgnored reports whether the process ignores SIGTERM (bit 15 of the
// SigIgn mask in /proc/PID/status).
func termIgnored(pid int) bool {
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(status), "\n") {
		if mask, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			v, err := strconv.ParseUint(strings.TrimSpace(mask), 16, 64)
			return err == nil && v&(1<<(15-1)) != 0
		}
	}
	return false
}

// ignoringTerm reports whether container's main process in pod uid runs
// and has set its SIGTERM trap, so that only SIGKILL ends it.
func ignoringTerm(t *testing.T, uid types.UID, container string) bool {
	t.Helper()
	for _, p := range processes(t, uid) {
		if p.Leader && p.Container == container && termIgnored(p.PID) {
			return true
		}
	}
	return false
}

// eventually polls cond every 20ms until it holds, failing after limit.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			if !cond() {
				t.Fatalf("%s: not within %v", what, limit)
			}
			return
		}
	}
}

// terminate stops and removes pod, failing the test on error.
func terminate(t *testing.T, rt *processruntime.Runtime, pod *v1.Pod, grace int64) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, rt.SyncTerminatingPod(ctx, pod, processruntime.PodStatus{}, grace, nil))
	require.NoError(t, rt.SyncTerminatedPod(ctx, pod, processruntime.PodStatus{}))
}

// syncPod calls SyncPod and returns terminal and the error.
func syncPod(rt *processruntime.Runtime, pod *v1.Pod) (bool, error) {
	return rt.SyncPod(context.Background(), podworker.SyncPodSync, pod, nil, processruntime.PodStatus{})
}

func status(t *testing.T, rt *processruntime.Runtime, uid types.UID) processruntime.PodStatus {
	t.Helper()
	st, err := rt.PodStatus(context.Background(), uid, time.Time{})
	require.NoError(t, err)
	return st
}
