package processruntime_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// Every pod's API status names the node's addresses as its hostIP and
// hostIPs, as a kubelet's do; a pod in the host's network (here every pod:
// the runtime has no sandbox) has them as its IPs too, and a pod the
// runtime never synced still has its hostIP.
func TestPodStatusHasTheNodesHostIPs(t *testing.T) {
	t.Parallel()
	rt := openRuntime(t, processruntime.Options{Sandbox: processruntime.SandboxOff, HostIPs: []string{"192.0.2.7", "2001:db8::7"}})
	pod := newPod(v1.RestartPolicyNever, "c", "exec sleep 1000")
	t.Cleanup(func() { terminate(t, rt, pod, 1) })
	_, err := syncPod(rt, pod)
	require.NoError(t, err)

	api := processruntime.APIStatus(pod, status(t, rt, pod.UID))
	assert.Equal(t, "192.0.2.7", api.HostIP)
	assert.Equal(t, []v1.HostIP{{IP: "192.0.2.7"}, {IP: "2001:db8::7"}}, api.HostIPs)
	assert.Equal(t, "192.0.2.7", api.PodIP, "a pod in the host's network has the node's IPs")
	assert.Equal(t, []v1.PodIP{{IP: "192.0.2.7"}, {IP: "2001:db8::7"}}, api.PodIPs)

	unknown, err := rt.PodStatus(context.Background(), types.UID("never-synced"), time.Time{})
	require.NoError(t, err)
	assert.Equal(t, []string{"192.0.2.7", "2001:db8::7"}, unknown.HostIPs)
	assert.Empty(t, unknown.PodIPs)
}

// A sandboxed pod has the node's hostIP but its own network: without a
// pod range it has no IP, never the node's.
func TestSandboxedPodHasTheHostIPButNotItsIPs(t *testing.T) {
	t.Parallel()
	rt := sandboxed(t, processruntime.Options{HostIPs: []string{"192.0.2.8"}})
	pod := newPod(v1.RestartPolicyNever, "c", "exec sleep 1000")
	t.Cleanup(func() { terminate(t, rt, pod, 1) })
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	api := processruntime.APIStatus(pod, status(t, rt, pod.UID))
	assert.Equal(t, "192.0.2.8", api.HostIP)
	assert.Equal(t, []v1.HostIP{{IP: "192.0.2.8"}}, api.HostIPs)
	assert.Empty(t, api.PodIP, "a loopback-only sandbox has no address")
}

// Open refuses a HostIPs entry that is not an address.
func TestOpenRefusesABadHostIP(t *testing.T) {
	t.Parallel()
	_, err := processruntime.Open(processruntime.Options{StateDir: t.TempDir(), Sandbox: processruntime.SandboxOff, HostIPs: []string{"192.0.2.9", "node-1"}})
	assert.EqualError(t, err, `processruntime: HostIPs[1] "node-1" is not an IP address`)
}
