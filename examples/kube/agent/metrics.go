package agent

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/kube/nodemetrics"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/podmanager"
	"github.com/podkit/podkit/podworker"
)

// observe exports what the pod workers and the runtime hold into m.
func observe(m *nodemetrics.Metrics, workers *podworker.PodWorkers[processruntime.PodStatus], store *podmanager.Manager, rt runtimeStatuses) error {
	desired := func(uid types.UID) bool {
		_, ok := store.GetPodByUID(uid)
		return ok
	}
	if err := m.ObserveWorkers(workers.Pods, desired); err != nil {
		return err
	}
	return m.ObserveRuntime(func() nodemetrics.RuntimeCounts {
		return runtimeCounts(rt)
	})
}

// runtimeStatuses is what the metrics read of the runtime: the pods it
// holds and their statuses.
type runtimeStatuses interface {
	RuntimePods() []podworker.RuntimePod
	podworker.StatusSource[processruntime.PodStatus]
}

// runtimeCounts counts the pods with a running container and the
// containers by the kubelet's container_state values.
func runtimeCounts(rt runtimeStatuses) nodemetrics.RuntimeCounts {
	counts := nodemetrics.RuntimeCounts{Containers: map[string]int{"running": 0, "exited": 0, "created": 0}}
	ctx := context.Background()
	for _, p := range rt.RuntimePods() {
		st, err := rt.PodStatus(ctx, p.UID, time.Time{})
		if err != nil {
			continue
		}
		if st.Running() {
			counts.Pods++
		}
		for _, list := range [][]processruntime.ContainerStatus{st.InitContainers, st.Containers} {
			for _, c := range list {
				switch c.State {
				case processruntime.ContainerStateRunning:
					counts.Containers["running"]++
				case processruntime.ContainerStateExited:
					counts.Containers["exited"]++
				default:
					counts.Containers["created"]++
				}
			}
		}
	}
	return counts
}

// podRuns says whether the runtime runs pod as its API status would say:
// phase Running. It is the pod-start signal of the metrics.
func podRuns(rt podworker.StatusSource[processruntime.PodStatus]) nodemetrics.RunningFunc {
	return func(ctx context.Context, pod *v1.Pod) bool {
		st, err := rt.PodStatus(ctx, pod.UID, time.Time{})
		return err == nil && processruntime.APIStatus(pod, st).Phase == v1.PodRunning
	}
}
