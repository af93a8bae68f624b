package lifecycle_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/lifecycle/admission"
	"github.com/podkit/podkit/lifecycle/podconfig"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
)

func uids(pods []*v1.Pod) []types.UID {
	var out []types.UID
	for _, p := range pods {
		out = append(out, p.UID)
	}
	return out
}

func TestAdditionsWithAdmissionRejection(t *testing.T) {
	bubble(t, func(t *testing.T) {
		maxPods, err := admission.NewMaxPodsHandler(2)
		require.NoError(t, err)
		fit, err := admission.NewResourceFitHandler(func() v1.ResourceList {
			return v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi")}
		})
		require.NoError(t, err)
		e := newEnv(t, func(o *lifecycle.SyncLoopOptions) {
			o.AdmitHandlers = []admission.Handler{maxPods, fit}
		})
		e.start()

		a := withCPU(apiPod("a", "a", 1), "500m")
		b := withCPU(apiPod("b", "b", 2), "600m") // does not fit next to a
		c := withCPU(apiPod("c", "c", 3), "100m")
		d := withCPU(apiPod("d", "d", 4), "1") // neither fits nor has room: max pods is asked first
		// The snapshot is out of order: additions go by creation time.
		e.set(mirror.ApiserverSource, d, c, b, a)

		assert.Equal(t, "sync:create", e.trace("a"))
		assert.Equal(t, "sync:create", e.trace("c"))
		for _, uid := range []types.UID{"b", "d"} {
			_, known := e.workers.Pod(uid)
			assert.False(t, known, "rejected pod %s must never reach the workers", uid)
			_, stored := e.store.GetPodByUID(uid)
			assert.True(t, stored, "a rejected pod stays desired")
		}
		rej := e.rejections()
		require.Len(t, rej, 2)
		assert.Equal(t, types.UID("b"), rej[0].UID)
		assert.Equal(t, v1.PodFailed, rej[0].Status.Phase)
		assert.Equal(t, admission.ReasonOutOfCPU, rej[0].Status.Reason)
		assert.Equal(t, "Pod was rejected: Node didn't have enough resource: cpu, requested: 600, used: 500, capacity: 1000", rej[0].Status.Message)
		assert.Equal(t, types.UID("d"), rej[1].UID)
		assert.Equal(t, admission.ReasonOutOfPods, rej[1].Status.Reason, "the first rejection wins")
		assert.Equal(t, []string{"OutOfcpu b_default", "OutOfpods d_default"}, e.events.reasons())
		assert.ElementsMatch(t, []types.UID{"a", "c"}, uids(e.h.GetActivePods()))

		// Neither an update nor housekeeping brings a rejected pod to the workers.
		b2 := b.DeepCopy()
		b2.Labels = map[string]string{"v": "2"}
		e.set(mirror.ApiserverSource, d, c, b2, a)
		e.housekeep()
		_, known := e.workers.Pod("b")
		assert.False(t, known)

		// Once a is gone and terminated, its resources are free again: a
		// new pod of the same size fits.
		e.set(mirror.ApiserverSource, d, c, b2)
		assert.Equal(t, "sync:create kill(30) terminated", e.trace("a"))
		a2 := withCPU(apiPod("a2", "a2", 5), "500m")
		e.set(mirror.ApiserverSource, d, c, b2, a2)
		assert.Equal(t, "sync:create", e.trace("a2"))
		assert.Len(t, e.rejections(), 2)

		// Removing a rejected pod only forgets it.
		e.set(mirror.ApiserverSource, c, a2)
		_, known = e.workers.Pod("b")
		assert.False(t, known)
		assert.Equal(t, 0, e.syncer.Count("b", podworker.HookSyncTerminatingPod))
	})
}

func TestUpdates(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.start()
		pod := apiPod("u1", "web", 0)
		e.set(mirror.ApiserverSource, pod)

		updated := pod.DeepCopy()
		updated.Labels = map[string]string{"tier": "front"}
		e.set(mirror.ApiserverSource, updated)

		// A status-only change is a RECONCILE: no sync without readiness gates.
		statusOnly := updated.DeepCopy()
		statusOnly.Status.Phase = v1.PodRunning
		e.set(mirror.ApiserverSource, statusOnly)

		assert.Equal(t, "sync:create sync:update", e.trace("u1"))
		calls := e.syncer.CallsFor("u1")
		assert.Equal(t, "front", calls[1].Pod.Labels["tier"])
		stored, _ := e.store.GetPodByUID("u1")
		assert.Equal(t, v1.PodRunning, stored.Status.Phase, "a reconcile still updates the store")
	})
}

func TestReconcileSyncsWhenReadinessDisagrees(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.start()
		pod := apiPod("r1", "gated", 0)
		pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/ready"}}
		pod.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "app", Ready: true}}
		pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}}
		e.set(mirror.ApiserverSource, pod)

		// The gate turns true but Ready still says false: the worker must
		// sync so the status is corrected.
		gated := pod.DeepCopy()
		gated.Status.Conditions = append(gated.Status.Conditions, v1.PodCondition{Type: "example.com/ready", Status: v1.ConditionTrue})
		e.set(mirror.ApiserverSource, gated)
		assert.Equal(t, "sync:create sync:sync", e.trace("r1"))

		// Ready now agrees: nothing more to do.
		agreed := gated.DeepCopy()
		agreed.Status.Conditions[0].Status = v1.ConditionTrue
		e.set(mirror.ApiserverSource, agreed)
		assert.Equal(t, "sync:create sync:sync", e.trace("r1"))
	})
}

func TestDeletionWithGrace(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.start()
		pod := apiPod("d1", "web", 0)
		e.set(mirror.ApiserverSource, pod)

		deleting := pod.DeepCopy()
		now := metav1.NewTime(epoch)
		grace := int64(10)
		deleting.DeletionTimestamp = &now
		deleting.DeletionGracePeriodSeconds = &grace
		e.set(mirror.ApiserverSource, deleting)

		assert.Equal(t, "sync:create kill(10) terminated", e.trace("d1"))
		info, ok := e.workers.Pod("d1")
		require.True(t, ok)
		assert.True(t, info.Deleted)
		assert.True(t, info.Finished)

		// The API server removes it; housekeeping forgets the worker.
		e.set(mirror.ApiserverSource)
		e.housekeep()
		assert.Equal(t, podworker.StageAbsent, e.stage("d1"))
		assert.Equal(t, "sync:create kill(10) terminated", e.trace("d1"), "removal after termination runs nothing again")
	})
}

func TestRemoval(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.start()
		keep, gone := apiPod("k1", "keep", 0), apiPod("g1", "gone", 1)
		e.set(mirror.ApiserverSource, keep, gone)
		e.set(mirror.ApiserverSource, keep)

		assert.Equal(t, "sync:create kill(30) terminated", e.trace("g1"))
		assert.Equal(t, "sync:create", e.trace("k1"))
		_, stored := e.store.GetPodByUID("g1")
		assert.False(t, stored)
		e.housekeep()
		assert.Equal(t, podworker.StageAbsent, e.stage("g1"))
		assert.Equal(t, podworker.StageSyncing, e.stage("k1"))
	})
}

func TestRemovalWaitsForSourcesReady(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t, func(o *lifecycle.SyncLoopOptions) {
			o.Sources = []string{mirror.ApiserverSource, mirror.FileSource}
		})
		e.start()
		e.set(mirror.ApiserverSource, apiPod("p1", "web", 0))
		e.set(mirror.ApiserverSource)
		assert.False(t, e.h.SourcesReady())
		assert.Equal(t, "sync:create", e.trace("p1"), "no kill before every source has spoken")
		e.housekeep()
		assert.Equal(t, "sync:create", e.trace("p1"), "no housekeeping either")

		e.set(mirror.FileSource)
		assert.True(t, e.h.SourcesReady())
		e.housekeep()
		// Housekeeping found the worker orphaned and terminated it.
		assert.Equal(t, "sync:create kill(30) terminated", e.trace("p1"))
		e.housekeep()
		assert.Equal(t, podworker.StageAbsent, e.stage("p1"))
	})
}

func TestStaticPodWithMirrorCreation(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.start()
		static := staticPod(t, "", "etcd")
		name := mirror.PodFullName(static)
		e.set(mirror.FileSource, static)
		assert.Equal(t, "sync:create", e.trace(static.UID))

		e.housekeep()
		require.Equal(t, []string{name}, e.mirrors.MirrorPodNames())
		m, _ := e.mirrors.MirrorPod(name)
		assert.True(t, mirror.IsMirrorPodOf(m, static))

		// The API server sends the mirror back: it goes to the static pod's
		// worker, never to a worker of its own.
		apiMirror := mirrorOf(static, "mirror-uid-1")
		e.set(mirror.ApiserverSource, apiMirror)
		assert.Equal(t, "sync:create sync:update", e.trace(static.UID))
		calls := e.syncer.CallsFor(static.UID)
		require.NotNil(t, calls[1].MirrorPod)
		assert.Equal(t, types.UID("mirror-uid-1"), calls[1].MirrorPod.UID)
		_, known := e.workers.Pod("mirror-uid-1")
		assert.False(t, known)
		assert.Equal(t, static.UID, e.store.TranslatePodUID("mirror-uid-1"))

		// Housekeeping with a current mirror in place does nothing.
		creates := len(e.mirrors.Creates())
		e.housekeep()
		assert.Len(t, e.mirrors.Creates(), creates)
		assert.Empty(t, e.mirrors.Deletes())
	})
}

func TestStaleMirrorReplaced(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.start()
		static := staticPod(t, "", "etcd")
		name := mirror.PodFullName(static)
		// A mirror of an older version is in the API server.
		old := static.DeepCopy()
		old.Annotations[mirror.ConfigHashAnnotationKey] = "old-hash"
		oldMirror := mirrorOf(old, "mirror-old")
		e.mirrors.AddMirrorPod(oldMirror)
		e.set(mirror.ApiserverSource, oldMirror)
		e.set(mirror.FileSource, static)

		e.housekeep()
		deletes := e.mirrors.Deletes()
		require.Len(t, deletes, 1)
		assert.Equal(t, name, deletes[0].FullName)
		require.NotNil(t, deletes[0].UID, "a stale mirror is deleted with its UID as precondition")
		assert.Equal(t, types.UID("mirror-old"), *deletes[0].UID)
		m, ok := e.mirrors.MirrorPod(name)
		require.True(t, ok)
		assert.True(t, mirror.IsMirrorPodOf(m, static))
	})
}

func TestOrphanedMirrorKeptWhileStaticPodTerminates(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.start()
		static := staticPod(t, "", "etcd")
		name := mirror.PodFullName(static)
		e.set(mirror.FileSource, static)
		e.housekeep()
		created, ok := e.mirrors.MirrorPod(name)
		require.True(t, ok, "housekeeping created the mirror")
		e.set(mirror.ApiserverSource, created)
		require.Equal(t, []string{name}, e.mirrors.MirrorPodNames())

		gate := e.syncer.Hold(static.UID, podworker.HookSyncTerminatingPod)
		e.set(mirror.FileSource) // the manifest is gone
		require.NoError(t, gate.Wait(e.ctx))
		assert.True(t, e.workers.IsPodForMirrorPodTerminatingByFullName(name))

		e.housekeep()
		assert.Equal(t, []string{name}, e.mirrors.MirrorPodNames(), "the mirror stays while its static pod terminates")
		assert.Empty(t, e.mirrors.Deletes())

		gate.Release()
		synctest.Wait()
		assert.Equal(t, "sync:create sync:update kill(30) terminated", e.trace(static.UID))
		e.housekeep()
		assert.Empty(t, e.mirrors.MirrorPodNames(), "deleted once the static pod is terminated")
		deletes := e.mirrors.Deletes()
		require.Len(t, deletes, 1)
		assert.Equal(t, name, deletes[0].FullName)
		require.NotNil(t, deletes[0].UID, "an orphan is deleted with the UID of the mirror config has as precondition")
		assert.Equal(t, created.UID, *deletes[0].UID)
	})
}

func TestOrphanedMirrorDeleteNamesTheUIDConfigHas(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.start()
		static := staticPod(t, "", "etcd")
		name := mirror.PodFullName(static)
		// The API server holds a mirror config has not seen yet; config
		// still has an older one under the same name, without its static pod.
		newer := mirrorOf(static, "mirror-newer")
		e.mirrors.AddMirrorPod(newer)
		e.set(mirror.ApiserverSource, mirrorOf(static, "mirror-older"))

		e.housekeep()
		deletes := e.mirrors.Deletes()
		require.Len(t, deletes, 1)
		require.NotNil(t, deletes[0].UID)
		assert.Equal(t, types.UID("mirror-older"), *deletes[0].UID)
		_, ok := e.mirrors.MirrorPod(name)
		assert.True(t, ok, "the mirror config has not seen is not deleted on the strength of an older one")

		e.set(mirror.ApiserverSource, newer)
		e.housekeep()
		_, ok = e.mirrors.MirrorPod(name)
		assert.False(t, ok, "once config has it, the orphan is deleted")
	})
}

func TestStaticPodUIDReused(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.start()
		static := staticPod(t, "fixed-uid", "proxy")
		e.set(mirror.FileSource, static)
		assert.Equal(t, "sync:create", e.trace("fixed-uid"))

		gate := e.syncer.Hold("fixed-uid", podworker.HookSyncTerminatingPod)
		e.set(mirror.FileSource)
		require.NoError(t, gate.Wait(e.ctx))
		// The manifest comes back with the same UID while the old life is
		// still stopping: the worker is asked to restart after it.
		e.set(mirror.FileSource, static)
		info, _ := e.workers.Pod("fixed-uid")
		assert.True(t, info.RestartRequested)

		gate.Release()
		synctest.Wait()
		assert.Equal(t, podworker.StageFinished, e.stage("fixed-uid"))

		// Housekeeping forgets the finished life and starts the pod again
		// as a desired pod, not as an orphan.
		e.housekeep()
		assert.Equal(t, "sync:create kill(30) terminated sync:create", e.trace("fixed-uid"))
		assert.Equal(t, podworker.StageSyncing, e.stage("fixed-uid"))
		assert.Zero(t, e.syncer.Count("fixed-uid", podworker.HookSyncTerminatingRuntimePod))
	})
}

func TestRuntimeOrphansKilled(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t, func(o *lifecycle.SyncLoopOptions) { o.Sources = []string{mirror.ApiserverSource} })
		known := apiPod("known", "web", 0)
		e.runtime.set(
			podworker.RuntimePod{UID: "known", Namespace: "default", Name: "web"},
			podworker.RuntimePod{UID: "ghost", Namespace: "default", Name: "leftover"},
		)
		e.start()
		e.housekeep()
		assert.Empty(t, e.syncer.Calls(), "nothing is killed before the sources are ready")

		e.set(mirror.ApiserverSource, known)
		e.housekeep()
		assert.Equal(t, "kill-runtime", e.trace("ghost"))
		calls := e.syncer.CallsFor("ghost")
		require.Len(t, calls, 1)
		assert.Equal(t, podworker.RuntimePod{UID: "ghost", Namespace: "default", Name: "leftover"}, calls[0].RuntimePod)
		assert.Equal(t, "sync:create", e.trace("known"))
		assert.Equal(t, podworker.StageAbsent, e.stage("ghost"), "a runtime-only pod is forgotten once stopped")

		// The runtime no longer has it: nothing more happens.
		e.runtime.set(podworker.RuntimePod{UID: "known", Namespace: "default", Name: "web"})
		e.housekeep()
		assert.Equal(t, "kill-runtime", e.trace("ghost"))
	})
}

func TestDeletedTerminalPodUnknownToWorkersIsKilled(t *testing.T) {
	bubble(t, func(t *testing.T) {
		reject := admission.HandlerFunc(func(context.Context, *admission.Attributes) admission.Result {
			return admission.Result{Reason: "NoWay", Message: "not here"}
		})
		e := newEnv(t, func(o *lifecycle.SyncLoopOptions) { o.AdmitHandlers = []admission.Handler{reject} })
		e.start()
		pod := apiPod("rej", "job", 0)
		e.set(mirror.ApiserverSource, pod)
		_, known := e.workers.Pod("rej")
		require.False(t, known)

		// The agent wrote Failed (OnReject) and the pod is being deleted: it
		// never had a worker, so housekeeping sends one kill to let its
		// deletion complete.
		failed := pod.DeepCopy()
		failed.Status.Phase = v1.PodFailed
		now := metav1.NewTime(epoch)
		failed.DeletionTimestamp = &now
		e.set(mirror.ApiserverSource, failed)
		_, known = e.workers.Pod("rej")
		require.False(t, known, "updates of a rejected pod are not sent")
		e.housekeep()
		assert.Equal(t, "kill(30) terminated", e.trace("rej"))
		e.housekeep()
		assert.Equal(t, "kill(30) terminated", e.trace("rej"), "only once")
	})
}

func TestSourceStamping(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.start()
		liar := apiPod("liar", "liar", 0)
		liar.Annotations = map[string]string{mirror.ConfigSourceAnnotationKey: mirror.FileSource}
		e.set(mirror.ApiserverSource, liar)

		assert.Equal(t, mirror.FileSource, liar.Annotations[mirror.ConfigSourceAnnotationKey], "the caller's pod is not modified")
		stored, _ := e.store.GetPodByUID("liar")
		assert.Equal(t, mirror.ApiserverSource, stored.Annotations[mirror.ConfigSourceAnnotationKey])
		info, ok := e.workers.Pod("liar")
		require.True(t, ok)
		assert.False(t, info.Static, "an API pod is never static")
		e.housekeep()
		assert.Empty(t, e.mirrors.Creates(), "no mirror pod for an API pod")

		// Dispatch stamps too, for updates that bypass Config.
		direct := apiPod("direct", "direct", 1)
		direct.Annotations = map[string]string{mirror.ConfigSourceAnnotationKey: "http"}
		require.NoError(t, e.h.Dispatch(e.ctx, podconfig.PodUpdate{Op: podconfig.OpAdd, Pods: []*v1.Pod{direct}, Source: mirror.ApiserverSource}))
		synctest.Wait()
		info, _ = e.workers.Pod("direct")
		assert.False(t, info.Static)
		assert.Equal(t, "http", direct.Annotations[mirror.ConfigSourceAnnotationKey])

		// And a file pod claiming to be a mirror is refused.
		fake := staticPod(t, "fake-mirror", "fake")
		fake.Annotations[mirror.ConfigMirrorAnnotationKey] = "x"
		require.NoError(t, e.h.Dispatch(e.ctx, podconfig.PodUpdate{Op: podconfig.OpAdd, Pods: []*v1.Pod{fake}, Source: mirror.FileSource}))
		_, stored2 := e.store.GetPodByUID("fake-mirror")
		assert.False(t, stored2)
		assert.Contains(t, e.events.reasons(), podconfig.ReasonFailedValidation+" "+mirror.PodFullName(fake))
	})
}

func TestDuplicateFullNamesRejected(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.start()
		first := apiPod("first", "same", 0)
		second := apiPod("second", "same", 1)
		e.set(mirror.ApiserverSource, first, second)
		assert.Equal(t, "sync:create", e.trace("first"))
		_, known := e.workers.Pod("second")
		assert.False(t, known)
		evs := e.events.all()
		require.Len(t, evs, 1)
		assert.Equal(t, podconfig.ReasonFailedValidation, evs[0].Reason)
		assert.Equal(t, v1.EventTypeWarning, evs[0].Type)
		assert.Equal(t, types.UID("second"), evs[0].Object.(*v1.Pod).UID)
		assert.Contains(t, evs[0].Message, "same full name")
	})
}

func TestHousekeepingReportsRuntimeListFailure(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.start()
		static := staticPod(t, "", "etcd")
		e.set(mirror.FileSource, static)
		e.runtime.mu.Lock()
		e.runtime.err = errors.New("runtime down")
		e.runtime.mu.Unlock()
		err := e.h.Housekeeping(e.ctx)
		require.ErrorContains(t, err, "runtime down")
		assert.Contains(t, err.Error(), "lifecycle: ")
		assert.Len(t, e.mirrors.MirrorPodNames(), 1, "the steps that do not need the runtime still ran")
	})
}

func TestDispatchRejectsBadUpdates(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t, nil)
		assert.ErrorContains(t, e.h.Dispatch(e.ctx, podconfig.PodUpdate{Op: podconfig.OpAdd}), "no source")
		assert.ErrorContains(t, e.h.Dispatch(e.ctx, podconfig.PodUpdate{Op: 9, Source: "api"}), "unknown operation")
		// Nil pods are dropped, not a panic.
		require.NoError(t, e.h.Dispatch(e.ctx, podconfig.PodUpdate{Op: podconfig.OpAdd, Source: "api", Pods: []*v1.Pod{nil}}))
		e.h.HandlePodAdditions(e.ctx, []*v1.Pod{nil, {}})
		e.h.HandlePodUpdates(e.ctx, []*v1.Pod{nil})
		e.h.HandlePodRemoves(e.ctx, []*v1.Pod{nil})
		e.h.HandlePodReconcile(e.ctx, []*v1.Pod{nil})
		assert.Empty(t, e.workers.Pods())
	})
}

func TestNewSyncLoopValidates(t *testing.T) {
	e := newEnv(t, nil)
	_, err := lifecycle.NewSyncLoop(nil, e.store, lifecycle.SyncLoopOptions{})
	assert.ErrorContains(t, err, "lifecycle: ")
	_, err = lifecycle.NewSyncLoop(e.workers, nil, lifecycle.SyncLoopOptions{})
	assert.ErrorContains(t, err, "store")
	_, err = lifecycle.NewSyncLoop(e.workers, e.store, lifecycle.SyncLoopOptions{AdmitHandlers: []admission.Handler{nil}})
	assert.ErrorContains(t, err, "AdmitHandlers[0]")
	_, err = lifecycle.NewSyncLoop(e.workers, e.store, lifecycle.SyncLoopOptions{HousekeepingInterval: -time.Second})
	assert.ErrorContains(t, err, "HousekeepingInterval")
	_, err = lifecycle.NewSyncLoop(e.workers, e.store, lifecycle.SyncLoopOptions{Sources: []string{""}})
	assert.ErrorContains(t, err, "Sources[0]")
}

func TestAdmissionOrderAndReasonlessRejection(t *testing.T) {
	var asked []string
	handler := func(name string, r admission.Result) admission.Handler {
		return admission.HandlerFunc(func(ctx context.Context, attrs *admission.Attributes) admission.Result {
			asked = append(asked, name)
			assert.Equal(t, admission.AddOperation, attrs.Operation)
			return r
		})
	}
	bubble(t, func(t *testing.T) {
		e := newEnv(t, func(o *lifecycle.SyncLoopOptions) {
			o.AdmitHandlers = []admission.Handler{
				handler("yes", admission.Result{Admit: true}),
				handler("mute", admission.Result{}),
				handler("never asked", admission.Result{Reason: "Late"}),
			}
		})
		e.h.HandlePodAdditions(e.ctx, []*v1.Pod{apiPod("p", "p", 0)})
		assert.Equal(t, []string{"yes", "mute"}, asked)
		rej := e.rejections()
		require.Len(t, rej, 1)
		assert.Equal(t, admission.ReasonUnexpectedAdmissionError, rej[0].Status.Reason)
	})
}
