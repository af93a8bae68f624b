package eviction_test

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/examples/kube/eviction"
)

// The final status of an evicted pod, as the pod workers apply it to the
// status the runtime derived.
func ExampleStatus() {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	apply := eviction.Status("The node was low on resource: memory.", func() time.Time { return at })
	st := v1.PodStatus{Phase: v1.PodRunning, ObservedGeneration: 3}
	apply(&st)
	apply(&st) // idempotent
	c := st.Conditions[0]
	fmt.Println(st.Phase, st.Reason, len(st.Conditions))
	fmt.Println(c.Type, c.Status, c.Reason, c.ObservedGeneration)
	// Output:
	// Failed Evicted 1
	// DisruptionTarget True TerminationByKubelet 3
}
