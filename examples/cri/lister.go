package cri

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podkit/podkit/podworker"
)

// ListRuntimePods returns every pod this package created that still has a
// sandbox or a container in the runtime, running or not yet removed, found
// with ListPodSandbox and ListContainers by LabelManaged and grouped by the
// pod UID label; sorted by UID. It is the lister housekeeping uses
// (lifecycle.RuntimePodLister) to find orphans: a pod no worker knows is
// killed with a RunningPod update, which SyncTerminatingRuntimePod stops
// and removes. The slice is the caller's; safe for concurrent use.
func (s *Syncer) ListRuntimePods(ctx context.Context) ([]podworker.RuntimePod, error) {
	managed := map[string]string{LabelManaged: "true"}
	sandboxes, err := s.sandboxes.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: managed})
	if err != nil {
		return nil, fmt.Errorf("cri: listing the runtime's sandboxes: %w", err)
	}
	containers, err := s.containers.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: managed})
	if err != nil {
		return nil, fmt.Errorf("cri: listing the runtime's containers: %w", err)
	}
	pods := make(map[types.UID]podworker.RuntimePod)
	add := func(labels map[string]string) {
		uid := types.UID(labels[LabelPodUID])
		if uid == "" {
			return
		}
		if _, ok := pods[uid]; !ok {
			pods[uid] = podworker.RuntimePod{UID: uid, Namespace: labels[LabelPodNamespace], Name: labels[LabelPodName]}
		}
	}
	for _, sb := range sandboxes {
		add(sb.GetLabels())
	}
	for _, c := range containers {
		add(c.GetLabels())
	}
	out := make([]podworker.RuntimePod, 0, len(pods))
	for _, p := range pods {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b podworker.RuntimePod) int { return strings.Compare(string(a.UID), string(b.UID)) })
	return out, nil
}
