package main

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/podworker"
)

// reasonEvicted is the status reason of a pod the agent evicted, the
// kubelet's.
const reasonEvicted = "Evicted"

// evictForLocalStorage is what both runtimes' agents do when the volume
// manager finds a pod's emptyDir over its sizeLimit (volume.Options.Evict):
// the pod is killed at once as an eviction (the kubelet's eviction
// manager gives it no grace period: 0, which the pod workers make 1
// second) and ends Failed, reason Evicted, with the manager's message. It
// returns the pod's name ("" for a pod the workers do not know) without
// waiting for the kill, as Evict must; the error is the workers'.
func evictForLocalStorage[T any](workers *podworker.PodWorkers[T], uid types.UID, message string) (string, error) {
	info, ok := workers.Pod(uid)
	if !ok || info.Pod == nil {
		return "", nil
	}
	grace := int64(0)
	err := workers.UpdatePod(context.Background(), podworker.UpdatePodOptions{
		UpdateType: podworker.SyncPodKill,
		Pod:        info.Pod,
		MirrorPod:  info.MirrorPod,
		StartTime:  time.Now(),
		KillPodOptions: &podworker.KillPodOptions{
			Evict:                                    true,
			PodTerminationGracePeriodSecondsOverride: &grace,
			PodStatusFunc: func(s *v1.PodStatus) {
				s.Phase, s.Reason, s.Message = v1.PodFailed, reasonEvicted, message
			},
		},
	})
	if err != nil {
		return "", err
	}
	return info.Pod.Name, nil
}
