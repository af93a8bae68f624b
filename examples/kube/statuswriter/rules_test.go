package statuswriter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestStatusToWrite checks the rules that turn a derived status into the
// one written, without an API server.
func TestStatusToWrite(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute + 300*time.Millisecond))
	foreign := v1.PodCondition{Type: "example.com/Foreign", Status: v1.ConditionTrue, LastTransitionTime: t0}
	readyAt := func(status v1.ConditionStatus, at metav1.Time) v1.PodCondition {
		return v1.PodCondition{Type: v1.PodReady, Status: status, LastTransitionTime: at}
	}

	tests := []struct {
		name            string
		stored, derived v1.PodStatus
		mayRun          bool
		want            v1.PodStatus
	}{{
		name:    "a running pod is written as derived",
		stored:  v1.PodStatus{Phase: v1.PodPending},
		derived: v1.PodStatus{Phase: v1.PodRunning, StartTime: &t0},
		mayRun:  true,
		want:    v1.PodStatus{Phase: v1.PodRunning, StartTime: &t0},
	}, {
		name:    "a terminal phase is withheld while containers may run",
		stored:  v1.PodStatus{Phase: v1.PodRunning},
		derived: v1.PodStatus{Phase: v1.PodSucceeded, Message: "done"},
		mayRun:  true,
		want:    v1.PodStatus{Phase: v1.PodRunning, Message: "done"},
	}, {
		name:    "a withheld phase with nothing stored is Pending",
		derived: v1.PodStatus{Phase: v1.PodFailed},
		mayRun:  true,
		want:    v1.PodStatus{Phase: v1.PodPending},
	}, {
		name:    "a terminal phase is written once nothing runs",
		stored:  v1.PodStatus{Phase: v1.PodRunning},
		derived: v1.PodStatus{Phase: v1.PodFailed},
		want:    v1.PodStatus{Phase: v1.PodFailed},
	}, {
		name:    "a stored terminal phase is never left",
		stored:  v1.PodStatus{Phase: v1.PodSucceeded},
		derived: v1.PodStatus{Phase: v1.PodRunning},
		want:    v1.PodStatus{Phase: v1.PodSucceeded},
	}, {
		name:    "conditions the agent does not derive are kept",
		stored:  v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{foreign, readyAt(v1.ConditionFalse, t0)}},
		derived: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{readyAt(v1.ConditionTrue, t1)}},
		want: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{
			readyAt(v1.ConditionTrue, metav1.NewTime(t1.Truncate(time.Second))), foreign,
		}},
	}, {
		name:    "an unchanged condition keeps its transition time",
		stored:  v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{readyAt(v1.ConditionTrue, t0)}},
		derived: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{readyAt(v1.ConditionTrue, t1)}},
		want:    v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{readyAt(v1.ConditionTrue, t0)}},
	}, {
		name:    "the start time and the fields others own are kept",
		stored:  v1.PodStatus{Phase: v1.PodRunning, StartTime: &t0, NominatedNodeName: "n"},
		derived: v1.PodStatus{Phase: v1.PodRunning, StartTime: &t1},
		want:    v1.PodStatus{Phase: v1.PodRunning, StartTime: &t0, NominatedNodeName: "n"},
	}, {
		name:    "times are stored to the second",
		stored:  v1.PodStatus{Phase: v1.PodPending},
		derived: v1.PodStatus{Phase: v1.PodRunning, StartTime: &t1},
		want:    v1.PodStatus{Phase: v1.PodRunning, StartTime: &metav1.Time{Time: t1.Truncate(time.Second)}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := statusToWrite(tc.stored, tc.derived, tc.mayRun)
			assert.Equal(t, normalize(tc.want), got)
		})
	}
}

// TestUIDLocks checks that writes for one pod are serialized, writes for
// different pods are not, and nothing is kept once released.
func TestUIDLocks(t *testing.T) {
	l := uidLocks{held: map[types.UID]*uidLock{}}
	unlockA := l.lock("a")
	unlockB := l.lock("b") // another UID does not wait for a

	second := make(chan struct{})
	go func() {
		defer close(second)
		l.lock("a")()
	}()
	select {
	case <-second:
		t.Fatal("a second holder of a's lock got it while the first held it")
	case <-time.After(50 * time.Millisecond):
	}
	unlockA()
	<-second
	unlockB()
	assert.Empty(t, l.held, "released locks are forgotten")
}

// TestTerminalStatus checks the phase a pod known stopped is written with.
func TestTerminalStatus(t *testing.T) {
	for _, tc := range []struct{ in, want v1.PodPhase }{
		{v1.PodRunning, v1.PodFailed},
		{v1.PodPending, v1.PodFailed},
		{"", v1.PodFailed},
		{v1.PodSucceeded, v1.PodSucceeded},
		{v1.PodFailed, v1.PodFailed},
	} {
		in := v1.PodStatus{Phase: tc.in, Message: "m"}
		got := terminalStatus(in)
		assert.Equal(t, tc.want, got.Phase, "from %q", tc.in)
		assert.Equal(t, "m", got.Message)
		assert.Equal(t, tc.in, in.Phase, "the argument is not modified")
	}
}
