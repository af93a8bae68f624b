package processruntime_test

import (
	"context"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/lifecycle/admission"
	"github.com/podkit/podkit/podworker"
)

// A pod run through the pod workers: it is started, finishes on its own
// (restartPolicy Never), is stopped and cleaned up, and its API status is
// read from the runtime's final view of it.
func ExampleRuntime() {
	dir, _ := os.MkdirTemp("", "processruntime")
	defer os.RemoveAll(dir)

	// Like the kubelet's PLEG: a container that exits gets its pod synced
	// again at once (here through a channel, as OnEvent must not block).
	exited := make(chan struct{}, 16)
	stopped := make(chan processruntime.PodStatus, 1)
	rt, err := processruntime.Open(processruntime.Options{
		StateDir: dir,
		OnEvent: func(ev processruntime.Event) {
			switch ev.Type {
			case processruntime.ContainerExited:
				exited <- struct{}{}
			case processruntime.PodStopped:
				stopped <- ev.Status
			}
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()
	workers, _ := podworker.New[processruntime.PodStatus](rt, podworker.Options[processruntime.PodStatus]{Status: rt})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- workers.Run(ctx) }()
	defer func() { cancel(); <-done }()

	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default", UID: "hello-uid"},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyNever,
			Containers:    []v1.Container{{Name: "greet", Command: []string{"sh", "-c", "echo hello from a pod"}}},
		},
	}
	_ = workers.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: pod})

	// SyncPod reports the pod terminal once its container has exited; the
	// workers then stop it, and the runtime announces its final status.
	var final processruntime.PodStatus
	for waiting := true; waiting; {
		select {
		case <-exited:
			_ = workers.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodSync, Pod: pod})
		case final = <-stopped:
			waiting = false
		}
	}
	// The log outlives the pod's cleanup: it goes when PruneTombstones is
	// told config no longer has the pod.
	_ = rt.ReadLogs(ctx, pod.UID, "greet", processruntime.LogOptions{}, os.Stdout)
	status := processruntime.APIStatus(pod, final)
	fmt.Println(status.Phase, status.ContainerStatuses[0].State.Terminated.Reason)
	// Output:
	// hello from a pod
	// Succeeded Completed
}

// The runtime is an admission handler: a pod asking for what reaches the
// host is refused, with the reason its status gets, unless the runtime
// was opened with AllowHostAccess; what needs nothing of the host is
// admitted.
func ExampleRuntime_Admit() {
	dir, _ := os.MkdirTemp("", "processruntime")
	defer os.RemoveAll(dir)
	rt, err := processruntime.Open(processruntime.Options{StateDir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()
	privileged := true
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "debug", Namespace: "default", UID: "debug-uid"},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "shell", Command: []string{"sh"},
			SecurityContext: &v1.SecurityContext{Privileged: &privileged},
		}}},
	}
	res := rt.Admit(context.Background(), &admission.Attributes{Pod: pod, Operation: admission.AddOperation})
	fmt.Println(res.Admit, res.Reason)
	fmt.Println(res.Message)

	pod.Spec.Containers[0].SecurityContext = nil
	fmt.Println(rt.Admit(context.Background(), &admission.Attributes{Pod: pod, Operation: admission.AddOperation}).Admit)
	// Output:
	// false HostAccessNotAllowed
	// processruntime: pod default/debug: asks for host access (privileged container "shell"), which this node does not allow
	// true
}
