package processruntime_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/podworker"
)

// A container's log read as `kubectl logs --tail=2` and `kubectl logs -f`
// show it, and a request for a previous instance the container does not
// have.
func ExampleRuntime_ReadLogs() {
	dir, _ := os.MkdirTemp("", "processruntime")
	defer os.RemoveAll(dir)
	rt, err := processruntime.Open(processruntime.Options{StateDir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()
	ctx := context.Background()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "counter", Namespace: "default", UID: "counter-uid"},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyNever,
			Containers:    []v1.Container{{Name: "count", Command: []string{"sh", "-c", "for i in 1 2 3; do echo line $i; done"}}},
		},
	}
	if _, err := rt.SyncPod(ctx, podworker.SyncPodCreate, pod, nil, processruntime.PodStatus{}); err != nil {
		fmt.Println(err)
		return
	}
	// A follow ends once the container has ended and its last line is
	// written.
	fmt.Println("-f:")
	_ = rt.ReadLogs(ctx, pod.UID, "count", processruntime.LogOptions{Follow: true}, os.Stdout)
	fmt.Println("--tail=2:")
	tail := int64(2)
	_ = rt.ReadLogs(ctx, pod.UID, "count", processruntime.LogOptions{TailLines: &tail}, os.Stdout)
	err = rt.ReadLogs(ctx, pod.UID, "count", processruntime.LogOptions{Previous: true}, os.Stdout)
	fmt.Println(errors.Is(err, processruntime.ErrLogsNotFound), err)

	_ = rt.SyncTerminatingPod(ctx, pod, processruntime.PodStatus{}, 1, nil)
	_ = rt.SyncTerminatedPod(ctx, pod, processruntime.PodStatus{})
	// Output:
	// -f:
	// line 1
	// line 2
	// line 3
	// --tail=2:
	// line 2
	// line 3
	// true processruntime: logs not found: container "count" of pod default/counter (counter-uid) has no previous instance: it has not restarted
}
