package hollowruntime_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podkit/podkit/examples/kube/hollowruntime"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/podworker"
)

// A hollow pod's status names the node's addresses (Options.HostIPs) as
// its hostIP and hostIPs, as a kubelet's does; a pod of the pod network
// keeps its own IP, a hostNetwork pod has the node's.
func TestStatusHasTheNodesHostIPs(t *testing.T) {
	ctx := context.Background()
	rt, err := hollowruntime.New(hollowruntime.Options{Clock: testingclock.NewFakeClock(time.Unix(1000, 0)), HostIPs: []string{"192.0.2.7"}})
	require.NoError(t, err)
	t.Cleanup(func() { rt.Close() })
	require.NoError(t, rt.StartNetwork(netipPrefix(t, "10.244.3.0/24"), ""))

	pod := newPod("on-pod-network", "", v1.RestartPolicyAlways)
	hostPod := newPod("in-host-network", "", v1.RestartPolicyAlways)
	hostPod.Spec.HostNetwork = true
	for _, p := range []*v1.Pod{pod, hostPod} {
		_, err := rt.SyncPod(ctx, podworker.SyncPodCreate, p, nil, processruntime.PodStatus{})
		require.NoError(t, err)
	}

	st := apiStatus(t, rt, pod)
	assert.Equal(t, "192.0.2.7", st.HostIP)
	assert.Equal(t, []v1.HostIP{{IP: "192.0.2.7"}}, st.HostIPs)
	assert.Equal(t, "10.244.3.2", st.PodIP)

	hst := apiStatus(t, rt, hostPod)
	assert.Equal(t, "192.0.2.7", hst.HostIP)
	assert.Equal(t, "192.0.2.7", hst.PodIP, "a hostNetwork pod has the node's IP")
	assert.Equal(t, []v1.PodIP{{IP: "192.0.2.7"}}, hst.PodIPs)
}

// New refuses a HostIPs entry that is not an address.
func TestNewRefusesABadHostIP(t *testing.T) {
	_, err := hollowruntime.New(hollowruntime.Options{HostIPs: []string{"node-1"}})
	assert.EqualError(t, err, `hollowruntime: HostIPs[0] "node-1" is not an IP address`)
}
