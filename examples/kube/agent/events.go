package agent

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/kube"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/lifecycle"
)

// podLookup finds the desired pod of a UID (the agent's pod store).
type podLookup interface {
	GetPodByUID(uid types.UID) (*v1.Pod, bool)
}

// recordRuntimeEvent records the kubelet's event for a process runtime
// event, on the container it concerns:
//
//	ContainerStarted                 Normal  Created  "Container created"
//	                                 Normal  Started  "Container started"
//	ContainerExited (start failure)  Warning Failed   "Error: <the runtime's error>"
//	ContainerKilling                 Normal  Killing  "Stopping container <name>"
//	ContainerBackOff                 Warning BackOff  "Back-off restarting failed container <name> in pod <name>_<namespace>(<uid>)"
//	ContainerFailed                  Warning Failed   "Error: <why it cannot be created>"
//	PodWarning                       Warning <its reason> <its message>, on the pod or its container
//
// Other events record nothing (the kubelet records no event for an exit;
// BackOff tells of a crash loop). It is called from the runtime's
// goroutines (OnEvent) and never blocks: the recorder queues.
func recordRuntimeEvent(rec lifecycle.Recorder, pods podLookup, ev processruntime.Event) {
	pod, ok := pods.GetPodByUID(ev.UID)
	if !ok {
		pod = eventPod(ev)
	}
	if ev.Container == "" {
		if ev.Type == processruntime.PodWarning {
			rec.Eventf(pod, v1.EventTypeWarning, ev.Reason, "%s", ev.Message)
		}
		return
	}
	ref := kube.ContainerRef(pod, ev.Container)
	switch ev.Type {
	case processruntime.ContainerStarted:
		rec.Eventf(ref, v1.EventTypeNormal, kube.ReasonCreated, "%s", kube.MessageCreated)
		rec.Eventf(ref, v1.EventTypeNormal, kube.ReasonStarted, "%s", kube.MessageStarted)
	case processruntime.ContainerExited:
		if exit := ev.Exit(); exit != nil && exit.Reason == processruntime.ReasonStartError {
			rec.Eventf(ref, v1.EventTypeWarning, kube.ReasonFailed, "%s", kube.FailedMessage(exit.Message))
		}
	case processruntime.ContainerKilling:
		rec.Eventf(ref, v1.EventTypeNormal, kube.ReasonKilling, "%s", kube.KillingMessage(ev.Container))
	case processruntime.ContainerBackOff:
		rec.Eventf(ref, v1.EventTypeWarning, kube.ReasonBackOff, "%s", kube.BackOffMessage(pod, ev.Container))
	case processruntime.ContainerFailed:
		rec.Eventf(ref, v1.EventTypeWarning, kube.ReasonFailed, "%s", kube.FailedMessage(ev.Message))
	case processruntime.PodWarning:
		rec.Eventf(ref, v1.EventTypeWarning, ev.Reason, "%s", ev.Message)
	}
}

// eventPod stands for a pod the agent no longer (or never) had, known only
// to the runtime: enough of it to refer to its container.
func eventPod(ev processruntime.Event) *v1.Pod {
	pod := &v1.Pod{}
	pod.Namespace, pod.Name, pod.UID = ev.Namespace, ev.Name, ev.UID
	if ev.Container == "" {
		return pod
	}
	c := v1.Container{Name: ev.Container}
	if ev.Init {
		pod.Spec.InitContainers = []v1.Container{c}
	} else {
		pod.Spec.Containers = []v1.Container{c}
	}
	return pod
}

// triggersSync reports whether a runtime event calls for a sync of its
// pod, as the kubelet's PLEG events do. Killing and BackOff come from the
// hooks themselves and must not: a SyncPod in backoff would call itself.
func triggersSync(ev processruntime.Event) bool {
	switch ev.Type {
	case processruntime.ContainerStarted, processruntime.ContainerExited, processruntime.PodStopped:
		return true
	}
	return false
}
