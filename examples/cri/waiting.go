package cri

import (
	"errors"
	"fmt"
	"maps"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/lifecycle/podenv"
)

// Waiting is why the syncer could not create (or start) an instance of a
// container: the state the API status shows for it, with the kubelet's
// reason, until an instance with a higher attempt exists. It lives in the
// syncer's memory only (as the kubelet's reason cache): an agent that
// restarts shows ContainerCreating until its next attempt fails again.
type Waiting struct {
	// Reason is the kubelet's: CreateContainerConfigError (the environment,
	// a mount, or a feature the syncer lacks), CrashLoopBackOff (a restart
	// waits out its back-off), PostStartHookError (the postStart hook
	// failed and the container was killed).
	Reason string
	// Message says why; it may hold a hook's output (never a secret's
	// value: podenv's messages name keys only), so it goes in the status,
	// and an event says only Reason's usual text.
	Message string
	// Attempt is the CRI attempt the failure was for: the state applies
	// while no instance of that attempt or a later one exists.
	Attempt uint32
}

// Reasons of the Waiting states the syncer sets, the kubelet's.
const (
	// ReasonCreateContainerConfigError: the container's configuration
	// (environment, mounts) cannot be built now, or the pod needs a
	// feature the syncer was not given; retried at the next sync.
	ReasonCreateContainerConfigError = podenv.ReasonCreateContainerConfigError
	// ReasonCrashLoopBackOff: the container exited and its restart waits
	// out the back-off.
	ReasonCrashLoopBackOff = "CrashLoopBackOff"
)

// Event reasons the syncer records (Options.Recorder), the kubelet's.
const (
	// EventFailed (Warning): a container could not be created; the
	// message is "Error: " and the waiting message.
	EventFailed = "Failed"
	// EventKilling (Normal): a container is stopped alone: its liveness
	// or startup probe failed ("Container NAME failed liveness probe,
	// will be restarted"), or its postStart hook did
	// ("FailedPostStartHook").
	EventKilling = "Killing"
	// EventBackOff (Warning): a restart waits out its back-off.
	EventBackOff = "BackOff"
)

// waitingError is a container that cannot be created now, with the
// kubelet's reason: startNew's error, which SyncPod records as the
// container's Waiting state and returns, so the engine retries.
type waitingError struct {
	container, reason, message string
	err                        error
}

func (e *waitingError) Error() string {
	return fmt.Sprintf("cri: container %q waits (%s): %s", e.container, e.reason, e.message)
}

func (e *waitingError) Unwrap() error { return e.err }

// asWaiting turns a podenv ConfigError into a waitingError; other errors
// are returned as they are.
func asWaiting(container string, err error) error {
	var ce *podenv.ConfigError
	if errors.As(err, &ce) {
		return &waitingError{container: container, reason: ce.Reason(), message: ce.Message, err: err}
	}
	return err
}

// waitingStates is the syncer's memory of the containers that wait, by pod
// UID and container name.
type waitingStates struct {
	mu sync.Mutex
	// pods holds the Waiting of each container that waits; an entry is
	// removed when an instance of the container is created, and the pod's
	// when the pod is forgotten.
	pods map[types.UID]map[string]Waiting
}

func newWaitingStates() *waitingStates {
	return &waitingStates{pods: make(map[types.UID]map[string]Waiting)}
}

func (w *waitingStates) set(uid types.UID, container string, st Waiting) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pods[uid] == nil {
		w.pods[uid] = make(map[string]Waiting)
	}
	w.pods[uid][container] = st
}

func (w *waitingStates) clear(uid types.UID, container string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.pods[uid], container)
	if len(w.pods[uid]) == 0 {
		delete(w.pods, uid)
	}
}

// of returns a copy of the pod's Waiting states, nil when none.
func (w *waitingStates) of(uid types.UID) map[string]Waiting {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.pods[uid])
}

func (w *waitingStates) forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.pods, uid)
}

// wait records that c of pod waits (the Waiting state for its next
// attempt) and, for a configuration error, the kubelet's Failed event.
func (s *Syncer) wait(pod *v1.Pod, status *PodStatus, c *v1.Container, reason, message string) {
	s.waiting.set(pod.UID, c.Name, Waiting{Reason: reason, Message: message, Attempt: status.nextAttempt(c.Name)})
	switch reason {
	case ReasonCreateContainerConfigError:
		s.containerEvent(pod, c.Name, v1.EventTypeWarning, EventFailed, "Error: "+message)
	case ReasonCrashLoopBackOff:
		s.containerEvent(pod, c.Name, v1.EventTypeWarning, EventBackOff, "Back-off restarting failed container "+c.Name+" in pod "+pod.Name+"_"+pod.Namespace+"("+string(pod.UID)+")")
	}
}

// containerEvent records an event on a reference to container name of
// pod, surviving a panicking Recorder.
func (s *Syncer) containerEvent(pod *v1.Pod, name, eventType, reason, message string) {
	ref := &v1.ObjectReference{
		Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		ResourceVersion: pod.ResourceVersion,
	}
	if name != "" {
		ref.FieldPath = containerFieldPath(pod, name)
	}
	defer func() {
		if p := recover(); p != nil {
			s.opts.Logger.Error(fmt.Errorf("%v", p), "Recorder panicked", "reason", reason)
		}
	}()
	s.opts.Recorder.Eventf(ref, eventType, reason, "%s", message)
}

// containerFieldPath is the kubelet's field path of a container in its
// events: spec.containers{name} or spec.initContainers{name}.
func containerFieldPath(pod *v1.Pod, name string) string {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return "spec.initContainers{" + name + "}"
		}
	}
	return "spec.containers{" + name + "}"
}

// waitAll records that every container of pod waits with reason
// CreateContainerConfigError and message (the pod needs what the syncer
// cannot do), with one Failed event on the pod.
func (s *Syncer) waitAll(pod *v1.Pod, status *PodStatus, message string) {
	for _, c := range allContainers(pod) {
		s.waiting.set(pod.UID, c.Name, Waiting{Reason: ReasonCreateContainerConfigError, Message: message, Attempt: status.nextAttempt(c.Name)})
	}
	s.containerEvent(pod, "", v1.EventTypeWarning, EventFailed, "Error: "+message)
}
