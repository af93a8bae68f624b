package virtualkubelet_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	vk "github.com/podkit/podkit/examples/virtualkubelet"
	"github.com/podkit/podkit/examples/virtualkubelet/simcloud"
	"github.com/podkit/podkit/podworker"
)

// The kubelet's rule, as a provider can keep it: a provider killed with
// pods running in the backend (which keeps them) and started again stops
// none of the pods the API server still has, however long
// virtual-kubelet takes to hand them over again, and adopts them when it
// does; a pod the API server no longer has is stopped as an orphan, by
// the assembly's housekeeping.
func TestARestartedProviderKillsNothingTheAPIServerStillHas(t *testing.T) {
	t.Parallel()
	cloud, err := simcloud.New(simcloud.Options{})
	require.NoError(t, err)
	index := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	opts := vk.Options{
		Pods:                 corev1listers.NewPodLister(index),
		ResyncInterval:       20 * time.Millisecond,
		HousekeepingInterval: 20 * time.Millisecond,
		BackOff:              5 * time.Millisecond,
		MaxBackOff:           50 * time.Millisecond,
	}
	run := func(p *vk.Provider) (kill func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		return func() {
			cancel()
			require.NoError(t, <-done)
		}
	}
	d := &direct{t: t, ctx: t.Context(), cloud: cloud}

	// The first run: two pods run in the backend.
	first, err := vk.New(cloud, opts)
	require.NoError(t, err)
	kill := run(first)
	kept, gone := newPod("kept", "uid-kept"), newPod("gone", "uid-gone")
	for _, pod := range []*v1.Pod{kept, gone} {
		require.NoError(t, index.Add(pod))
		require.NoError(t, first.CreatePod(d.ctx, pod))
	}
	d.eventually("both pods to run", func() bool { return d.remote("uid-kept").Running() && d.remote("uid-gone").Running() })
	kill()
	require.True(t, d.remote("uid-kept").Running(), "killing the provider left its pods running")

	// While it is down, the API server loses one of them.
	require.NoError(t, index.Delete(gone))

	// The second run: virtual-kubelet has not handed anything over yet.
	second, err := vk.New(cloud, opts)
	require.NoError(t, err)
	d.provider = second
	defer run(second)()
	lists := len(cloud.Calls(simcloud.OpList))
	d.eventually("three housekeeping passes", func() bool { return len(cloud.Calls(simcloud.OpList)) >= lists+3 })
	d.eventually("the pod the API server lost to be removed", func() bool { return d.remote("uid-gone") == nil })
	assert.True(t, d.remote("uid-kept").Running(), "a pod the API server still has is not taken for an orphan")
	for _, c := range cloud.Calls(simcloud.OpStop, simcloud.OpRemove) {
		assert.NotEqual(t, "uid-kept", string(c.UID), "and not stopped: %v", c)
	}

	// virtual-kubelet hands it over: it is adopted, not created again.
	creates := len(cloud.Calls(simcloud.OpCreate))
	require.NoError(t, second.CreatePod(d.ctx, kept))
	d.waitStage("uid-kept", func(i podworker.PodInfo, ok bool) bool { return ok && i.Started && i.LastSyncTime.After(time.Time{}) })
	assert.True(t, d.remote("uid-kept").Running())
	assert.Len(t, cloud.Calls(simcloud.OpCreate), creates, "adopted: no second create")
}
