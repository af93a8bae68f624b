package statuswriter_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podkit/podkit/examples/kube/statuswriter"
	"github.com/podkit/podkit/podworker"
)

// window is a Workers whose pods all run: it knows the pods it is given,
// each of which may have running containers and none of which is finished.
type window struct {
	*podworker.PodWorkers[struct{}] // Subscribe
	pods                            map[types.UID]*v1.Pod
}

func (w *window) Pod(uid types.UID) (podworker.PodInfo, bool) {
	p, ok := w.pods[uid]
	return podworker.PodInfo{UID: uid, Pod: p}, ok
}
func (w *window) CouldHaveRunningContainers(types.UID) bool { return true }
func (w *window) ShouldPodBeFinished(types.UID) bool        { return false }

// writerEnv is a Writer over a fake API server holding pods, with the
// calls it gets recorded and its status patches held while gate says so.
type writerEnv struct {
	t      *testing.T
	client *fake.Clientset
	writer *statuswriter.Writer
	clock  *testingclock.FakeClock
	pods   map[types.UID]*v1.Pod

	mu sync.Mutex
	// patched lists the pods' names in the order their patches arrived,
	// and inFlight and maxInFlight count the patches held at once.
	patched               []string
	inFlight, maxInFlight int
	// hold, when set for a name, holds that pod's patches until the
	// channel is closed.
	hold map[string]chan struct{}
	// conflicts counts the patches refused for their resourceVersion.
	conflicts int
	// gets counts the reads of each pod.
	gets map[string]int
	// rv is each pod's resourceVersion, as the API server's: the reads and
	// patches return it, a patch carrying another is refused with a
	// conflict, and each accepted patch (and change) moves it on. (The
	// fake clientset keeps none.)
	rv map[string]int
}

func newWriterEnv(t *testing.T, parallel int, names ...string) *writerEnv {
	e := &writerEnv{
		t: t, clock: testingclock.NewFakeClock(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)),
		pods: map[types.UID]*v1.Pod{}, hold: map[string]chan struct{}{}, gets: map[string]int{}, rv: map[string]int{},
	}
	var objs []runtime.Object
	for _, name := range names {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
		e.pods[p.UID] = p
		e.rv[name] = 1
		objs = append(objs, p.DeepCopy())
	}
	e.client = fake.NewClientset(objs...)
	var err error
	e.writer, err = statuswriter.New(podsGetter{e}, statuswriter.Options{Parallel: parallel, Clock: e.clock, ResyncInterval: time.Minute})
	require.NoError(t, err)
	return e
}

// podsGetter is the fake API server's pods, with the reads counted and the
// patches recorded and held (the fake clientset holds a lock while its
// reactors run, so they cannot hold one call and let others through).
type podsGetter struct{ e *writerEnv }

func (g podsGetter) Pods(ns string) corev1client.PodInterface {
	return &podsClient{PodInterface: g.e.client.CoreV1().Pods(ns), e: g.e}
}

type podsClient struct {
	corev1client.PodInterface
	e *writerEnv
}

func (c *podsClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Pod, error) {
	c.e.mu.Lock()
	c.e.gets[name]++
	rv := c.e.rv[name]
	c.e.mu.Unlock()
	p, err := c.PodInterface.Get(ctx, name, opts)
	if err == nil {
		p.ResourceVersion = strconv.Itoa(rv)
	}
	return p, err
}

func (c *podsClient) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1.Pod, error) {
	e := c.e
	e.mu.Lock()
	e.patched = append(e.patched, name)
	e.inFlight++
	e.maxInFlight = max(e.maxInFlight, e.inFlight)
	hold := e.hold[name]
	e.mu.Unlock()
	if hold != nil {
		<-hold
	}
	defer func() {
		e.mu.Lock()
		e.inFlight--
		e.mu.Unlock()
	}()
	var precondition struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &precondition); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if want := precondition.Metadata.ResourceVersion; want != "" && want != strconv.Itoa(e.rv[name]) {
		e.conflicts++
		return nil, apierrors.NewConflict(v1.Resource("pods"), name, errors.New("the object has been modified"))
	}
	p, err := c.PodInterface.Patch(ctx, name, pt, data, opts, subresources...)
	if err == nil {
		e.rv[name]++
		p.ResourceVersion = strconv.Itoa(e.rv[name])
	}
	return p, err
}

// update stores p (of namespace ns) as someone other than the writer
// would, moving its resourceVersion on.
func (e *writerEnv) update(p *v1.Pod) {
	e.mu.Lock()
	defer e.mu.Unlock()
	require.NoError(e.t, e.client.Tracker().Update(v1.SchemeGroupVersion.WithResource("pods"), p, "ns"))
	e.rv[p.Name]++
}

// run runs the writer until the test ends.
func (e *writerEnv) run() {
	workers, err := podworker.New[struct{}](podworker.PodSyncerFuncs[struct{}]{}, podworker.Options[struct{}]{})
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.writer.Run(ctx, &window{PodWorkers: workers, pods: e.pods}) }()
	e.t.Cleanup(func() {
		cancel()
		require.NoError(e.t, <-done)
	})
}

// holdPatches holds name's patches until the returned release is called.
func (e *writerEnv) holdPatches(name string) (release func()) {
	ch := make(chan struct{})
	e.mu.Lock()
	e.hold[name] = ch
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		delete(e.hold, name)
		e.mu.Unlock()
		close(ch)
	}
}

func (e *writerEnv) set(name string, phase v1.PodPhase, conditions ...v1.PodCondition) {
	e.writer.SetPodStatus(e.pods[types.UID("uid-"+name)], v1.PodStatus{Phase: phase, Conditions: conditions})
}

func (e *writerEnv) stored(name string) v1.PodStatus {
	p, err := e.client.Tracker().Get(v1.SchemeGroupVersion.WithResource("pods"), "ns", name)
	require.NoError(e.t, err)
	return p.(*v1.Pod).Status
}

func (e *writerEnv) patches(name string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, p := range e.patched {
		if p == name {
			n++
		}
	}
	return n
}

func (e *writerEnv) reads(name string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.gets[name]
}

var scheduled = v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue}

// TestWriterCoalescesQueuedStatuses: the statuses a pod passes through
// while its write waits in the queue give one write, of the newest.
func TestWriterCoalescesQueuedStatuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newWriterEnv(t, 1, "busy", "p")
		release := e.holdPatches("busy")
		e.run()
		e.set("busy", v1.PodRunning)
		synctest.Wait() // the one writer is held in busy's patch

		e.set("p", v1.PodPending)
		e.set("p", v1.PodPending, scheduled)
		e.set("p", v1.PodRunning, scheduled)
		synctest.Wait()
		assert.Zero(t, e.patches("p"), "p waits for the writer")
		release()
		synctest.Wait()

		assert.Equal(t, 1, e.patches("p"), "one write for the three statuses")
		assert.Equal(t, v1.PodRunning, e.stored("p").Phase, "the newest status is written")
		assert.Len(t, e.stored("p").Conditions, 1)
	})
}

// TestWriterWritesInParallelWithinItsBound: up to Options.Parallel pods'
// writes are in flight at once, never more.
func TestWriterWritesInParallelWithinItsBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		names := []string{"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"}
		e := newWriterEnv(t, 3, names...)
		var releases []func()
		for _, n := range names {
			releases = append(releases, e.holdPatches(n))
		}
		e.run()
		for _, n := range names {
			e.set(n, v1.PodRunning)
		}
		synctest.Wait()
		e.mu.Lock()
		assert.Equal(t, 3, e.inFlight, "three writes at once")
		e.mu.Unlock()

		for _, r := range releases {
			r()
		}
		synctest.Wait()
		for _, n := range names {
			assert.Equal(t, v1.PodRunning, e.stored(n).Phase, n)
		}
		assert.Equal(t, 3, e.maxInFlight, "never more than Parallel")
	})
}

// TestWriterKeepsEachPodsOrder: a pod's next write waits for its current
// one, even with writers to spare, and the newest status lands last.
func TestWriterKeepsEachPodsOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newWriterEnv(t, 4, "p")
		release := e.holdPatches("p")
		e.run()
		e.set("p", v1.PodPending)
		synctest.Wait()
		e.set("p", v1.PodRunning)
		synctest.Wait()
		e.mu.Lock()
		assert.Equal(t, 1, e.inFlight, "the second write waits for the first")
		e.mu.Unlock()

		release()
		synctest.Wait()
		assert.Equal(t, 2, e.patches("p"))
		assert.Equal(t, v1.PodRunning, e.stored("p").Phase, "the newer status is the one stored")
	})
}

// TestWriterNeverRegressesATerminalPhase: a terminal phase someone else
// stored behind the writer's back stays, though the writer last wrote
// Running and records Running again.
func TestWriterNeverRegressesATerminalPhase(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newWriterEnv(t, 2, "p")
		e.run()
		e.set("p", v1.PodRunning)
		synctest.Wait()
		require.Equal(t, v1.PodRunning, e.stored("p").Phase)

		failed := e.pods["uid-p"].DeepCopy()
		failed.Status = v1.PodStatus{Phase: v1.PodFailed, Reason: "NodeLost"}
		e.update(failed)
		e.set("p", v1.PodRunning, scheduled)
		synctest.Wait()

		assert.Equal(t, v1.PodFailed, e.stored("p").Phase, "Failed is never left")
	})
}

// TestWriterSkipsAStatusItWrote: a status recorded again unchanged costs
// no API call until the pod's resync, which reads it again.
func TestWriterSkipsAStatusItWrote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newWriterEnv(t, 2, "p")
		e.run()
		e.set("p", v1.PodRunning, scheduled)
		synctest.Wait()
		require.Equal(t, 1, e.reads("p"))
		require.Equal(t, 1, e.patches("p"))

		e.set("p", v1.PodRunning, scheduled)
		e.writer.Enqueue("uid-p")
		synctest.Wait()
		assert.Equal(t, 1, e.reads("p"), "an unchanged status is not read again")
		assert.Equal(t, 1, e.patches("p"))

		e.clock.Step(time.Minute)
		synctest.Wait()
		assert.Equal(t, 2, e.reads("p"), "the resync reads it")
		assert.Equal(t, 1, e.patches("p"), "and finds nothing to write")

		e.writer.EnqueueAll()
		synctest.Wait()
		assert.Equal(t, 3, e.reads("p"), "EnqueueAll reads every pod again")
	})
}

// TestWriterWritesFromTheWatchedPodWithoutARead: a pod the workers have
// with its resourceVersion (as a watch gives it) has its statuses written
// with a patch each and no read, the first from the workers' copy, the
// next from the answer to the one before.
func TestWriterWritesFromTheWatchedPodWithoutARead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newWriterEnv(t, 2, "p")
		e.pods["uid-p"].ResourceVersion = "1"
		e.run()
		e.set("p", v1.PodPending, scheduled)
		synctest.Wait()
		e.set("p", v1.PodRunning, scheduled)
		synctest.Wait()

		assert.Equal(t, v1.PodRunning, e.stored("p").Phase)
		assert.Len(t, e.stored("p").Conditions, 1)
		assert.Equal(t, 2, e.patches("p"), "a patch per status")
		assert.Zero(t, e.reads("p"), "and no read")
		assert.Zero(t, e.conflicts)
	})
}

// TestWriterReadsAPodChangedBehindItsBack: a write whose copy of the pod is
// out of date (someone else changed the pod since) is refused with a
// conflict, and the writer reads the pod and writes over what it holds:
// the condition someone else set is kept.
func TestWriterReadsAPodChangedBehindItsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newWriterEnv(t, 2, "p")
		e.pods["uid-p"].ResourceVersion = "1"
		e.run()
		e.set("p", v1.PodPending, scheduled)
		synctest.Wait()
		require.Zero(t, e.reads("p"))

		other := v1.PodCondition{Type: "example.com/Gate", Status: v1.ConditionTrue}
		changed := e.pods["uid-p"].DeepCopy()
		changed.Status = e.stored("p")
		changed.Status.Conditions = append(changed.Status.Conditions, other)
		e.update(changed)
		e.set("p", v1.PodRunning, scheduled)
		synctest.Wait()

		assert.Equal(t, 1, e.conflicts, "the patch from the old copy is refused")
		assert.Equal(t, 1, e.reads("p"), "then the pod is read")
		stored := e.stored("p")
		assert.Equal(t, v1.PodRunning, stored.Phase)
		assert.Len(t, stored.Conditions, 2, "someone else's condition is kept")
	})
}

// TestWriterSendsNothingForTheStatusTheAPIServerReturned: a new status
// that the rules turn into the one the API server returned to the
// writer's last patch (here a condition's transition time, which the
// stored one keeps) sends nothing, neither a read nor a patch, until the
// resync reads the pod as it would anyway.
func TestWriterSendsNothingForTheStatusTheAPIServerReturned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newWriterEnv(t, 2, "p")
		e.pods["uid-p"].ResourceVersion = "1"
		e.run()
		ready := v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Unix(100, 0))}
		e.set("p", v1.PodRunning, scheduled, ready)
		synctest.Wait()
		require.Equal(t, 1, e.patches("p"))
		require.Zero(t, e.reads("p"))

		ready.LastTransitionTime = metav1.NewTime(time.Unix(200, 0))
		e.set("p", v1.PodRunning, scheduled, ready)
		synctest.Wait()
		assert.Equal(t, 1, e.patches("p"), "nothing to patch")
		assert.Zero(t, e.reads("p"), "and nothing read: the API server returned this very status")
		assert.Equal(t, int64(100), e.stored("p").Conditions[1].LastTransitionTime.Unix(), "the stored transition time is kept")

		e.clock.Step(time.Minute)
		synctest.Wait()
		assert.Equal(t, 1, e.reads("p"), "the resync reads it")
		assert.Equal(t, 1, e.patches("p"), "and finds nothing to write")
	})
}
