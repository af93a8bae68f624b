package processruntime_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/internal/podrangetest"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// podStats returns the stats of pod uid, failing the test when it has
// none.
func podStats(t *testing.T, rt *processruntime.Runtime, uid types.UID) processruntime.PodStats {
	t.Helper()
	all, err := rt.PodStats(context.Background())
	require.NoError(t, err)
	for _, s := range all {
		if s.UID == uid {
			return s
		}
	}
	t.Fatalf("no stats for pod %s", uid)
	return processruntime.PodStats{}
}

func containerStats(s processruntime.PodStats, name string) processruntime.ContainerStats {
	for _, c := range s.Containers {
		if c.Name == name {
			return c
		}
	}
	return processruntime.ContainerStats{}
}

// A pod's figures move as it works: the CPU time of a container that
// spins grows, the working set of one that holds 64 MiB is at least that,
// and the pod's own figures hold its containers'; each says when it was
// measured. With a pod network, the traffic of its eth0 is counted.
func TestPodStatsMoveWithThePodsWork(t *testing.T) {
	t.Parallel()
	cidr := podrangetest.Range(t)
	for name, sandbox := range map[string]bool{"Host": false, "Sandbox": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var rt *processruntime.Runtime
			if sandbox {
				needBusybox(t) // its web container
				rt = sandboxed(t, processruntime.Options{PodCIDR: cidr, BridgeName: podrangetest.Bridge(t, "pks")})
				t.Cleanup(func() { require.NoError(t, rt.TeardownNetwork(context.Background())) })
			} else {
				rt = openRuntime(t, processruntime.Options{Sandbox: processruntime.SandboxOff})
			}
			containers := []string{"spinner", `while :; do :; done`, "holder", `exec perl -e '$x = "x" x (64 << 20); sleep 1000'`}
			if sandbox {
				// (In the pod's network: the host's port 8080 is left alone.)
				containers = append(containers, "web", `mkdir -p /tmp/www; echo hi > /tmp/www/index.html; exec busybox httpd -f -p 8080 -h /tmp/www`)
			}
			pod := newPod(v1.RestartPolicyNever, containers...)
			for i := 0; i < len(containers); i += 2 {
				waitRunning(t, rt, pod, containers[i])
			}
			t.Cleanup(func() { terminate(t, rt, pod, 1) })

			first := podStats(t, rt, pod.UID)
			assert.Equal(t, pod.Name, first.Name)
			assert.Equal(t, status(t, rt, pod.UID).StartedAt, first.StartTime)
			require.Len(t, first.Containers, len(containers)/2)
			spin := containerStats(first, "spinner")
			require.NotNil(t, spin.CPU, "the spinner's CPU time is measured")
			assert.False(t, spin.CPU.Time.IsZero())
			eventually(t, 30*time.Second, "the spinner's CPU time grows", func() bool {
				c := containerStats(podStats(t, rt, pod.UID), "spinner").CPU
				return c != nil && c.UsageCoreNanoSeconds >= spin.CPU.UsageCoreNanoSeconds+200*uint64(time.Millisecond)
			})
			eventually(t, 30*time.Second, "the holder's working set holds its 64 MiB", func() bool {
				m := containerStats(podStats(t, rt, pod.UID), "holder").Memory
				return m != nil && m.WorkingSetBytes >= 64<<20
			})
			// The pod's figure is read apart from the holder's, and is not
			// the same sum (the pages of perl's binary and libraries are in
			// the holder's Pss but charged to whoever read them first), so
			// it is waited for too: while perl still fills its string, the
			// pod's can be a little behind.
			eventually(t, 30*time.Second, "the pod's working set holds the holder's 64 MiB", func() bool {
				m := podStats(t, rt, pod.UID).Memory
				return m != nil && m.WorkingSetBytes >= 64<<20
			})
			s := podStats(t, rt, pod.UID)
			t.Logf("containment %s; pod cpu %+v memory %+v", rt.Containment(), s.CPU, s.Memory)
			for _, c := range s.Containers {
				t.Logf("container %s: cpu %+v memory %+v", c.Name, c.CPU, c.Memory)
			}
			if assert.NotNil(t, s.CPU, "the pod's CPU time") {
				assert.GreaterOrEqual(t, s.CPU.UsageCoreNanoSeconds, containerStats(s, "spinner").CPU.UsageCoreNanoSeconds)
			}
			if assert.NotNil(t, s.Memory, "the pod's memory") {
				assert.GreaterOrEqual(t, s.Memory.WorkingSetBytes, uint64(64<<20))
			}

			running := rt.RunningPods()
			require.Len(t, running, 1)
			assert.Equal(t, pod.UID, running[0].UID)
			assert.Len(t, running[0].Containers, len(containers)/2)

			if !sandbox {
				assert.Nil(t, s.Network, "a pod of the host's network has no traffic of its own")
				return
			}
			require.NotNil(t, s.Network)
			ip := status(t, rt, pod.UID).PodIPs[0]
			var before uint64
			for _, i := range s.Network.Interfaces {
				assert.NotEqual(t, "lo", i.Name)
				if i.Name == "eth0" {
					before = i.TxBytes
				}
			}
			eventually(t, 10*time.Second, "the pod's server answers the node", func() bool {
				resp, err := http.Get("http://" + ip + ":8080/")
				if err != nil {
					return false
				}
				defer resp.Body.Close()
				_, _ = io.Copy(io.Discard, resp.Body)
				return resp.StatusCode == 200
			})
			var after uint64
			for _, i := range podStats(t, rt, pod.UID).Network.Interfaces {
				if i.Name == "eth0" {
					after = i.TxBytes
				}
			}
			assert.Greater(t, after, before, "eth0 sent the answer")
		})
	}
}

// A pod with nothing running is not measured.
func TestPodStatsLeaveOutWhatDoesNotRun(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add})
	pod := newPod(v1.RestartPolicyNever, "c", "exit 0")
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	t.Cleanup(func() { terminate(t, rt, pod, 1) })
	ev.wait(t, "the exit", exitedEvent(pod.UID, "c", 1))
	all, err := rt.PodStats(context.Background())
	require.NoError(t, err)
	for _, s := range all {
		assert.NotEqual(t, pod.UID, s.UID)
	}
	assert.Empty(t, rt.RunningPods())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	waitRunning(t, rt, newPodRunning(t, rt), "c")
	_, err = rt.PodStats(ctx)
	assert.ErrorIs(t, err, context.Canceled)
}

// newPodRunning starts a pod that sleeps, stopped when the test ends.
func newPodRunning(t *testing.T, rt *processruntime.Runtime) *v1.Pod {
	t.Helper()
	pod := newPod(v1.RestartPolicyNever, "c", "exec sleep 1000")
	t.Cleanup(func() { terminate(t, rt, pod, 1) })
	return pod
}
