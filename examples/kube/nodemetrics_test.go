package kube_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podkit/podkit/examples/kube/nodemetrics"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
)

// TestWorkingPods: kubelet_working_pods counts workers as the kubelet
// does: by lifecycle (the kubelet's work type of the worker's stage), by
// whether config wants the pod, and by static.
func TestWorkingPods(t *testing.T) {
	m, err := nodemetrics.New(nodemetrics.Options{NodeName: "n"})
	require.NoError(t, err)
	workers := []podworker.PodInfo{
		{UID: "a", Stage: podworker.StageNotStarted},
		{UID: "b", Stage: podworker.StageSyncing},
		{UID: "static", Stage: podworker.StageSyncing, Static: true},
		{UID: "gone", Stage: podworker.StageTerminationRequested},
		{UID: "orphan", Stage: podworker.StageFinished, RuntimeOnly: true},
	}
	desired := map[types.UID]bool{"a": true, "b": true, "static": true}
	require.NoError(t, m.ObserveWorkers(func() []podworker.PodInfo { return workers },
		func(uid types.UID) bool { return desired[uid] }))
	require.Error(t, m.ObserveWorkers(func() []podworker.PodInfo { return nil }, func(types.UID) bool { return false }), "only once")

	want := `
# HELP kubelet_working_pods Number of pods the kubelet is actually running, broken down by lifecycle phase, whether the pod is desired, orphaned, or runtime only (also orphaned), and whether the pod is static. An orphaned pod has been removed from local configuration or force deleted in the API and consumes resources that are not otherwise visible.
# TYPE kubelet_working_pods gauge
kubelet_working_pods{config="desired",lifecycle="sync",static=""} 2
kubelet_working_pods{config="desired",lifecycle="sync",static="true"} 1
kubelet_working_pods{config="desired",lifecycle="terminated",static=""} 0
kubelet_working_pods{config="desired",lifecycle="terminated",static="true"} 0
kubelet_working_pods{config="desired",lifecycle="terminating",static=""} 0
kubelet_working_pods{config="desired",lifecycle="terminating",static="true"} 0
kubelet_working_pods{config="orphan",lifecycle="sync",static=""} 0
kubelet_working_pods{config="orphan",lifecycle="sync",static="true"} 0
kubelet_working_pods{config="orphan",lifecycle="terminated",static=""} 0
kubelet_working_pods{config="orphan",lifecycle="terminated",static="true"} 0
kubelet_working_pods{config="orphan",lifecycle="terminating",static=""} 1
kubelet_working_pods{config="orphan",lifecycle="terminating",static="true"} 0
kubelet_working_pods{config="runtime_only",lifecycle="sync",static="unknown"} 0
kubelet_working_pods{config="runtime_only",lifecycle="terminated",static="unknown"} 1
kubelet_working_pods{config="runtime_only",lifecycle="terminating",static="unknown"} 0
`
	require.NoError(t, testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "kubelet_working_pods"))
}

// TestMetricsSyncer: the wrapped syncer times each hook under the
// kubelet's operation types and observes a pod's start once, from its
// config.seen annotation to the first sync after which it runs.
func TestMetricsSyncer(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	m, err := nodemetrics.New(nodemetrics.Options{NodeName: "n", Clock: clock})
	require.NoError(t, err)
	running := false
	inner := podworker.PodSyncerFuncs[struct{}]{
		SyncPodFunc: func(context.Context, podworker.UpdateType, *v1.Pod, *v1.Pod, struct{}) (bool, error) {
			clock.Step(200 * time.Millisecond)
			return false, nil
		},
		SyncTerminatingPodFunc: func(context.Context, *v1.Pod, struct{}, int64, func(*v1.PodStatus)) error {
			clock.Step(3 * time.Second)
			return nil
		},
		SyncTerminatedPodFunc: func(context.Context, *v1.Pod, struct{}) error { return errors.New("busy") },
	}
	s := nodemetrics.WrapSyncer[struct{}](inner, m, func(context.Context, *v1.Pod) bool { return running })
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u", Annotations: map[string]string{
		mirror.ConfigFirstSeenAnnotationKey: clock.Now().Add(-time.Second).Format(time.RFC3339Nano),
	}}}
	ctx := context.Background()
	// inner has no runtime hook (PodSyncerFuncs without the func): the
	// wrapper's says so too, and times no kill for it.
	require.ErrorIs(t, podworker.SyncTerminatingRuntimePod(ctx, s, podworker.RuntimePod{UID: "orphan"}), podworker.ErrNotImplemented)
	_, err = s.SyncPod(ctx, podworker.SyncPodCreate, pod, nil, struct{}{})
	require.NoError(t, err)
	running = true
	_, err = s.SyncPod(ctx, podworker.SyncPodSync, pod, nil, struct{}{}) // starts: 1 s + 0.4 s after first seen
	require.NoError(t, err)
	_, err = s.SyncPod(ctx, podworker.SyncPodSync, pod, nil, struct{}{}) // already started
	require.NoError(t, err)
	require.NoError(t, s.SyncTerminatingPod(ctx, pod, struct{}{}, 30, nil))
	require.Error(t, s.SyncTerminatedPod(ctx, pod, struct{}{}))

	want := `
# HELP kubelet_pod_start_duration_seconds Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run
# TYPE kubelet_pod_start_duration_seconds histogram
kubelet_pod_start_duration_seconds_bucket{le="0.5"} 0
kubelet_pod_start_duration_seconds_bucket{le="1"} 0
kubelet_pod_start_duration_seconds_bucket{le="2"} 1
kubelet_pod_start_duration_seconds_bucket{le="3"} 1
kubelet_pod_start_duration_seconds_bucket{le="4"} 1
kubelet_pod_start_duration_seconds_bucket{le="5"} 1
kubelet_pod_start_duration_seconds_bucket{le="6"} 1
kubelet_pod_start_duration_seconds_bucket{le="8"} 1
kubelet_pod_start_duration_seconds_bucket{le="10"} 1
kubelet_pod_start_duration_seconds_bucket{le="20"} 1
kubelet_pod_start_duration_seconds_bucket{le="30"} 1
kubelet_pod_start_duration_seconds_bucket{le="45"} 1
kubelet_pod_start_duration_seconds_bucket{le="60"} 1
kubelet_pod_start_duration_seconds_bucket{le="120"} 1
kubelet_pod_start_duration_seconds_bucket{le="180"} 1
kubelet_pod_start_duration_seconds_bucket{le="240"} 1
kubelet_pod_start_duration_seconds_bucket{le="300"} 1
kubelet_pod_start_duration_seconds_bucket{le="360"} 1
kubelet_pod_start_duration_seconds_bucket{le="480"} 1
kubelet_pod_start_duration_seconds_bucket{le="600"} 1
kubelet_pod_start_duration_seconds_bucket{le="900"} 1
kubelet_pod_start_duration_seconds_bucket{le="1200"} 1
kubelet_pod_start_duration_seconds_bucket{le="1800"} 1
kubelet_pod_start_duration_seconds_bucket{le="2700"} 1
kubelet_pod_start_duration_seconds_bucket{le="3600"} 1
kubelet_pod_start_duration_seconds_bucket{le="+Inf"} 1
kubelet_pod_start_duration_seconds_sum 1.4
kubelet_pod_start_duration_seconds_count 1
`
	require.NoError(t, testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "kubelet_pod_start_duration_seconds"))

	counts := map[string]uint64{}
	sums := map[string]float64{}
	fams, err := m.Registry().Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != "kubelet_pod_worker_duration_seconds" {
			continue
		}
		for _, mt := range f.GetMetric() {
			op := mt.GetLabel()[0].GetValue()
			counts[op] = mt.GetHistogram().GetSampleCount()
			sums[op] = mt.GetHistogram().GetSampleSum()
		}
	}
	assert.Equal(t, map[string]uint64{"create": 1, "sync": 2, "kill": 1, "terminated": 1}, counts)
	assert.InDelta(t, 0.2, sums["create"], 1e-9)
	assert.InDelta(t, 0.4, sums["sync"], 1e-9)
	assert.InDelta(t, 3, sums["kill"], 1e-9)
}

// TestMetricsSyncerKeepsTheRuntimeHook: the wrapper stops runtime pods with
// the wrapped syncer's hook and times each stop as a kill.
func TestMetricsSyncerKeepsTheRuntimeHook(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	m, err := nodemetrics.New(nodemetrics.Options{NodeName: "n", Clock: clock})
	require.NoError(t, err)
	var killed int
	inner := podworker.PodSyncerFuncs[struct{}]{SyncTerminatingRuntimePodFunc: func(context.Context, podworker.RuntimePod) error {
		killed++
		clock.Step(time.Second)
		return nil
	}}
	s := nodemetrics.WrapSyncer[struct{}](inner, m, func(context.Context, *v1.Pod) bool { return false })
	require.NoError(t, podworker.SyncTerminatingRuntimePod(context.Background(), s, podworker.RuntimePod{UID: "orphan"}))
	assert.Equal(t, 1, killed)
	fams, err := m.Registry().Gather()
	require.NoError(t, err)
	var kills uint64
	var sum float64
	for _, f := range fams {
		if f.GetName() != "kubelet_pod_worker_duration_seconds" {
			continue
		}
		for _, mt := range f.GetMetric() {
			if mt.GetLabel()[0].GetValue() == "kill" {
				kills, sum = mt.GetHistogram().GetSampleCount(), mt.GetHistogram().GetSampleSum()
			}
		}
	}
	assert.Equal(t, uint64(1), kills)
	assert.InDelta(t, 1, sum, 1e-9)
}
