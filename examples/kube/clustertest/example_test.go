package clustertest_test

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/examples/kube/clustertest"
)

// A cluster of two podkit nodes (in this process; the control plane, quiet,
// in a child process): a pod created without a node is placed by the real
// scheduler, run as a process by a podkit agent, waited for with WaitFor,
// and its log read back through the API server, as kubectl logs does. In
// a test, start the cluster once (TestMain, or a parent test with parallel
// subtests) and Close it when done.
func Example() {
	ctx := context.Background()
	c, err := clustertest.Start(ctx, clustertest.Options{Nodes: clustertest.Nodes(2)})
	if err != nil {
		panic(err)
	}
	defer c.Close() // stops the pods' processes and the control plane

	pods := c.Admin().CoreV1().Pods("default")
	_, err = pods.Create(ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello"},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyNever,
			Containers: []v1.Container{{
				Name:    "hello",
				Image:   "busybox", // recorded, never pulled: the command runs on this machine
				Command: []string{"echo", "hello from a podkit node"},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		panic(err)
	}
	pod, err := clustertest.WaitFor(ctx, pods, "hello", clustertest.PodSucceeded(), time.Minute)
	if err != nil {
		panic(err) // it says what it saw last: clustertest: Pod default/hello not Succeeded after 1m0s; last seen: ...
	}
	log, err := pods.GetLogs("hello", &v1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("nodes:", len(c.Nodes()))
	fmt.Println("scheduled on a podkit node:", c.Node(pod.Spec.NodeName) != nil)
	fmt.Println("phase:", pod.Status.Phase)
	fmt.Printf("log: %s", log)
	// Output:
	// nodes: 2
	// scheduled on a podkit node: true
	// phase: Succeeded
	// log: hello from a podkit node
}
