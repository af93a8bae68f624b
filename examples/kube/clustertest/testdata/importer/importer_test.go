// Package importer is a module of its own that imports clustertest as a
// user's module would: TestImportedByAnotherModule copies it to a
// temporary directory, runs go mod tidy and go test in it.
package importer

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/examples/kube/clustertest"
)

func TestOneNodeCluster(t *testing.T) {
	ctx := context.Background()
	c, err := clustertest.Start(ctx, clustertest.Options{Nodes: clustertest.Nodes(1)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}()
	pods := c.Admin().CoreV1().Pods("default")
	_, err = pods.Create(ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello"},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyNever,
			Containers: []v1.Container{{
				Name:    "hello",
				Image:   "busybox",
				Command: []string{"sh", "-c", "echo hello from another module"},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := clustertest.WaitFor(ctx, pods, "hello", clustertest.PodSucceeded(), 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	log, err := pods.GetLogs("hello", &v1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(log) != "hello from another module\n" {
		t.Errorf("log %q", log)
	}
	t.Logf("pod hello ran on %s and succeeded", pod.Spec.NodeName)
}
