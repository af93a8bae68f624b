package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/podkit/podkit/internal/podstatus"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
)

// PodStatusFunc derives the status the API server should show for pod from
// what the agent's runtime knows at the moment of the call. It is called
// from pod worker goroutines (see WrapSyncer), concurrently for different
// pods, and must return quickly without blocking on the network. It must
// not modify pod. An error means "no status now"; the previous one stays.
type PodStatusFunc func(ctx context.Context, pod *v1.Pod) (v1.PodStatus, error)

// PodWindow is what a StatusWriter asks the pod workers. A
// *podworker.PodWorkers[T] satisfies it.
type PodWindow interface {
	// Pod returns a snapshot of the worker of uid.
	Pod(uid types.UID) (podworker.PodInfo, bool)
	// CouldHaveRunningContainers reports whether the pod may still run
	// containers; a terminal phase is withheld while it does.
	CouldHaveRunningContainers(uid types.UID) bool
	// ShouldPodBeFinished reports whether the pod is done; a deleted pod
	// that is done is removed from the API server.
	ShouldPodBeFinished(uid types.UID) bool
	// Subscribe delivers the workers' stage changes to ch without blocking.
	Subscribe(ch chan<- podworker.Transition) *podworker.Subscription
}

var _ PodWindow = (*podworker.PodWorkers[struct{}])(nil)

// StatusWriterOptions configure a StatusWriter. The zero value is valid.
type StatusWriterOptions struct {
	// ResyncInterval is how long after a successful write the writer checks
	// a pod's status in the API server again, even if nothing was
	// reported, so a status changed by someone else is put back. Defaults
	// to one minute; negative disables resyncs.
	ResyncInterval time.Duration
	// BackOff and MaxBackOff bound the per-pod exponential delay before a
	// failed write is tried again. Default to 200 milliseconds and 30
	// seconds.
	BackOff, MaxBackOff time.Duration
	// Logger receives write failures at level 0 and per-pod detail at V(4).
	// Defaults to the zero Logger, which discards.
	Logger logr.Logger
	// Clock times resyncs and backoff. Defaults to the real clock.
	Clock clock.WithTicker
}

// StatusWriter is a plain status manager for an agent connected to an API
// server. It keeps the status subresource of each pod the agent runs in
// step with what the runtime says, and completes deletions:
//
//   - The status recorded for a pod (SetPodStatus, usually through
//     WrapSyncer after each sync) is patched onto the pod's status
//     subresource when it differs from the stored one. A static pod's status
//     goes to its mirror pod, and only to a mirror of that very pod
//     (mirror.IsMirrorPodOf).
//   - A terminal phase (Succeeded, Failed) is withheld, the stored phase
//     kept, while PodWindow.CouldHaveRunningContainers is true: the API
//     server must not say a pod is done while a process of it may run. It
//     is written once the worker reports the pod terminated (a withheld
//     phase is also checked again with backoff, for pods the workers never
//     ran, such as those rejected at admission, which are not known to be
//     stopped until the workers are synced).
//   - Once a pod that has a deletion timestamp is finished
//     (PodWindow.ShouldPodBeFinished), its final status is written and it
//     is deleted with grace period 0 and a UID precondition: the step that
//     lets a graceful deletion complete in the cluster. Static pods and
//     mirror pods are never deleted here.
//   - A phase that is already terminal in the API server is never changed,
//     and conditions of types the agent does not report (set by the
//     scheduler or a controller) are kept.
//
// Each write carries the target's UID, so a pod deleted and created again
// under the same name is never written with another pod's status. Failed
// writes are retried with per-pod backoff.
//
// Create it with NewStatusWriter and run it with Run. All methods are safe
// for concurrent use.
type StatusWriter struct {
	pods corev1client.PodsGetter
	opts StatusWriterOptions

	// syncMu serializes the API writes of the worker and of WrapSyncer's
	// SyncTerminatedPod, so two writes never race for one pod.
	syncMu sync.Mutex

	mu sync.Mutex
	// statuses holds the newest status recorded for each UID and the pod
	// it was derived for. Entries are dropped once the pod workers forget
	// the UID.
	statuses map[types.UID]recordedStatus
	// queue is the work queue while Run runs; nil before and after.
	queue workqueue.TypedRateLimitingInterface[types.UID]
	// early holds UIDs enqueued before Run created the queue.
	early map[types.UID]struct{}
	// ran is set once Run started; a second Run is refused.
	ran bool
}

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
	errNoMirror = errors.New("kube: the static pod has no current mirror pod")
	// errUnreadable: reading the pod was forbidden. Under the Node
	// authorizer that is a pod not bound to this node: gone, or not yet
	// known to the authorizer (it learns of bindings a moment after they
	// are stored).
	errUnreadable = errors.New("kube: the pod cannot be read")
)

type recordedStatus struct {
	pod    *v1.Pod
	status v1.PodStatus
}

// NewStatusWriter returns a StatusWriter that writes through pods (usually
// clientset.CoreV1()). It starts nothing: call Run. An error says which
// argument or option is invalid.
func NewStatusWriter(pods corev1client.PodsGetter, opts StatusWriterOptions) (*StatusWriter, error) {
	if pods == nil {
		return nil, errors.New("kube: NewStatusWriter needs a pods client")
	}
	if opts.ResyncInterval == 0 {
		opts.ResyncInterval = time.Minute
	}
	if opts.BackOff < 0 || opts.MaxBackOff < 0 {
		return nil, errors.New("kube: StatusWriterOptions: negative backoff")
	}
	if opts.BackOff == 0 {
		opts.BackOff = 200 * time.Millisecond
	}
	if opts.MaxBackOff == 0 {
		opts.MaxBackOff = 30 * time.Second
	}
	if opts.MaxBackOff < opts.BackOff {
		return nil, errors.New("kube: StatusWriterOptions: MaxBackOff below BackOff")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &StatusWriter{
		pods:     pods,
		opts:     opts,
		statuses: make(map[types.UID]recordedStatus),
		early:    make(map[types.UID]struct{}),
	}, nil
}

// SetPodStatus records status as the current status of pod and schedules a
// write. The writer keeps both (do not modify them afterwards). It never
// blocks; a write for a pod whose status did not change costs one read.
func (w *StatusWriter) SetPodStatus(pod *v1.Pod, status v1.PodStatus) {
	if pod == nil || pod.UID == "" {
		return
	}
	w.mu.Lock()
	w.statuses[pod.UID] = recordedStatus{pod: pod, status: status}
	w.mu.Unlock()
	w.Enqueue(pod.UID)
}

// Enqueue schedules a check of the pod uid: its recorded status is written
// if it changed and, if it is deleted and finished, it is removed from the
// API server. It never blocks. After Run has returned it does nothing.
func (w *StatusWriter) Enqueue(uid types.UID) {
	if uid == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.queue != nil:
		w.queue.Add(uid)
	case !w.ran:
		w.early[uid] = struct{}{}
	}
}

// Run writes statuses until ctx ends, then stops and returns nil once its
// worker has returned. It may be called once.
//
// window is where the writer learns how far each pod is (normally the
// agent's *podworker.PodWorkers). It is given here rather than to
// NewStatusWriter because the pod workers are built over WrapSyncer, which
// needs the writer first. Call Run from a goroutine of its own.
func (w *StatusWriter) Run(ctx context.Context, window PodWindow) error {
	if window == nil {
		return errors.New("kube: StatusWriter.Run needs a pod window")
	}
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](w.opts.BackOff, w.opts.MaxBackOff),
		workqueue.TypedRateLimitingQueueConfig[types.UID]{Clock: w.opts.Clock},
	)
	w.mu.Lock()
	if w.ran {
		w.mu.Unlock()
		queue.ShutDown()
		return errors.New("kube: StatusWriter.Run called twice")
	}
	w.ran = true
	w.queue = queue
	for uid := range w.early {
		queue.Add(uid)
	}
	w.early = nil
	w.mu.Unlock()

	transitions := make(chan podworker.Transition, 1024)
	sub := window.Subscribe(transitions)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case tr := <-transitions:
				queue.Add(tr.UID)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for w.processNext(ctx, queue, window) {
		}
	}()

	<-ctx.Done()
	sub.Close()
	w.mu.Lock()
	w.queue = nil
	w.mu.Unlock()
	queue.ShutDown()
	wg.Wait()
	return nil
}

// unreadableAttempts is how many times the writer tries to read a pod the
// pod workers do not know before it gives up on it.
const unreadableAttempts = 5

func (w *StatusWriter) processNext(ctx context.Context, queue workqueue.TypedRateLimitingInterface[types.UID], window PodWindow) bool {
	uid, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer queue.Done(uid)
	attempts := queue.NumRequeues(uid)
	result, err := w.syncFromWindow(ctx, uid, window, attempts)
	switch {
	case err != nil && ctx.Err() == nil:
		// A mirror pod not created yet, or a pod the Node authorizer does
		// not yet know is bound here, is normal for a moment.
		logger := w.opts.Logger.WithValues("podUID", uid, "attempt", attempts+1)
		if attempts < 3 {
			logger.V(4).Info("Writing pod status failed; will retry", "err", err.Error())
		} else {
			logger.Error(err, "Writing pod status failed; will retry")
		}
		queue.AddRateLimited(uid)
	case err != nil:
		// Shutting down.
	case result == forget:
		queue.Forget(uid)
		w.mu.Lock()
		delete(w.statuses, uid)
		w.mu.Unlock()
	case result == withheld:
		queue.AddRateLimited(uid)
	default:
		queue.Forget(uid)
		if w.opts.ResyncInterval > 0 {
			queue.AddAfter(uid, w.opts.ResyncInterval)
		}
	}
	return true
}

// syncFromWindow brings the API server's view of uid up to date, as window
// says the pod stands. attempts counts the failed tries before this one.
func (w *StatusWriter) syncFromWindow(ctx context.Context, uid types.UID, window PodWindow, attempts int) (outcome, error) {
	info, ok := window.Pod(uid)
	w.mu.Lock()
	rec, hasStatus := w.statuses[uid]
	w.mu.Unlock()
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
	result, err := w.sync(ctx, pod, mayRun, finished)
	if errors.Is(err, errUnreadable) && !ok && attempts+1 >= unreadableAttempts {
		// Under the Node authorizer a pod that is gone, or no longer bound
		// here, cannot be read at all; once the workers have forgotten it
		// too, stop trying.
		return forget, nil
	}
	return result, err
}

// sync writes the recorded status of pod, if any and if it changed, with
// a terminal phase withheld when mayRun, and deletes the pod when finished
// and it carries a deletion timestamp. On error the outcome is keep.
func (w *StatusWriter) sync(ctx context.Context, pod *v1.Pod, mayRun, finished bool) (outcome, error) {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	uid := pod.UID
	if mirror.IsMirrorPod(pod) {
		return forget, nil
	}
	w.mu.Lock()
	rec, hasStatus := w.statuses[uid]
	w.mu.Unlock()
	logger := w.opts.Logger.WithValues("pod", mirror.PodFullName(pod), "podUID", uid)
	static := mirror.IsStaticPod(pod)

	current, err := w.pods.Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if static {
			return keep, fmt.Errorf("%w: %s", errNoMirror, mirror.PodFullName(pod))
		}
		logger.V(4).Info("Pod is gone from the API server")
		return forget, nil
	case apierrors.IsForbidden(err):
		return keep, fmt.Errorf("%w: %s: %w", errUnreadable, mirror.PodFullName(pod), err)
	case err != nil:
		return keep, fmt.Errorf("kube: reading pod %s: %w", mirror.PodFullName(pod), err)
	}
	if static {
		if !mirror.IsMirrorPodOf(current, pod) {
			return keep, fmt.Errorf("%w: %s", errNoMirror, mirror.PodFullName(pod))
		}
	} else if current.UID != uid {
		logger.V(4).Info("Pod was replaced in the API server", "currentUID", current.UID)
		return forget, nil
	}

	result := keep
	if hasStatus {
		next := statusToWrite(current.Status, rec.status, mayRun)
		if next.Phase != rec.status.Phase && podstatus.IsTerminal(rec.status.Phase) && !podstatus.IsTerminal(next.Phase) {
			logger.V(4).Info("Withholding terminal phase while containers may run", "phase", rec.status.Phase)
			result = withheld
		}
		if !equality.Semantic.DeepEqual(current.Status, next) {
			if err := w.patchStatus(ctx, current, next); err != nil {
				return keep, err
			}
			logger.V(4).Info("Wrote pod status", "phase", next.Phase)
		}
	}

	if !static && current.DeletionTimestamp != nil && finished {
		grace := int64(0)
		target := current.UID
		err := w.pods.Pods(current.Namespace).Delete(ctx, current.Name, metav1.DeleteOptions{
			GracePeriodSeconds: &grace,
			Preconditions:      &metav1.Preconditions{UID: &target},
		})
		switch {
		case err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			logger.V(4).Info("Removed finished pod from the API server")
			return forget, nil
		default:
			return keep, fmt.Errorf("kube: deleting finished pod %s: %w", mirror.PodFullName(pod), err)
		}
	}
	return result, nil
}

// patchStatus writes next onto current's status subresource with a
// strategic merge patch that also carries current's UID, so that the API
// server refuses it if the object was replaced in between.
func (w *StatusWriter) patchStatus(ctx context.Context, current *v1.Pod, next v1.PodStatus) error {
	oldJSON, err := json.Marshal(v1.Pod{Status: current.Status})
	if err != nil {
		return err
	}
	// The UID appears only on the new side, so the patch always names it.
	newJSON, err := json.Marshal(v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: current.UID}, Status: next})
	if err != nil {
		return err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, v1.Pod{})
	if err != nil {
		return fmt.Errorf("kube: building the status patch of %s: %w", mirror.PodFullName(current), err)
	}
	_, err = w.pods.Pods(current.Namespace).Patch(ctx, current.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("kube: patching the status of %s: %w", mirror.PodFullName(current), err)
	}
	return nil
}

// statusToWrite is the status the API server should hold, given the stored
// one and the one the agent derived: the derived status, with these rules
// applied:
//   - a terminal stored phase is kept (the API server refuses to leave it);
//   - a terminal derived phase is replaced by the stored phase while
//     containers may run;
//   - conditions of types the agent did not derive are kept, and a
//     condition whose status did not change keeps its transition time;
//   - the start time, once stored, is kept, and so are the fields the agent
//     does not own (nominated node, resource claim statuses).
//
// The result is normalized as the API server stores it (times to the
// second), so an unchanged status compares equal to the stored one.
func statusToWrite(stored, derived v1.PodStatus, mayRun bool) v1.PodStatus {
	next := *derived.DeepCopy()
	switch {
	case podstatus.IsTerminal(stored.Phase):
		next.Phase = stored.Phase
	case podstatus.IsTerminal(next.Phase) && mayRun:
		next.Phase = stored.Phase
		if next.Phase == "" {
			next.Phase = v1.PodPending
		}
	}

	derivedTypes := make(map[v1.PodConditionType]bool, len(next.Conditions))
	for i := range next.Conditions {
		c := &next.Conditions[i]
		derivedTypes[c.Type] = true
		for _, old := range stored.Conditions {
			if old.Type == c.Type && old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	for _, old := range stored.Conditions {
		if !derivedTypes[old.Type] {
			next.Conditions = append(next.Conditions, old)
		}
	}
	if stored.StartTime != nil {
		next.StartTime = stored.StartTime.DeepCopy()
	}
	next.NominatedNodeName = stored.NominatedNodeName
	next.ResourceClaimStatuses = stored.ResourceClaimStatuses
	next.ExtendedResourceClaimStatus = stored.ExtendedResourceClaimStatus
	return normalize(next)
}

// normalize round-trips s through JSON, as storing it in the API server
// does (metav1.Time keeps whole seconds).
func normalize(s v1.PodStatus) v1.PodStatus {
	b, err := json.Marshal(s)
	if err != nil {
		return s
	}
	var out v1.PodStatus
	if err := json.Unmarshal(b, &out); err != nil {
		return s
	}
	return out
}

// WriteTerminated writes the status recorded for pod, terminal phase
// included, to the API server now, on the caller's goroutine: the caller
// vouches that no container of pod runs any more. It is what WrapSyncer
// does before cleanup, so a pod's end is in the API server before the
// runtime forgets it, and an agent that restarts right after cannot take
// the pod for one that never ran. A pod without a recorded status, a pod
// gone from the API server and a static pod without a current mirror are
// not errors (there is nothing to write, or nowhere to); an API failure is.
func (w *StatusWriter) WriteTerminated(ctx context.Context, pod *v1.Pod) error {
	if pod == nil || pod.UID == "" {
		return nil
	}
	_, err := w.sync(ctx, pod, false, false)
	if errors.Is(err, errNoMirror) {
		return nil
	}
	return err
}

// WrapSyncer returns a PodSyncer that runs s's hooks and reports to w:
//
//   - after each SyncPod and SyncTerminatingPod (whether it failed or not)
//     it derives the pod's status with status and records it
//     (SetPodStatus);
//   - before SyncTerminatedPod, which may erase what a status is derived
//     from, it writes the status recorded when the containers stopped
//     (WriteTerminated); if that fails, the hook fails and is retried, so
//     cleanup waits for the API server to know the pod's end.
//
// If s implements podworker.RuntimePodSyncer, so does the result.
//
// The status is derived on the hook's goroutine, so it is the status the
// hook left, before the next hook of the same pod can run. It uses the
// hook's ctx without its cancellation, so a hook cancelled by a shortened
// grace period still reports what it did.
func WrapSyncer[T any](s podworker.PodSyncer[T], w *StatusWriter, status PodStatusFunc) podworker.PodSyncer[T] {
	record := func(ctx context.Context, pod *v1.Pod) {
		if pod == nil {
			return
		}
		st, err := status(context.WithoutCancel(ctx), pod)
		if err != nil {
			logr.FromContextOrDiscard(ctx).V(4).Info("No pod status after sync", "err", err.Error())
			w.Enqueue(pod.UID)
			return
		}
		w.SetPodStatus(pod, st)
	}
	funcs := podworker.PodSyncerFuncs[T]{
		SyncPodFunc: func(ctx context.Context, updateType podworker.UpdateType, pod, mirrorPod *v1.Pod, st T) (bool, error) {
			terminal, err := s.SyncPod(ctx, updateType, pod, mirrorPod, st)
			record(ctx, pod)
			return terminal, err
		},
		SyncTerminatingPodFunc: func(ctx context.Context, pod *v1.Pod, st T, gracePeriod int64, podStatusFn func(*v1.PodStatus)) error {
			err := s.SyncTerminatingPod(ctx, pod, st, gracePeriod, podStatusFn)
			record(ctx, pod)
			return err
		},
		SyncTerminatedPodFunc: func(ctx context.Context, pod *v1.Pod, st T) error {
			if err := w.WriteTerminated(ctx, pod); err != nil {
				return err
			}
			return s.SyncTerminatedPod(ctx, pod, st)
		},
	}
	if rs, ok := s.(podworker.RuntimePodSyncer); ok {
		funcs.SyncTerminatingRuntimePodFunc = rs.SyncTerminatingRuntimePod
		return funcs
	}
	return syncerOnly[T]{funcs}
}

// syncerOnly hides the runtime-pod hook of PodSyncerFuncs from the engine's
// type assertion, for syncers that do not implement it.
type syncerOnly[T any] struct{ f podworker.PodSyncerFuncs[T] }

func (s syncerOnly[T]) SyncPod(ctx context.Context, updateType podworker.UpdateType, pod, mirrorPod *v1.Pod, st T) (bool, error) {
	return s.f.SyncPod(ctx, updateType, pod, mirrorPod, st)
}

func (s syncerOnly[T]) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, st T, gracePeriod int64, podStatusFn func(*v1.PodStatus)) error {
	return s.f.SyncTerminatingPod(ctx, pod, st, gracePeriod, podStatusFn)
}

func (s syncerOnly[T]) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, st T) error {
	return s.f.SyncTerminatedPod(ctx, pod, st)
}
