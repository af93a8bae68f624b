package kube_test

import (
	"context"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// interceptedClient is a clientset whose core/v1 pods and events calls a
// test can watch or break; everything else goes to the real API server.
type interceptedClient struct {
	kubernetes.Interface
	core interceptedCore
}

// CoreV1 returns the intercepted core/v1 client.
func (c interceptedClient) CoreV1() corev1client.CoreV1Interface { return c.core }

type interceptedCore struct {
	corev1client.CoreV1Interface
	// pods and events, when set, replace the real clients.
	pods   func(real corev1client.PodInterface) corev1client.PodInterface
	events func(real corev1client.EventInterface) corev1client.EventInterface
}

func (c interceptedCore) Pods(namespace string) corev1client.PodInterface {
	real := c.CoreV1Interface.Pods(namespace)
	if c.pods == nil {
		return real
	}
	return c.pods(real)
}

func (c interceptedCore) Events(namespace string) corev1client.EventInterface {
	real := c.CoreV1Interface.Events(namespace)
	if c.events == nil {
		return real
	}
	return c.events(real)
}

// hungEvents is an events API that never answers: every write waits until
// its context ends. It counts the writes it was given.
type hungEvents struct {
	corev1client.EventInterface
	writes *atomic.Int64
}

func (e hungEvents) Create(ctx context.Context, _ *v1.Event, _ metav1.CreateOptions) (*v1.Event, error) {
	e.writes.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

func (e hungEvents) Patch(ctx context.Context, _ string, _ types.PatchType, _ []byte, _ metav1.PatchOptions, _ ...string) (*v1.Event, error) {
	e.writes.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}
