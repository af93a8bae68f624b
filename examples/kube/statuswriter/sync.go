package statuswriter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/podkit/podkit/internal/podstatus"
	"github.com/podkit/podkit/mirror"
)

// outcome is what a sync leaves to do for a pod.
type outcome int

const (
	// keep: the pod is up to date; check it again at the next resync.
	keep outcome = iota
	// forget: there is nothing more to do for the pod, ever.
	forget
	// withheld: a terminal phase waits for the pod's containers to be
	// known stopped; check again soon (with backoff), since the window may
	// change without a transition (the pod workers becoming synced).
	withheld
)

var (
	// errNoMirror: a static pod's status cannot be written because its
	// current mirror pod does not exist (yet).
	errNoMirror = errors.New("statuswriter: the static pod has no current mirror pod")
	// errGone: the pod is no longer in the API server, or another pod
	// holds its name. Nothing can be written for it any more.
	errGone = errors.New("statuswriter: the pod is gone from the API server")
	// errUnreadable: reading the pod was forbidden while it exists (or,
	// without Options.NodeName, may exist). Under the Node
	// authorizer that is a pod whose binding the authorizer has not yet
	// seen: it learns of bindings a moment after they are stored.
	errUnreadable = errors.New("statuswriter: the pod cannot be read")
)

// unreadableAttempts is how many times a writer without a node name tries
// to read a refused pod the pod workers no longer know before it gives up
// on it (it cannot tell a pod the authorizer does not know yet from one
// that is gone).
const unreadableAttempts = 5

// syncFromWindow brings the API server's view of uid up to date, as window
// says the pod stands. attempts counts the failed tries before this one.
func (w *Writer) syncFromWindow(ctx context.Context, uid types.UID, window Workers, attempts int) (outcome, error) {
	info, ok := window.Pod(uid)
	rec, hasStatus := w.recorded(uid)
	if !ok && !hasStatus {
		return forget, nil
	}
	// The workers' pod is the newest desired state; a pod they never had
	// (rejected at admission) is known by its recorded status only.
	pod := info.Pod
	if pod == nil {
		pod = rec.pod
	}
	if pod == nil || pod.UID != uid {
		return forget, nil // known to the runtime only: nothing in the API server
	}
	if !ok && mirror.IsStaticPod(pod) {
		return forget, nil // a static pod that is gone has nothing to report
	}
	// Read the window once, finished first: a finished pod can have no
	// running containers, so the two answers never contradict each other.
	finished := window.ShouldPodBeFinished(uid)
	mayRun := !finished && window.CouldHaveRunningContainers(uid)
	result, err := w.sync(ctx, pod, syncMode{mayRun: mayRun, finished: finished, stopped: finished})
	if errors.Is(err, errUnreadable) && w.opts.NodeName == "" && !ok && attempts+1 >= unreadableAttempts {
		return forget, nil
	}
	return result, err
}

// syncMode is what the caller of sync knows of the pod's containers.
type syncMode struct {
	// mayRun: a container may run; a terminal phase is withheld.
	mayRun bool
	// stopped: no container runs or will; the phase written is terminal.
	stopped bool
	// finished: the pod's cleanup is done; a deleted pod is removed.
	finished bool
}

// sync writes the recorded status of pod, if any and if it changed, as
// mode says, and deletes the pod when it is finished and carries a
// deletion timestamp. A pod gone from the API server is forgotten. On
// error the outcome is keep.
func (w *Writer) sync(ctx context.Context, pod *v1.Pod, mode syncMode) (outcome, error) {
	defer w.podLocks.lock(pod.UID)()
	ctx, cancel := context.WithTimeout(ctx, w.opts.SyncTimeout)
	defer cancel()
	if mirror.IsMirrorPod(pod) {
		return forget, nil
	}
	rec, hasStatus := w.recorded(pod.UID)
	// What the API server holds is known when this very status was
	// written (or read back) lately for the same containers' state: no
	// read, no write. A stopped or finished pod is always checked (its
	// phase, its deletion), and so is a static pod (its mirror may have
	// been replaced).
	cacheable := hasStatus && !mode.stopped && !mode.finished && !mirror.IsStaticPod(pod)
	if cacheable && w.upToDate(pod.UID, rec.version, mode.mayRun) {
		return keep, nil
	}
	w.setWritten(pod.UID, 0, false, false)
	logger := w.opts.Logger.WithValues("pod", mirror.PodFullName(pod), "podUID", pod.UID)
	if cacheable {
		done, result, err := w.writeFromSeen(ctx, pod, rec, mode)
		if done {
			return result, err
		}
	}
	readAt := w.opts.Clock.Now()
	current, err := w.read(ctx, pod)
	switch {
	case errors.Is(err, errGone):
		logger.V(4).Info("Pod is gone from the API server")
		return forget, nil
	case err != nil:
		return keep, err
	}
	w.setSeen(current)

	result := keep
	if hasStatus || mode.stopped {
		derived := current.Status
		if hasStatus {
			derived = rec.status
		}
		if mode.stopped {
			derived = terminalStatus(derived)
		}
		var next v1.PodStatus
		next, result = nextStatus(current.Status, derived, mode.mayRun)
		if result == withheld {
			logger.V(4).Info("Withholding terminal phase while containers may run", "phase", derived.Phase)
		}
		if !equality.Semantic.DeepEqual(current.Status, next) {
			written, err := w.patchStatus(ctx, current, next, readAt, "")
			if err != nil {
				w.forgetSeen(pod.UID)
				return keep, err
			}
			w.setSeen(written)
			current.Status = next
			logger.V(4).Info("Wrote pod status", "phase", next.Phase)
		}
		if cacheable && result == keep {
			w.setWritten(pod.UID, rec.version, mode.mayRun, true)
		}
	}

	if mirror.IsStaticPod(pod) || current.DeletionTimestamp == nil || !mode.finished {
		return result, nil
	}
	if !podstatus.IsTerminal(current.Status.Phase) {
		// Never reached (a finished pod is given a terminal phase above),
		// and kept so: the pod must not leave the API server before its
		// end is stored.
		return keep, fmt.Errorf("statuswriter: finished pod %s has phase %q in the API server; not deleting it before its terminal status is stored",
			mirror.PodFullName(pod), current.Status.Phase)
	}
	grace := int64(0)
	target := current.UID
	err = w.pods.Pods(current.Namespace).Delete(ctx, current.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &grace,
		Preconditions:      &metav1.Preconditions{UID: &target},
	})
	switch {
	case err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		logger.V(4).Info("Removed finished pod from the API server")
		return forget, nil
	default:
		return keep, fmt.Errorf("statuswriter: deleting finished pod %s: %w", mirror.PodFullName(pod), err)
	}
}

// nextStatus is the status to write over stored for derived
// (statusToWrite), and the outcome: withheld when a terminal derived phase
// is held back while containers may run, else keep.
func nextStatus(stored, derived v1.PodStatus, mayRun bool) (v1.PodStatus, outcome) {
	next := statusToWrite(stored, derived, mayRun)
	if next.Phase != derived.Phase && podstatus.IsTerminal(derived.Phase) && !podstatus.IsTerminal(next.Phase) {
		return next, withheld
	}
	return next, keep
}

// writeFromSeen writes rec's status of pod, a pod whose status is
// cacheable (a plain pod, not stopped nor finished), in one request: a
// patch computed from the pod as the writer last saw it from the API
// server (else as the pod workers have it), with that copy's
// resourceVersion as its precondition. When the status to write is the
// one the API server itself returned to the writer less than a
// ResyncInterval ago (a status that differs from the last recorded only
// in what the rules keep of the stored one: a condition's transition
// time, a terminal phase withheld), nothing is sent, as a kubelet's
// status manager sends nothing for a status it has written; the resync
// still reads it on time. done says whether that settled the sync, with
// its outcome and error; it does not when there is no copy with a
// resourceVersion, when only the workers' copy, or a copy of the API
// server's older than ResyncInterval, holds the status already (only a
// read tells whether it is still the API server's), or when the patch was
// refused (a conflict: the copy is out of date; or any other error), and
// then the caller reads the pod and writes as usual.
func (w *Writer) writeFromSeen(ctx context.Context, pod *v1.Pod, rec recordedStatus, mode syncMode) (done bool, _ outcome, _ error) {
	w.mu.Lock()
	seen, fromAPI := w.seen[pod.UID]
	w.mu.Unlock()
	base := seen.pod
	if !fromAPI {
		base = pod
	}
	if base.ResourceVersion == "" || base.UID != pod.UID {
		return false, keep, nil
	}
	next, result := nextStatus(base.Status, rec.status, mode.mayRun)
	if equality.Semantic.DeepEqual(base.Status, next) {
		fresh := w.opts.ResyncInterval < 0 || w.opts.Clock.Since(seen.at) < w.opts.ResyncInterval
		if !fromAPI || !fresh {
			return false, keep, nil
		}
		if result == keep {
			w.setWrittenAt(pod.UID, rec.version, mode.mayRun, seen.at)
		}
		return true, result, nil
	}
	written, err := w.patchStatus(ctx, base, next, time.Time{}, base.ResourceVersion)
	if err != nil {
		w.forgetSeen(pod.UID)
		if ctx.Err() != nil {
			return true, keep, err
		}
		w.opts.Logger.V(4).Info("Patching the pod's status from its last copy failed; reading it", "pod", mirror.PodFullName(pod), "podUID", pod.UID, "err", err.Error())
		return false, keep, nil
	}
	w.setSeen(written)
	if result == keep {
		w.setWritten(pod.UID, rec.version, mode.mayRun, true)
	}
	return true, result, nil
}

// setSeen records p as the writer's newest copy of its pod from the API
// server.
func (w *Writer) setSeen(p *v1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, recorded := w.statuses[p.UID]; recorded {
		w.seen[p.UID] = seenPod{pod: p, at: w.opts.Clock.Now()}
	}
}

// forgetSeen forgets the writer's copy of pod uid: the next write reads
// the pod.
func (w *Writer) forgetSeen(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.seen, uid)
}

// read returns the pod the status of pod goes to: pod itself (same UID), or
// the current mirror pod of a static pod. It fails with errGone when there
// is none any more, errNoMirror for a static pod whose mirror does not
// exist (yet), errUnreadable when the API server refuses the read of a pod
// that exists, and the API error otherwise.
func (w *Writer) read(ctx context.Context, pod *v1.Pod) (*v1.Pod, error) {
	current, err := w.pods.Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		current = nil
	case apierrors.IsForbidden(err):
		if w.opts.NodeName == "" {
			return nil, fmt.Errorf("%w: %s: %w", errUnreadable, mirror.PodFullName(pod), err)
		}
		listed, lerr := w.listBound(ctx, pod)
		if lerr != nil {
			return nil, fmt.Errorf("%w: %s: %w (and listing the node's pods failed: %w)", errUnreadable, mirror.PodFullName(pod), err, lerr)
		}
		if listed != nil && isTargetOf(listed, pod) {
			return nil, fmt.Errorf("%w: %s: %w", errUnreadable, mirror.PodFullName(pod), err)
		}
		current = nil
	case err != nil:
		return nil, fmt.Errorf("statuswriter: reading pod %s: %w", mirror.PodFullName(pod), err)
	}
	switch {
	case current != nil && isTargetOf(current, pod):
		return current, nil
	case mirror.IsStaticPod(pod):
		return nil, fmt.Errorf("%w: %s", errNoMirror, mirror.PodFullName(pod))
	default:
		return nil, fmt.Errorf("%w: %s", errGone, mirror.PodFullName(pod))
	}
}

// isTargetOf reports whether current, read from the API server, is where
// the status of pod goes: the very pod, or the mirror pod of a static pod.
func isTargetOf(current, pod *v1.Pod) bool {
	if mirror.IsStaticPod(pod) {
		return mirror.IsMirrorPodOf(current, pod)
	}
	return current.UID == pod.UID
}

// listBound returns the pod of pod's namespace and name that is bound to
// the writer's node, or nil when there is none, through the one pod list
// the Node authorizer allows a node.
func (w *Writer) listBound(ctx context.Context, pod *v1.Pod) (*v1.Pod, error) {
	selector := fields.AndSelectors(
		fields.OneTermEqualSelector("spec.nodeName", w.opts.NodeName),
		fields.OneTermEqualSelector("metadata.name", pod.Name),
	)
	list, err := w.pods.Pods(pod.Namespace).List(ctx, metav1.ListOptions{FieldSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		if list.Items[i].Name == pod.Name {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}

// patchStatus writes next onto current's status subresource with a
// strategic merge patch that also carries current's UID, so that the API
// server refuses it if the object was replaced in between, and, when
// resourceVersion is set, that resourceVersion, so that it refuses it
// (a conflict) if the object changed at all. It returns the pod as the API
// server stored it. readAt is when the read of current was sent (zero:
// none was), for Options.Trace.
func (w *Writer) patchStatus(ctx context.Context, current *v1.Pod, next v1.PodStatus, readAt time.Time, resourceVersion string) (*v1.Pod, error) {
	oldJSON, err := json.Marshal(v1.Pod{Status: current.Status})
	if err != nil {
		return nil, err
	}
	// The UID (and resourceVersion) appear only on the new side, so the
	// patch always names them.
	newJSON, err := json.Marshal(v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: current.UID, ResourceVersion: resourceVersion}, Status: next})
	if err != nil {
		return nil, err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, v1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("statuswriter: building the status patch of %s: %w", mirror.PodFullName(current), err)
	}
	sent := w.opts.Clock.Now()
	written, err := w.pods.Pods(current.Namespace).Patch(ctx, current.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if w.opts.Trace != nil {
		w.opts.Trace(WriteTrace{UID: current.UID, Phase: next.Phase, Read: readAt, Sent: sent, Answered: w.opts.Clock.Now(), Err: err})
	}
	if err != nil {
		return nil, fmt.Errorf("statuswriter: patching the status of %s: %w", mirror.PodFullName(current), err)
	}
	return written, nil
}
