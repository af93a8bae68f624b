package nodeshutdown_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/lifecycle/admission"
	"github.com/podkit/podkit/lifecycle/nodeshutdown"
	"github.com/podkit/podkit/podworker"
)

func withGrace(pod *v1.Pod, seconds int64) *v1.Pod {
	pod.Spec.TerminationGracePeriodSeconds = &seconds
	return pod
}

func critical(pod *v1.Pod) *v1.Pod {
	pod.Spec.PriorityClassName = nodeshutdown.SystemNodeCritical
	return pod
}

type shutdownResult struct {
	report nodeshutdown.Report
	err    error
}

func names(pods []nodeshutdown.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.FullName)
	}
	return out
}

func TestShutdownOrdering(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t)
		e.start()
		prio := int32(2000000001)
		highPriority := apiPod("c2", "dns", 3)
		highPriority.Spec.Priority = &prio
		cni := critical(apiPod("c1", "cni", 2))
		cni.Generation = 7
		e.set(
			withGrace(apiPod("r1", "web", 0), 30),
			withGrace(apiPod("r2", "batch", 1), 5),
			cni,
			highPriority,
		)
		gate := e.syncer.Hold("r1", podworker.HookSyncTerminatingPod)

		done := make(chan shutdownResult, 1)
		go func() {
			r, err := e.m.Shutdown(e.ctx, nodeshutdown.Budget{GracePeriod: 20 * time.Second, CriticalGracePeriod: 8 * time.Second})
			done <- shutdownResult{r, err}
		}()
		require.NoError(t, gate.Wait(e.ctx))
		synctest.Wait()
		assert.Equal(t, "sync:create kill(12)", e.trace("r1"), "other pods get the budget minus the critical share")
		assert.Equal(t, "sync:create kill(5) terminated", e.trace("r2"), "a shorter spec grace period wins")
		assert.Equal(t, "sync:create", e.trace("c1"), "critical pods wait for the others")
		assert.Equal(t, "sync:create", e.trace("c2"))

		// New pods are refused from now on.
		e.set(
			withGrace(apiPod("r1", "web", 0), 30), withGrace(apiPod("r2", "batch", 1), 5),
			cni, highPriority, apiPod("late", "late", 4))
		rej := e.rejections()
		require.Len(t, rej, 1)
		assert.Equal(t, nodeshutdown.ReasonNodeShutdown, rej[0].Reason)

		e.clock.Step(3 * time.Second)
		gate.Release()
		res := <-done
		require.NoError(t, res.err)
		// ShutdownNode returns once containers are stopped; the cleanup
		// hooks run right after.
		synctest.Wait()
		assert.Equal(t, []string{"batch_default", "web_default", "cni_default", "dns_default"}, names(res.report.Terminated))
		assert.Empty(t, res.report.NotTerminated)
		assert.Equal(t, "sync:create kill(17) terminated", e.trace("c1"), "critical pods get what is left: 20s - 3s")
		assert.Equal(t, "sync:create kill(17) terminated", e.trace("c2"))
		for _, p := range res.report.Terminated {
			assert.Equal(t, p.FullName == "cni_default" || p.FullName == "dns_default", p.Critical, p.FullName)
		}

		// The syncer is handed the node-shutdown status to apply.
		calls := e.syncer.CallsFor("c1")
		var status v1.PodStatus
		calls[1].PodStatusFunc(&status)
		assert.Equal(t, v1.PodFailed, status.Phase)
		assert.Equal(t, "Terminated", status.Reason)
		require.Len(t, status.Conditions, 1)
		assert.Equal(t, v1.DisruptionTarget, status.Conditions[0].Type)
		assert.Equal(t, v1.ConditionTrue, status.Conditions[0].Status)
		assert.Equal(t, int64(7), status.Conditions[0].ObservedGeneration, "the condition observes the pod's generation")
		first := status.Conditions[0].LastTransitionTime
		e.clock.Step(time.Second)
		calls[1].PodStatusFunc(&status)
		require.Len(t, status.Conditions, 1, "applied again, it replaces its condition")
		assert.Equal(t, first, status.Conditions[0].LastTransitionTime, "and keeps its transition time")

		// Housekeeping does not bring anything back during shutdown.
		e.housekeep()
		assert.Equal(t, "sync:create kill(12) terminated", e.trace("r1"))
		info, _ := e.workers.Pod("r1")
		assert.True(t, info.Finished)
		_, known := e.workers.Pod("late")
		assert.False(t, known)
	})
}

func TestShutdownBudget(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t)
		e.start()
		e.set(withGrace(apiPod("r1", "web", 0), 30), critical(apiPod("c1", "cni", 1)))
		stuck := e.syncer.Hold("r1", podworker.HookSyncTerminatingPod)
		stuckToo := e.syncer.Hold("c1", podworker.HookSyncTerminatingPod)

		done := make(chan shutdownResult, 1)
		go func() {
			r, err := e.m.Shutdown(e.ctx, nodeshutdown.Budget{GracePeriod: 10 * time.Second, CriticalGracePeriod: 4 * time.Second})
			done <- shutdownResult{r, err}
		}()
		require.NoError(t, stuck.Wait(e.ctx))
		synctest.Wait()
		assert.Equal(t, "sync:create kill(6)", e.trace("r1"))
		assert.Equal(t, "sync:create", e.trace("c1"))

		e.clock.Step(6 * time.Second)
		require.NoError(t, stuckToo.Wait(e.ctx))
		synctest.Wait()
		assert.Equal(t, "sync:create kill(4)", e.trace("c1"), "the critical group starts when the others' time is up")
		select {
		case <-done:
			t.Fatal("ShutdownNode returned before the budget was spent")
		default:
		}

		e.clock.Step(4 * time.Second)
		res := <-done
		require.ErrorIs(t, res.err, nodeshutdown.ErrBudgetSpent)
		assert.Empty(t, res.report.Terminated)
		assert.Equal(t, []string{"web_default", "cni_default"}, names(res.report.NotTerminated))
		assert.Equal(t, int64(6), res.report.NotTerminated[0].GracePeriod)
		assert.Equal(t, int64(4), res.report.NotTerminated[1].GracePeriod)

		// Termination goes on after ShutdownNode returned.
		stuck.Release()
		stuckToo.Release()
		synctest.Wait()
		assert.Equal(t, podworker.StageFinished, e.stage("r1"))
		assert.Equal(t, podworker.StageFinished, e.stage("c1"))
	})
}

func TestShutdownValidates(t *testing.T) {
	e := newEnv(t)
	for _, opts := range []nodeshutdown.Budget{
		{},
		{GracePeriod: -time.Second},
		{GracePeriod: time.Second, CriticalGracePeriod: 2 * time.Second},
		{GracePeriod: time.Second, CriticalGracePeriod: -1},
	} {
		_, err := e.m.Shutdown(t.Context(), opts)
		assert.ErrorContains(t, err, "nodeshutdown: Budget")
	}
	// Nothing was done: admission still admits.
	assert.True(t, e.m.Admit(t.Context(), &admission.Attributes{Pod: apiPod("p", "p", 0)}).Admit)
	assert.False(t, e.m.ShuttingDown())
}

func TestIsCritical(t *testing.T) {
	low, high := int32(1000), nodeshutdown.SystemCriticalPriority
	for name, tc := range map[string]struct {
		pod  *v1.Pod
		want bool
	}{
		"nil":           {nil, false},
		"plain":         {apiPod("a", "a", 0), false},
		"node critical": {critical(apiPod("a", "a", 0)), true},
		"cluster critical": {func() *v1.Pod {
			p := apiPod("a", "a", 0)
			p.Spec.PriorityClassName = nodeshutdown.SystemClusterCritical
			return p
		}(), true},
		"low priority":    {func() *v1.Pod { p := apiPod("a", "a", 0); p.Spec.Priority = &low; return p }(), false},
		"system priority": {func() *v1.Pod { p := apiPod("a", "a", 0); p.Spec.Priority = &high; return p }(), true},
		"static alone":    {staticPod(t, "s", "s"), false},
	} {
		t.Run(name, func(t *testing.T) { assert.Equal(t, tc.want, nodeshutdown.IsCritical(tc.pod)) })
	}
}

// Issue 19: housekeeping skipped its re-adds by reading a flag of the sync
// loop that ShutdownNode set. The manager now stands alone: its only say
// in the sync loop is admission, which housekeeping asks for the pods it
// re-adds as well. A pod asked to start over after the shutdown killed it
// (its UID sent again as new) is therefore refused, not restarted.
func TestShutdownRefusesRestartsThroughAdmission(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t)
		e.start()
		e.set(apiPod("p", "web", 0))
		_, err := e.m.Shutdown(e.ctx, nodeshutdown.Budget{GracePeriod: 10 * time.Second})
		require.NoError(t, err)
		synctest.Wait()
		require.Equal(t, podworker.StageFinished, e.stage("p"))

		// The pod is handed over again as new (a UID reused, as a static
		// pod's is when its manifest comes back): the workers take it as a
		// restart request, and housekeeping forgets the finished worker.
		e.agent.SyncLoop().HandlePodAdditions(e.ctx, []*v1.Pod{apiPod("p", "web", 0)})
		synctest.Wait()
		e.housekeep()

		assert.Equal(t, podworker.StageAbsent, e.stage("p"), "housekeeping did not start the pod over")
		assert.Equal(t, "sync:create kill(10) terminated", e.trace("p"))
		rej := e.rejections()
		require.Len(t, rej, 1)
		assert.Equal(t, nodeshutdown.ReasonNodeShutdown, rej[0].Reason)
		assert.Equal(t, "Pod was rejected: "+nodeshutdown.MessageNodeShutdown, rej[0].Message)
	})
}

func TestAdmitRefusesOnceShuttingDown(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t)
		e.start()
		attrs := &admission.Attributes{Pod: apiPod("p", "p", 0), Operation: admission.AddOperation}
		require.True(t, e.m.Admit(e.ctx, attrs).Admit)
		_, err := e.m.Shutdown(e.ctx, nodeshutdown.Budget{GracePeriod: time.Second})
		require.NoError(t, err, "no pod to stop")
		r := e.m.Admit(e.ctx, attrs)
		assert.False(t, r.Admit)
		assert.Equal(t, nodeshutdown.ReasonNodeShutdown, r.Reason)
		assert.True(t, e.m.ShuttingDown())
	})
}

func TestNewValidates(t *testing.T) {
	_, err := nodeshutdown.New(nil, nodeshutdown.Options{})
	assert.ErrorContains(t, err, "nodeshutdown: New needs the pod workers")
}
