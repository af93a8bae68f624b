package virtualkubelet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/internal/podstatus"
)

func twoContainers() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "a", Image: "a:1"}, {Name: "b", Image: "b:1"}}},
	}
}

func remote(states ...RemoteContainer) *RemotePod {
	return &RemotePod{UID: "u", Namespace: "ns", Name: "p", IP: "10.0.0.1", CreatedAt: time.Unix(100, 0), Containers: states}
}

// condition returns st's condition of type ct.
func condition(t *testing.T, st v1.PodStatus, ct v1.PodConditionType) v1.PodCondition {
	t.Helper()
	for _, c := range st.Conditions {
		if c.Type == ct {
			return c
		}
	}
	t.Fatalf("no %s condition in %v", ct, st.Conditions)
	return v1.PodCondition{}
}

func TestPodStatus(t *testing.T) {
	t0, t1, t2 := time.Unix(100, 0), time.Unix(110, 0), time.Unix(120, 0)
	run := func(name string, at time.Time) RemoteContainer {
		return RemoteContainer{Name: name, Image: name + ":1", State: ContainerRunning, StartedAt: at}
	}
	exit := func(name string, code int32) RemoteContainer {
		return RemoteContainer{Name: name, Image: name + ":1", State: ContainerExited, ExitCode: code, StartedAt: t0, FinishedAt: t2}
	}
	notReady := podstatus.ReasonContainersNotReady
	cases := []struct {
		name   string
		rp     *RemotePod
		phase  v1.PodPhase
		ready  bool
		reason string
	}{
		{"not created", nil, v1.PodPending, false, notReady},
		{"one waiting", remote(run("a", t0), RemoteContainer{Name: "b", State: ContainerWaiting}), v1.PodPending, false, notReady},
		{"all running", remote(run("a", t0), run("b", t1)), v1.PodRunning, true, ""},
		{"one exited", remote(run("a", t0), exit("b", 0)), v1.PodRunning, false, notReady},
		{"all exited 0", remote(exit("a", 0), exit("b", 0)), v1.PodSucceeded, false, podstatus.ReasonPodCompleted},
		{"one failed", remote(exit("a", 0), exit("b", 2)), v1.PodFailed, false, podstatus.ReasonPodFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := podStatus(twoContainers(), tc.rp)
			assert.Equal(t, tc.phase, st.Phase)
			require.Len(t, st.ContainerStatuses, 2)
			require.Len(t, st.Conditions, 4, "Initialized, Ready, ContainersReady, PodScheduled")
			ready := condition(t, st, v1.PodReady)
			assert.Equal(t, tc.ready, ready.Status == v1.ConditionTrue)
			assert.Equal(t, ready.Status, condition(t, st, v1.ContainersReady).Status)
			assert.Equal(t, tc.reason, ready.Reason)
			if tc.ready {
				assert.Equal(t, t1, ready.LastTransitionTime.Time, "ready when the last container started")
			}
			if tc.rp == nil {
				assert.Equal(t, ReasonContainerCreating, st.ContainerStatuses[0].State.Waiting.Reason)
				assert.Nil(t, st.StartTime)
				return
			}
			assert.Equal(t, "10.0.0.1", st.PodIP)
			assert.Equal(t, "simcloud://u/a", st.ContainerStatuses[0].ContainerID)
			assert.True(t, apiequality.Semantic.DeepEqual(st, podStatus(twoContainers(), tc.rp.DeepCopy())),
				"the same backend state gives an equal status (no notification churn)")
		})
	}
}

func TestFinalStatus(t *testing.T) {
	pod := twoContainers()
	started := time.Unix(100, 0)

	// Never created: every container is unknown, the pod failed.
	st := finalStatus(pod, nil, nil)
	assert.Equal(t, v1.PodFailed, st.Phase)
	for _, cs := range st.ContainerStatuses {
		require.NotNil(t, cs.State.Terminated)
		assert.Equal(t, ReasonContainerStatusUnknown, cs.State.Terminated.Reason)
		assert.EqualValues(t, ExitCodeUnknown, cs.State.Terminated.ExitCode)
		assert.False(t, cs.Ready)
	}

	// Lost while running: the last status, with the containers unknown but
	// their start kept.
	last := podStatus(pod, remote(
		RemoteContainer{Name: "a", State: ContainerRunning, StartedAt: started},
		RemoteContainer{Name: "b", State: ContainerExited, ExitCode: 0, StartedAt: started, FinishedAt: started},
	))
	st = finalStatus(pod, nil, &last)
	assert.Equal(t, v1.PodFailed, st.Phase)
	assert.Equal(t, started, st.ContainerStatuses[0].State.Terminated.StartedAt.Time)
	assert.Equal(t, "Completed", st.ContainerStatuses[1].State.Terminated.Reason)
	assert.Equal(t, v1.PodRunning, last.Phase, "the last status is not modified")

	// Stopped by the backend: what it reports.
	st = finalStatus(pod, remote(
		RemoteContainer{Name: "a", State: ContainerExited, StartedAt: started, FinishedAt: started.Add(time.Minute)},
		RemoteContainer{Name: "b", State: ContainerExited, StartedAt: started, FinishedAt: started.Add(time.Minute)},
	), &last)
	assert.Equal(t, v1.PodSucceeded, st.Phase)
	assert.Equal(t, podstatus.ReasonPodCompleted, condition(t, st, v1.PodReady).Reason)
	assert.Equal(t, podstatus.ReasonPodCompleted, condition(t, st, v1.ContainersReady).Reason)

	// A pod without containers cannot have succeeded.
	assert.Equal(t, v1.PodFailed, finalStatus(&v1.Pod{}, nil, nil).Phase)
}

func TestPodStatusIgnoresInitContainers(t *testing.T) {
	// The backend runs no init container and reports none: they do not
	// hold the phase back.
	pod := twoContainers()
	pod.Spec.InitContainers = []v1.Container{{Name: "setup", Image: "setup:1"}}
	running := remote(
		RemoteContainer{Name: "a", State: ContainerRunning, StartedAt: time.Unix(100, 0)},
		RemoteContainer{Name: "b", State: ContainerRunning, StartedAt: time.Unix(100, 0)},
	)
	assert.Equal(t, v1.PodRunning, podStatus(pod, running).Phase)
	exited := remote(
		RemoteContainer{Name: "a", State: ContainerExited},
		RemoteContainer{Name: "b", State: ContainerExited},
	)
	assert.Equal(t, v1.PodSucceeded, podStatus(pod, exited).Phase)
}

func TestRemotePodHelpers(t *testing.T) {
	var nilPod *RemotePod
	assert.False(t, nilPod.Running())
	assert.False(t, nilPod.Exited())
	assert.Nil(t, nilPod.DeepCopy())
	empty := &RemotePod{}
	assert.False(t, empty.Exited(), "no containers is not finished")
	rp := remote(RemoteContainer{Name: "a", State: ContainerRunning})
	cp := rp.DeepCopy()
	cp.Containers[0].State = ContainerExited
	assert.True(t, rp.Running(), "a copy shares nothing")
	assert.True(t, cp.Exited())
	assert.Equal(t, "waiting", ContainerWaiting.String())
	assert.Equal(t, "exited", ContainerExited.String())
	assert.Equal(t, "unknown", ContainerState(9).String())
}

// Ready and ContainersReady come from the one home of podkit's condition
// rules: a failed pod says PodFailed (this provider said PodCompleted), and
// an unmet readiness gate holds Ready back.
func TestConditionsAreTheKubeletsRules(t *testing.T) {
	failed := podStatus(twoContainers(), remote(
		RemoteContainer{Name: "a", State: ContainerExited, ExitCode: 1},
		RemoteContainer{Name: "b", State: ContainerExited},
	))
	assert.Equal(t, v1.PodFailed, failed.Phase)
	assert.Equal(t, podstatus.ReasonPodFailed, condition(t, failed, v1.PodReady).Reason)

	gated := twoContainers()
	gated.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/lb"}}
	running := remote(
		RemoteContainer{Name: "a", State: ContainerRunning},
		RemoteContainer{Name: "b", State: ContainerRunning},
	)
	st := podStatus(gated, running)
	assert.Equal(t, v1.ConditionTrue, condition(t, st, v1.ContainersReady).Status)
	ready := condition(t, st, v1.PodReady)
	assert.Equal(t, v1.ConditionFalse, ready.Status)
	assert.Equal(t, podstatus.ReasonReadinessGatesNotReady, ready.Reason)
}
