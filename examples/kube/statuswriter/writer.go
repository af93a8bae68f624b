package statuswriter

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/podkit/podkit/podworker"
)

// PodStatusFunc derives the status the API server should show for pod from
// what the agent's runtime knows at the moment of the call. It is called
// from pod worker goroutines (see WrapSyncer), concurrently for different
// pods, and must return quickly without blocking on the network. It must
// not modify pod. An error means "no status now"; the previous one stays.
type PodStatusFunc func(ctx context.Context, pod *v1.Pod) (v1.PodStatus, error)

// Workers is what a Writer asks the pod workers: two questions of their
// window, a snapshot, and their transitions. A *podworker.PodWorkers[T]
// satisfies it. (It was kube.PodWindow, a name lifecycle uses for another
// interface.)
type Workers interface {
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

var _ Workers = (*podworker.PodWorkers[struct{}])(nil)

// Options configure a Writer. The zero value is valid.
type Options struct {
	// NodeName is the node the writer's client acts for. Under the Node
	// authorizer a node may not read a pod it is not (yet) known to run:
	// a pod just bound to it, until the authorizer has seen the binding,
	// and a pod that is gone. With NodeName set, a refused read is followed
	// by a list of the node's pods (spec.nodeName selector, which the
	// authorizer allows) that tells the two apart: the writer keeps trying
	// while the pod exists, and stops once it is gone. Without it the
	// writer gives up on a refused pod the workers have forgotten after a
	// few attempts.
	NodeName string
	// ResyncInterval is how long after a successful write the writer checks
	// a pod's status in the API server again, even if nothing was
	// reported, so a status changed by someone else is put back. Defaults
	// to one minute; negative disables resyncs.
	ResyncInterval time.Duration
	// BackOff and MaxBackOff bound the per-pod exponential delay before a
	// failed write is tried again. Default to 200 milliseconds and 10
	// seconds (the kubelet's status manager retries every 10 seconds).
	BackOff, MaxBackOff time.Duration
	// Parallel is how many pods' statuses are written at once. Defaults
	// to DefaultParallel. It bounds the writes in flight, not the rate of
	// requests: that is the client's rate limiter (an agent's client has
	// the kubelet's 50 per second, bursts of 100: agent.NewClient). The
	// writes of one pod never overlap and keep their order.
	Parallel int
	// SyncTimeout bounds the API calls of one check of one pod (a read, a
	// status patch, a delete), so a request the server never answers
	// fails and is tried again instead of stopping every write. Defaults
	// to 30 seconds.
	SyncTimeout time.Duration
	// Logger receives write failures at level 0 and per-pod detail at V(4).
	// Defaults to the zero Logger, which discards.
	Logger logr.Logger
	// Clock times resyncs and backoff. Defaults to the real clock.
	Clock clock.WithTicker
	// Trace, when set, is told of each status patch once the API server
	// answered it (WriteTrace): for finding where a pod's startup time
	// goes. It is called from the writer's goroutines and must return at
	// once. Defaults to none.
	Trace func(WriteTrace)
}

// WriteTrace reports one status patch to Options.Trace: the pod's UID,
// the phase written, when the read of the pod the patch was computed from
// was sent (zero: the patch needed no read), when the patch was sent, when
// the API server answered, and its error (nil: the status is stored).
type WriteTrace struct {
	UID                  types.UID
	Phase                v1.PodPhase
	Read, Sent, Answered time.Time
	Err                  error
}

// DefaultParallel is Options.Parallel's default: enough writes in flight
// to spend the kubelet's default budget of 50 requests per second while
// each takes up to 200 milliseconds, on a node whose pods start at once.
const DefaultParallel = 10

// Writer is a plain status manager for an agent connected to an API
// server. It keeps the status subresource of each pod the agent runs in
// step with what the runtime says, and completes deletions:
//
//   - The status recorded for a pod (SetPodStatus, usually through
//     WrapSyncer after each sync) is patched onto the pod's status
//     subresource when it differs from the stored one. A static pod's status
//     goes to its mirror pod, and only to a mirror of that very pod
//     (mirror.IsMirrorPodOf).
//   - A terminal phase (Succeeded, Failed) is withheld, the stored phase
//     kept, while Workers.CouldHaveRunningContainers is true: the API
//     server must not say a pod is done while a process of it may run. It
//     is written once the worker reports the pod terminated (a withheld
//     phase is also checked again with backoff, for pods the workers never
//     ran, such as those rejected at admission, which are not known to be
//     stopped until the workers are synced).
//   - A pod whose containers are known stopped (WriteTerminated, or a
//     finished worker) always gets a terminal phase, as the kubelet's
//     status manager gives it when a pod terminates: Failed unless the
//     recorded status says otherwise.
//   - Once a pod that has a deletion timestamp is finished
//     (Workers.ShouldPodBeFinished) and its terminal phase is stored, it
//     is deleted with grace period 0 and a UID precondition: the step that
//     lets a graceful deletion complete in the cluster. Static pods and
//     mirror pods are never deleted here.
//   - A phase that is already terminal in the API server is never changed,
//     and conditions of types the agent does not report (set by the
//     scheduler or a controller) are kept.
//
// Statuses coalesce: a pod whose status changed several times before its
// write went out gets one write, of the newest; a status recorded again
// unchanged, once written, costs no API call (until the pod's next resync
// reads it again), as the kubelet's status manager skips a pod whose
// newest status version it has written. Writes of different pods run
// side by side (Options.Parallel).
//
// A write is one request where it can be: its patch is computed from the
// pod as the API server last returned it to the writer (the answer to
// its previous patch), or else as the pod workers have it (the watch's
// copy), and carries that copy's resourceVersion, so the API server
// applies it only to that very version. Where the copy is out of date
// (someone else changed the pod) the patch is refused with a conflict,
// and the writer reads the pod and patches again, as it does for a
// status it must check (a resync, a stopped or finished pod, a static
// pod's mirror): the rules below always apply to the API server's own
// status, never to a stale one. A status the rules turn into the one the
// API server returned to the writer within the last ResyncInterval (a
// condition's transition time changed, a terminal phase withheld) sends
// nothing at all; the resync reads the pod on time.
//
// Each write carries the target's UID, so a pod deleted and created again
// under the same name is never written with another pod's status. A write
// the API server refuses for a reason that passes (the Node authorizer not
// yet aware of the pod's binding, a conflict, a timeout, the server away)
// is tried again with per-pod backoff until it lands or the pod is gone
// from the API server (deleted, or replaced by another of the same name).
//
// Create it with New and run it with Run. All methods are safe
// for concurrent use.
type Writer struct {
	pods corev1client.PodsGetter
	opts Options

	// podLocks serializes the API writes for one pod (of the worker and of
	// WrapSyncer's SyncTerminatedPod), so two writes never race for it,
	// while writes for different pods go on side by side.
	podLocks uidLocks

	mu sync.Mutex
	// statuses holds the newest status recorded for each UID and the pod
	// it was derived for. Entries are dropped once the pod workers forget
	// the UID.
	statuses map[types.UID]recordedStatus
	// written says, for a UID, which recorded version the API server
	// holds, as of when: the status of that version, as the rules made it
	// for the mayRun then. Entries are dropped with statuses' and by
	// EnqueueAll.
	written map[types.UID]writtenStatus
	// seen holds, for a UID, the pod as the API server last returned it
	// to the writer (a read, or a patch's answer), and when: the base the
	// next write's patch is computed from, with its resourceVersion as the
	// patch's precondition, so that it needs no read. Entries are dropped
	// with statuses' and by EnqueueAll, and replaced at each read and
	// write.
	seen map[types.UID]seenPod
	// version numbers the recorded statuses that differ from the one
	// before them.
	version uint64
	// queue is the work queue while Run runs; nil before and after.
	queue workqueue.TypedRateLimitingInterface[types.UID]
	// early holds UIDs enqueued before Run created the queue.
	early map[types.UID]struct{}
	// ran is set once Run started; a second Run is refused.
	ran bool
}

type recordedStatus struct {
	pod    *v1.Pod
	status v1.PodStatus
	// version changes when status does (SetPodStatus).
	version uint64
}

// writtenStatus is what a sync left in the API server for a UID.
type writtenStatus struct {
	version uint64
	mayRun  bool
	at      time.Time
}

// seenPod is a pod as the API server returned it to the writer, at when
// the writer got it.
type seenPod struct {
	pod *v1.Pod
	at  time.Time
}

// New returns a Writer that writes through pods (usually
// clientset.CoreV1()). It starts nothing: call Run. An error says which
// argument or option is invalid.
func New(pods corev1client.PodsGetter, opts Options) (*Writer, error) {
	if pods == nil {
		return nil, errors.New("statuswriter: New needs a pods client")
	}
	if opts.ResyncInterval == 0 {
		opts.ResyncInterval = time.Minute
	}
	if opts.BackOff < 0 || opts.MaxBackOff < 0 || opts.SyncTimeout < 0 {
		return nil, errors.New("statuswriter: Options: negative backoff or timeout")
	}
	switch {
	case opts.Parallel < 0:
		return nil, errors.New("statuswriter: Options: negative Parallel")
	case opts.Parallel == 0:
		opts.Parallel = DefaultParallel
	}
	if opts.SyncTimeout == 0 {
		opts.SyncTimeout = 30 * time.Second
	}
	if opts.BackOff == 0 {
		opts.BackOff = 200 * time.Millisecond
	}
	if opts.MaxBackOff == 0 {
		opts.MaxBackOff = max(10*time.Second, opts.BackOff)
	}
	if opts.MaxBackOff < opts.BackOff {
		return nil, errors.New("statuswriter: Options: MaxBackOff below BackOff")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Writer{
		pods:     pods,
		opts:     opts,
		statuses: make(map[types.UID]recordedStatus),
		written:  make(map[types.UID]writtenStatus),
		seen:     make(map[types.UID]seenPod),
		early:    make(map[types.UID]struct{}),
		podLocks: uidLocks{held: make(map[types.UID]*uidLock)},
	}, nil
}

// SetPodStatus records status as the current status of pod and schedules a
// write. The writer keeps both (do not modify them afterwards). It never
// blocks. Only the newest status recorded is written; one equal to the
// status already written costs nothing.
func (w *Writer) SetPodStatus(pod *v1.Pod, status v1.PodStatus) {
	if pod == nil || pod.UID == "" {
		return
	}
	w.mu.Lock()
	prev, ok := w.statuses[pod.UID]
	if !ok || !equality.Semantic.DeepEqual(prev.status, status) {
		w.version++
		prev.version = w.version
	}
	w.statuses[pod.UID] = recordedStatus{pod: pod, status: status, version: prev.version}
	w.mu.Unlock()
	w.Enqueue(pod.UID)
}

// upToDate reports whether the API server holds version of uid's status,
// as written for mayRun, by a write or read recent enough that no resync
// is due.
func (w *Writer) upToDate(uid types.UID, version uint64, mayRun bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.written[uid]
	return ok && last.version == version && last.mayRun == mayRun &&
		(w.opts.ResyncInterval < 0 || w.opts.Clock.Since(last.at) < w.opts.ResyncInterval)
}

// setWritten records that the API server holds version of uid's status,
// or, with ok false, that the writer does not know what it holds.
func (w *Writer) setWritten(uid types.UID, version uint64, mayRun, ok bool) {
	if !ok {
		w.mu.Lock()
		delete(w.written, uid)
		w.mu.Unlock()
		return
	}
	w.setWrittenAt(uid, version, mayRun, w.opts.Clock.Now())
}

// setWrittenAt records that the API server held version of uid's status
// at the time at, from which the next resync is due.
func (w *Writer) setWrittenAt(uid types.UID, version uint64, mayRun bool, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, recorded := w.statuses[uid]; recorded {
		w.written[uid] = writtenStatus{version: version, mayRun: mayRun, at: at}
	}
}

// recorded returns the status recorded for uid, if any.
func (w *Writer) recorded(uid types.UID) (recordedStatus, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	rec, ok := w.statuses[uid]
	return rec, ok
}

// Enqueue schedules a check of the pod uid: its recorded status is written
// if it changed and, if it is deleted and finished, it is removed from the
// API server. It never blocks. After Run has returned it does nothing.
func (w *Writer) Enqueue(uid types.UID) {
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

// EnqueueAll schedules a check of every pod with a recorded status, each
// written again where the API server's differs: for when statuses in the
// API server may have changed behind the writer's back, as after the
// node's Node was deleted and registered again. It never blocks. Before
// Run starts and after it returned it does nothing.
func (w *Writer) EnqueueAll() {
	w.mu.Lock()
	clear(w.written)
	clear(w.seen)
	w.mu.Unlock()
	w.enqueueRecorded()
}

// enqueueRecorded schedules a check of every pod with a recorded status.
func (w *Writer) enqueueRecorded() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.queue == nil {
		return
	}
	for uid := range w.statuses {
		w.queue.Add(uid)
	}
}

// droppedCheckInterval is how often Run looks whether the pod workers
// dropped transitions it should have seen.
const droppedCheckInterval = time.Second

// Run writes statuses until ctx ends, then stops and returns nil once its
// goroutines have returned. It may be called once.
//
// window is where the writer learns how far each pod is (normally the
// agent's *podworker.PodWorkers). It is given here rather than to
// New because the pod workers are built over WrapSyncer, which
// needs the writer first. Call Run from a goroutine of its own.
//
// Each stage change of a worker schedules a check of its pod. Should the
// workers drop changes (a burst larger than the writer's buffer), every
// pod with a recorded status is checked again, so a finished pod is never
// left waiting for its resync.
func (w *Writer) Run(ctx context.Context, window Workers) error {
	if window == nil {
		return errors.New("statuswriter: Writer.Run needs a pod window")
	}
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](w.opts.BackOff, w.opts.MaxBackOff),
		workqueue.TypedRateLimitingQueueConfig[types.UID]{Clock: w.opts.Clock},
	)
	w.mu.Lock()
	if w.ran {
		w.mu.Unlock()
		queue.ShutDown()
		return errors.New("statuswriter: Writer.Run called twice")
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
	wg.Add(1 + w.opts.Parallel)
	go func() {
		defer wg.Done()
		ticker := w.opts.Clock.NewTicker(droppedCheckInterval)
		defer ticker.Stop()
		var dropped uint64
		for {
			select {
			case <-ctx.Done():
				return
			case tr := <-transitions:
				queue.Add(tr.UID)
			case <-ticker.C():
			}
			if d := sub.Dropped(); d != dropped {
				dropped = d
				w.opts.Logger.V(4).Info("Pod workers dropped transitions; checking every pod", "dropped", d)
				w.enqueueRecorded()
			}
		}
	}()
	// The queue hands a UID to one goroutine at a time, so each pod's
	// checks run one after the other, in order.
	for range w.opts.Parallel {
		go func() {
			defer wg.Done()
			for w.processNext(ctx, queue, window) {
			}
		}()
	}

	<-ctx.Done()
	sub.Close()
	w.mu.Lock()
	w.queue = nil
	w.mu.Unlock()
	queue.ShutDown()
	wg.Wait()
	return nil
}

func (w *Writer) processNext(ctx context.Context, queue workqueue.TypedRateLimitingInterface[types.UID], window Workers) bool {
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
		delete(w.written, uid)
		delete(w.seen, uid)
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

// uidLocks is a mutex per UID, kept only while someone holds or waits for
// it.
type uidLocks struct {
	mu   sync.Mutex
	held map[types.UID]*uidLock
}

type uidLock struct {
	sync.Mutex
	// users counts the holder and the waiters.
	users int
}

// lock locks uid's mutex and returns its unlock.
func (l *uidLocks) lock(uid types.UID) (unlock func()) {
	l.mu.Lock()
	m := l.held[uid]
	if m == nil {
		m = &uidLock{}
		l.held[uid] = m
	}
	m.users++
	l.mu.Unlock()
	m.Lock()
	return func() {
		m.Unlock()
		l.mu.Lock()
		if m.users--; m.users == 0 {
			delete(l.held, uid)
		}
		l.mu.Unlock()
	}
}
