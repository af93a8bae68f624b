package agent

import (
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/kube/events"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/lifecycle/event"
)

// runtimeEvents takes the process runtime's events (its OnEvent): each is
// recorded as the kubelet's container event, and those that report a
// change (a process started or ended) ask for a sync of the pod, as the
// kubelet's PLEG does, through the agent's one way in for runtime events
// (lifecycle.Agent.RequestSync, which never blocks). The runtime may emit
// events while it is opened, before the lifecycle is built; those are
// recorded against the runtime's own view of the pod and sync nothing.
type runtimeEvents struct {
	recorder event.Recorder
	lc       atomic.Pointer[lifecycle.Agent[processruntime.PodStatus]]
}

// on is the runtime's OnEvent: called from the runtime's goroutines, it
// never blocks.
func (e *runtimeEvents) on(ev processruntime.Event) {
	lc := e.lc.Load()
	var pods podLookup = noPods{}
	if lc != nil {
		pods = lc.Store()
	}
	recordRuntimeEvent(e.recorder, pods, ev)
	if lc != nil && triggersSync(ev) {
		lc.RequestSync(ev.UID)
	}
}

// podLookup finds the desired pod of a UID (the agent's pod store).
type podLookup interface {
	GetPodByUID(uid types.UID) (*v1.Pod, bool)
}

// noPods is the podLookup before the store exists.
type noPods struct{}

func (noPods) GetPodByUID(types.UID) (*v1.Pod, bool) { return nil, false }

// recordRuntimeEvent records the kubelet's event for a process runtime
// event, on the container it concerns:
//
//	ContainerStarted                 Normal  Created  "Container created"
//	                                 Normal  Started  "Container started"
//	ContainerExited (start failure)  Warning Failed   "Error: <the runtime's error>"
//	ContainerKilling                 Normal  Killing  "Stopping container <name>" (or the runtime's why)
//	ContainerBackOff                 Warning BackOff  "Back-off restarting failed container <name> in pod <name>_<namespace>(<uid>)"
//	ContainerFailed                  Warning Failed   "Error: <why it cannot be created>"
//	PodWarning                       Warning <its reason> <its message>, on the pod or its container
//
// Other events record nothing (the kubelet records no event for an exit;
// BackOff tells of a crash loop). It is called from the runtime's
// goroutines (OnEvent) and never blocks: the recorder queues.
func recordRuntimeEvent(rec event.Recorder, pods podLookup, ev processruntime.Event) {
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
	ref := events.ContainerRef(pod, ev.Container)
	switch ev.Type {
	case processruntime.ContainerStarted:
		rec.Eventf(ref, v1.EventTypeNormal, events.ReasonCreated, "%s", events.MessageCreated)
		rec.Eventf(ref, v1.EventTypeNormal, events.ReasonStarted, "%s", events.MessageStarted)
	case processruntime.ContainerExited:
		if exit := ev.Exit(); exit != nil && exit.Reason == processruntime.ReasonStartError {
			rec.Eventf(ref, v1.EventTypeWarning, events.ReasonFailed, "%s", events.FailedMessage(exit.Message))
		}
	case processruntime.ContainerKilling:
		msg := ev.Message // why SyncPod kills it (a failed probe or hook)
		if msg == "" {
			msg = events.KillingMessage(ev.Container)
		}
		rec.Eventf(ref, v1.EventTypeNormal, events.ReasonKilling, "%s", msg)
	case processruntime.ContainerBackOff:
		rec.Eventf(ref, v1.EventTypeWarning, events.ReasonBackOff, "%s", events.BackOffMessage(pod, ev.Container))
	case processruntime.ContainerFailed:
		rec.Eventf(ref, v1.EventTypeWarning, events.ReasonFailed, "%s", events.FailedMessage(ev.Message))
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
// pod, as the kubelet's PLEG events do: a process that ended
// (ContainerExited, PodStopped). Killing and BackOff come from the hooks
// themselves and must not: a SyncPod in backoff would call itself. Nor
// does ContainerStarted: both runtimes start containers only within a
// SyncPod of their pod, which goes on until nothing is left to start and
// returns the status with the container running, so a sync asked for by
// the start would only run that SyncPod again (every pod's start was two
// SyncPods, the second at once, while the node is busiest).
func triggersSync(ev processruntime.Event) bool {
	switch ev.Type {
	case processruntime.ContainerExited, processruntime.PodStopped:
		return true
	}
	return false
}
