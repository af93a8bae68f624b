package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/kube/events"
	"github.com/podkit/podkit/examples/kube/eviction"
	"github.com/podkit/podkit/lifecycle/admission"
	"github.com/podkit/podkit/lifecycle/nodeshutdown"
	"github.com/podkit/podkit/podworker"
)

// errShuttingDown is the Node's NotReady message while ShutdownNode runs,
// the kubelet's.
var errShuttingDown = errors.New("node is shutting down")

// health is the heartbeat's view of the node: not ready once ShutdownNode
// was called.
func (a *Agent) health() error {
	if a.shuttingDown.Load() {
		return errShuttingDown
	}
	return nil
}

// ShutdownNode stops every pod of the node for a shutdown of the machine,
// as the kubelet's node shutdown manager does: it records a Normal Shutdown
// event on the Node, has the heartbeat post the Node NotReady ("node is
// shutting down", with a NodeNotReady event) from its next beat on, and
// lets the lifecycle's node shutdown manager (package
// lifecycle/nodeshutdown) admit no new pod and stop the pods, those that
// are not critical first, within budget. Each pod's final status is Failed
// (unless it succeeded), reason Terminated, with a DisruptionTarget
// condition (reason TerminationByKubelet), shown from the moment its
// termination starts; each container gets a Killing event.
//
// It returns the manager's report and error (see
// nodeshutdown.Manager.Shutdown). Run goes on; stop it afterwards. Call it
// from any goroutine while Run runs.
func (a *Agent) ShutdownNode(ctx context.Context, budget nodeshutdown.Budget) (nodeshutdown.Report, error) {
	if !a.shuttingDown.Swap(true) {
		a.recorder.Eventf(events.NodeRef(a.nodeObject()), v1.EventTypeNormal, events.ReasonNodeShutdown, "%s", events.MessageNodeShutdown)
	}
	return a.lc.NodeShutdown().Shutdown(ctx, budget)
}

// nodeObject is the registered Node, or, before Run registered it, the
// one it would register.
func (a *Agent) nodeObject() *v1.Node {
	if n := a.node.Load(); n != nil {
		return n
	}
	return NodeObject(a.cfg.NodeName)
}

// EvictPod evicts the pod uid from the node, as the kubelet's eviction
// manager evicts a pod it chose: it records a Warning Evicted event with
// message on the pod, and kills the pod as an eviction, with gracePeriod
// seconds (at most the pod's own; 0 means 1) and the final status of
// eviction.Status: phase Failed, reason Evicted, message, and a
// DisruptionTarget condition (reason TerminationByKubelet), shown from the
// moment its termination starts. The pod stays in the API server, Failed,
// as a pod the kubelet evicted does. Which pod to evict, and when, is the
// caller's choice: podkit has no resource-pressure signals of its own.
//
// It returns nil once the pod's containers are stopped; ctx.Err() if ctx
// ends first (the eviction goes on); an error if the agent has no such pod,
// or the pod workers refuse the kill. Call it from any goroutine while Run
// runs.
func (a *Agent) EvictPod(ctx context.Context, uid types.UID, message string, gracePeriod int64) error {
	done, err := a.startEviction(ctx, uid, message, gracePeriod)
	if err != nil {
		return fmt.Errorf("agent: EvictPod: %w", err)
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// evictForLocalStorage is the volume manager's Options.Evict: a pod whose
// emptyDir holds more than its sizeLimit is evicted at once (the
// kubelet's eviction manager gives such a pod no grace period: 0, which
// the pod workers make 1 second), with the manager's message. It returns
// without waiting, as Evict must.
func (a *Agent) evictForLocalStorage(uid types.UID, message string) {
	if _, err := a.startEviction(context.Background(), uid, message, 0); err != nil {
		a.log.Error(err, "Couldn't evict a pod over its emptyDir sizeLimit", "podUID", uid)
	}
}

// startEviction records the Evicted event and hands the pod workers the
// eviction's kill; the channel closes once the pod's containers are
// stopped.
func (a *Agent) startEviction(ctx context.Context, uid types.UID, message string, gracePeriod int64) (<-chan struct{}, error) {
	workers := a.lc.Workers()
	if gracePeriod < 0 {
		return nil, fmt.Errorf("grace period %d is negative", gracePeriod)
	}
	info, ok := workers.Pod(uid)
	if !ok || info.Pod == nil {
		return nil, fmt.Errorf("the node has no pod %s", uid)
	}
	a.recorder.Eventf(info.Pod, v1.EventTypeWarning, events.ReasonEvicted, "%s", message)
	done := make(chan struct{})
	grace := gracePeriod
	err := workers.UpdatePod(ctx, podworker.UpdatePodOptions{
		UpdateType: podworker.SyncPodKill,
		Pod:        info.Pod,
		MirrorPod:  info.MirrorPod,
		StartTime:  time.Now(),
		KillPodOptions: &podworker.KillPodOptions{
			CompletedCh:                              done,
			Evict:                                    true,
			PodStatusFunc:                            eviction.Status(message, nil),
			PodTerminationGracePeriodSecondsOverride: &grace,
		},
	})
	if err != nil {
		return nil, err
	}
	return done, nil
}

// admitResources is the kubelet's resource admission for the registered
// Node: a pod whose CPU or memory requests do not fit the Node's
// allocatable resources (less what the other active pods request) is
// rejected with OutOfcpu or OutOfmemory, and a pod beyond the allocatable
// pod count with OutOfpods. A registered Node without allocatable
// resources is judged by NodeObject's. It is an admission.Handler of the
// sync loop, which starts only once Run registered the Node.
func (a *Agent) admitResources(ctx context.Context, attrs *admission.Attributes) admission.Result {
	node := a.nodeObject()
	allocatable := node.Status.Allocatable
	if len(allocatable) == 0 {
		allocatable = NodeObject(node.Name).Status.Allocatable
	}
	handlers := admission.Chain{}
	if fit, err := admission.NewResourceFitHandler(func() v1.ResourceList { return allocatable }); err == nil {
		handlers = append(handlers, fit)
	}
	if pods, ok := allocatable[v1.ResourcePods]; ok {
		if maxPods, err := admission.NewMaxPodsHandler(int(pods.Value())); err == nil {
			handlers = append(handlers, maxPods)
		}
	}
	return handlers.Admit(ctx, attrs)
}

// allocatable is the registered Node's allocatable resources (NodeObject's
// when it has none): what a container's resourceFieldRef reads for a limit
// it leaves unset, as on a kubelet. Called from the hooks' goroutines.
func (a *Agent) allocatable() v1.ResourceList {
	node := a.nodeObject()
	if len(node.Status.Allocatable) == 0 {
		return NodeObject(node.Name).Status.Allocatable
	}
	return node.Status.Allocatable
}
