package lifecycle_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/lifecycle/admission"
	"github.com/podkit/podkit/lifecycle/podconfig"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
)

// gatedSource is a config source that sends the snapshots the test hands
// it, under its name, and nothing before the first.
type gatedSource struct {
	name      string
	snapshots chan []*v1.Pod
}

func newGatedSource(name string) *gatedSource {
	return &gatedSource{name: name, snapshots: make(chan []*v1.Pod)}
}

func (s *gatedSource) Source() string { return s.name }

func (s *gatedSource) Run(ctx context.Context, sink podconfig.PodSink) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case pods := <-s.snapshots:
			if err := sink.SetPods(ctx, s.name, pods); err != nil {
				return err
			}
		}
	}
}

// send hands the source a snapshot and waits until the agent is idle.
func (s *gatedSource) send(pods ...*v1.Pod) {
	s.snapshots <- pods
	synctest.Wait()
}

// The kubelet's rule, which the assembly keeps: an agent restarted with
// pods still running in the runtime takes nothing for an orphan before
// every source has delivered its pods. Here two sources, the API server and
// the manifests; the runtime holds a pod the API server will send (which
// must survive) and one nobody wants (which must go, but only then).
func TestAgentKillsNoOrphanBeforeEverySourceDelivered(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.runtime.set(
			podworker.RuntimePod{UID: "kept", Namespace: "default", Name: "web"},
			podworker.RuntimePod{UID: "stray", Namespace: "default", Name: "old"},
		)
		api, files := newGatedSource(mirror.ApiserverSource), newGatedSource(mirror.FileSource)
		require.NoError(t, e.agent.AddSource(api))
		require.NoError(t, e.agent.AddSource(files))
		e.start()

		for range 5 {
			e.housekeep()
		}
		api.send(apiPod("kept", "web", 0))
		for range 5 {
			e.housekeep()
		}
		assert.False(t, e.h.SourcesReady(), "the manifests have not spoken")
		assert.Equal(t, "sync:create", e.trace("kept"), "the pod the API server sent runs: it is adopted, not killed")
		assert.Empty(t, e.trace("stray"), "nothing is taken for an orphan while a source is silent")
		_, known := e.workers.Pod("stray")
		assert.False(t, known)

		files.send()
		require.True(t, e.h.SourcesReady())
		e.housekeep()
		assert.Equal(t, "kill-runtime", e.trace("stray"), "once every source spoke, the stray pod is killed as an orphan")
		assert.Equal(t, "sync:create", e.trace("kept"))
	})
}

// stepLog records what the agent's parts did, in order.
type stepLog struct {
	mu    sync.Mutex
	steps []string
}

func (l *stepLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.steps = append(l.steps, s)
}

func (l *stepLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.steps)
}

// Runnables stop after the sync loop has drained the workers, so what the
// last hooks report still gets out; sources and runnables all start.
func TestAgentRunStopsRunnablesAfterTheWorkers(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t, nil)
		var log stepLog
		require.NoError(t, e.agent.Add("recorder", lifecycle.RunnableFunc(func(ctx context.Context) error {
			log.add("recorder started")
			<-ctx.Done()
			// The hook was held until the agent was told to stop; it has
			// returned by now.
			if e.syncer.InFlight() == 0 {
				log.add("recorder stopped after the hooks")
			}
			return ctx.Err()
		})))
		src := newGatedSource(mirror.ApiserverSource)
		require.NoError(t, e.agent.AddSource(src))
		e.start()
		assert.Equal(t, []string{"recorder started"}, log.all())

		gate := e.syncer.Hold("slow", podworker.HookSyncPod)
		src.send(apiPod("slow", "slow", 0))
		require.NoError(t, gate.Wait(e.ctx))
		e.shutdown()
		select {
		case <-gate.Returned():
		default:
			t.Fatal("Run returned while a hook still ran")
		}
		assert.Equal(t, []string{"recorder started", "recorder stopped after the hooks"}, log.all())
		assert.ErrorIs(t, e.workers.UpdatePod(t.Context(), podworker.UpdatePodOptions{Pod: apiPod("x", "x", 0)}), podworker.ErrStopped)
		assert.ErrorContains(t, e.agent.Run(t.Context()), "called twice")
	})
}

// The first failure stops every part and is what Run returns, naming the
// part; an error that only says ctx ended is not a failure.
func TestAgentRunFirstErrorStopsTheRest(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t, nil)
		boom := errors.New("boom")
		var stopped stepLog
		require.NoError(t, e.agent.Add("heartbeat", lifecycle.RunnableFunc(func(ctx context.Context) error {
			<-ctx.Done()
			stopped.add("heartbeat")
			return ctx.Err()
		})))
		failing, err := podconfig.NewSource("broken", func(ctx context.Context, _ podconfig.PodSink) error { return boom })
		require.NoError(t, err)
		require.NoError(t, e.agent.AddSource(failing))
		err = e.agent.Run(t.Context())
		require.ErrorIs(t, err, boom)
		assert.ErrorContains(t, err, `lifecycle: source "broken": boom`)
		assert.Equal(t, []string{"heartbeat"}, stopped.all(), "the other parts were stopped")
	})
}

// A runnable that is done early is no failure: the agent goes on.
func TestAgentRunnableMayReturnEarly(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t, nil)
		require.NoError(t, e.agent.Add("once", lifecycle.RunnableFunc(func(context.Context) error { return nil })))
		e.start()
		e.set(mirror.ApiserverSource, apiPod("p", "p", 0))
		assert.Equal(t, "sync:create", e.trace("p"), "the agent still runs")
	})
}

func TestAgentAddValidates(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t, nil)
		nop := lifecycle.RunnableFunc(func(ctx context.Context) error { <-ctx.Done(); return nil })
		assert.ErrorContains(t, e.agent.Add("x", nil), "needs a runnable")
		assert.ErrorContains(t, e.agent.Add("", nop), "needs a name")
		assert.ErrorContains(t, e.agent.AddSource(nil), "needs a source")
		require.NoError(t, e.agent.Add("x", nop))
		assert.ErrorContains(t, e.agent.Add("x", nop), `already has a source or runnable named "x"`)
		require.NoError(t, e.agent.AddSource(newGatedSource("api")))
		assert.ErrorContains(t, e.agent.AddSource(newGatedSource("api")), `named "api"`)
		e.start()
		assert.ErrorContains(t, e.agent.Add("late", nop), "already runs")
		assert.ErrorContains(t, e.agent.AddSource(newGatedSource("late")), "already runs")

		_, err := lifecycle.NewAgent[struct{}](nil, lifecycle.AgentOptions[struct{}]{})
		assert.ErrorContains(t, err, "lifecycle: NewAgent needs a PodSyncer")
		_, err = lifecycle.NewAgent[struct{}](e.syncer, lifecycle.AgentOptions[struct{}]{Workers: podworker.Options[struct{}]{MaxConcurrentSyncs: -1}})
		assert.ErrorContains(t, err, "lifecycle: NewAgent: podworker:")
		_, err = lifecycle.NewAgent[struct{}](e.syncer, lifecycle.AgentOptions[struct{}]{Config: podconfig.Options{Buffer: -1}})
		assert.ErrorContains(t, err, "lifecycle: NewAgent: podconfig:")
		_, err = lifecycle.NewAgent[struct{}](e.syncer, lifecycle.AgentOptions[struct{}]{SyncLoop: lifecycle.SyncLoopOptions{HousekeepingInterval: -1}})
		assert.ErrorContains(t, err, "lifecycle: SyncLoopOptions.HousekeepingInterval")
	})
}

// RequestSync, the one way in for runtime events: it coalesces, never
// blocks, and does nothing for a UID the workers do not know (a rejected
// pod, a mirror pod's UID, garbage) or once the agent stopped.
func TestAgentRequestSync(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t, func(o *lifecycle.SyncLoopOptions) { o.AdmitHandlers = []admission.Handler{rejectNamed("refused")} })
		e.start()
		e.set(mirror.ApiserverSource, apiPod("p", "p", 0), apiPod("r", "refused", 1))
		require.Equal(t, "sync:create", e.trace("p"))

		gate := e.syncer.Hold("p", podworker.HookSyncPod)
		e.agent.RequestSync("p")
		require.NoError(t, gate.Wait(e.ctx))
		for range 10 {
			e.agent.RequestSync("p") // while the hook runs: coalesced into one more run
		}
		e.agent.RequestSync("r")
		e.agent.RequestSync("nobody")
		gate.Release()
		synctest.Wait()
		assert.Equal(t, "sync:create sync:sync sync:sync", e.trace("p"))
		assert.Empty(t, e.trace("r"), "a rejected pod is never synced")
		_, known := e.workers.Pod("nobody")
		assert.False(t, known, "nothing is recorded for an unknown UID")

		e.shutdown()
		e.agent.RequestSync("p")
		assert.Equal(t, "sync:create sync:sync sync:sync", e.trace("p"), "a no-op once the agent stopped")
	})
}

// podLoop is a per-pod loop that keeps a set of UIDs, as a probe manager
// would.
type podLoop struct {
	mu   sync.Mutex
	pods map[types.UID]string
	log  []string
}

func (l *podLoop) Run(ctx context.Context) error { <-ctx.Done(); return nil }

func (l *podLoop) PodUpdated(pod *v1.Pod) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pods[pod.UID] = pod.Spec.Containers[0].Image
	l.log = append(l.log, "updated "+string(pod.UID)+" "+pod.Spec.Containers[0].Image)
}

func (l *podLoop) PodForgotten(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pods, uid)
	l.log = append(l.log, "forgotten "+string(uid))
}

func (l *podLoop) events() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.log)
}

// A per-pod loop added to the agent hears of the pods the sync loop hands
// the workers, and of those the workers forgot; never of a rejected pod.
func TestAgentTellsPodObservers(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t, func(o *lifecycle.SyncLoopOptions) { o.AdmitHandlers = []admission.Handler{rejectNamed("refused")} })
		loop := &podLoop{pods: map[types.UID]string{}}
		require.NoError(t, e.agent.Add("probes", loop))
		e.start()

		e.set(mirror.ApiserverSource, apiPod("p", "p", 0), apiPod("r", "refused", 1))
		changed := apiPod("p", "p", 0)
		changed.Spec.Containers[0].Image = "app:2"
		e.set(mirror.ApiserverSource, changed)
		assert.Equal(t, []string{"updated p app:1", "updated p app:2"}, loop.events())

		e.set(mirror.ApiserverSource)
		require.Equal(t, podworker.StageFinished, e.stage("p"))
		assert.Len(t, loop.events(), 2, "a pod being stopped is not announced: the window says so")
		e.housekeep()
		assert.Equal(t, []string{"updated p app:1", "updated p app:2", "forgotten p"}, loop.events())
		assert.Empty(t, loop.pods)
	})
}

// rejectNamed rejects the pods called name.
func rejectNamed(name string) admission.Handler {
	return admission.HandlerFunc(func(_ context.Context, attrs *admission.Attributes) admission.Result {
		if attrs.Pod.Name == name {
			return admission.Result{Reason: "Refused", Message: "not here"}
		}
		return admission.Result{Admit: true}
	})
}

// The one orphan kill: a RunningPod kill with a grace period of 1 second
// for each runtime pod the workers do not know; known pods, pods without a
// UID and refused kills are not reported.
func TestKillRuntimeOrphans(t *testing.T) {
	var got []podworker.UpdatePodOptions
	update := func(_ context.Context, o podworker.UpdatePodOptions) error {
		got = append(got, o)
		if o.RunningPod.UID == "refused" {
			return errors.New("no")
		}
		return nil
	}
	known := map[types.UID]podworker.WorkerReport{"known": {}}
	running := []podworker.RuntimePod{{UID: "known"}, {UID: ""}, {UID: "orphan", Namespace: "ns", Name: "o"}, {UID: "refused"}}
	killed := lifecycle.KillRuntimeOrphans(t.Context(), update, known, running, epoch)
	assert.Equal(t, []types.UID{"orphan"}, killed)
	require.Len(t, got, 2)
	o := got[0]
	assert.Equal(t, podworker.SyncPodKill, o.UpdateType)
	assert.Equal(t, &podworker.RuntimePod{UID: "orphan", Namespace: "ns", Name: "o"}, o.RunningPod)
	require.NotNil(t, o.KillPodOptions)
	assert.Equal(t, lifecycle.OrphanGracePeriodSeconds, *o.KillPodOptions.PodTerminationGracePeriodSecondsOverride)
	assert.Equal(t, int64(1), lifecycle.OrphanGracePeriodSeconds)
	assert.Equal(t, epoch, o.StartTime)
}

// A loop whose type has only Run and a forget method of its own is added
// as a PodLoop, and hears what the sync loop tells.
func TestAgentPodLoopAdapters(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t, nil)
		var updated, forgotten []types.UID
		require.NoError(t, e.agent.Add("deadline", lifecycle.PodLoop{
			Runnable: lifecycle.RunnableFunc(func(ctx context.Context) error { <-ctx.Done(); return nil }),
			PodObserver: lifecycle.PodObserverFuncs{
				PodUpdatedFunc:   func(pod *v1.Pod) { updated = append(updated, pod.UID) },
				PodForgottenFunc: func(uid types.UID) { forgotten = append(forgotten, uid) },
			},
		}))
		e.start()
		e.set(mirror.ApiserverSource, apiPod("p", "p", 0))
		e.set(mirror.ApiserverSource)
		e.housekeep()
		assert.Equal(t, []types.UID{"p"}, updated)
		assert.Equal(t, []types.UID{"p"}, forgotten)
		assert.NotPanics(t, func() { lifecycle.PodObserverFuncs{}.PodForgotten("x") }, "a nil func does nothing")
	})
}
