package mirrorpods

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/podkit/podkit/mirror"
)

// PodAPI is the mirror.PodAPI of a client-go clientset: it lets
// mirror.NewClient create, read and delete mirror pods in a real API server.
// Build it with NewPodAPI. It keeps no state and is safe for concurrent use.
//
// Errors are client-go's, which are API status errors, so mirror.Client
// recognises AlreadyExists, NotFound and Conflict as it must.
type PodAPI struct {
	pods corev1client.PodsGetter
}

var _ mirror.PodAPI = (*PodAPI)(nil)

// NewPodAPI returns a PodAPI over pods, usually clientset.CoreV1().
func NewPodAPI(pods corev1client.PodsGetter) *PodAPI {
	return &PodAPI{pods: pods}
}

// Create creates pod in namespace. client-go encodes pod and neither keeps nor
// modifies it, as mirror.PodAPI requires.
func (a *PodAPI) Create(ctx context.Context, namespace string, pod *v1.Pod, opts metav1.CreateOptions) (*v1.Pod, error) {
	return a.pods.Pods(namespace).Create(ctx, pod, opts)
}

// Get reads the pod namespace/name.
func (a *PodAPI) Get(ctx context.Context, namespace, name string, opts metav1.GetOptions) (*v1.Pod, error) {
	return a.pods.Pods(namespace).Get(ctx, name, opts)
}

// Delete deletes the pod namespace/name; the API server enforces
// opts.Preconditions (a mismatch is a Conflict) and opts.GracePeriodSeconds.
func (a *PodAPI) Delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return a.pods.Pods(namespace).Delete(ctx, name, opts)
}

// NodeUID returns the node-UID lookup mirror.ClientOptions.NodeUID needs:
// each call reads the Node nodeName from the API server and returns its
// UID. It reads on every call (mirror pods are created rarely) so a Node
// that is deleted and registered again is never named by a stale UID. A
// missing Node is an error wrapping the API's NotFound. The function is
// safe for concurrent use and honours ctx.
func NodeUID(nodes corev1client.NodesGetter, nodeName string) func(context.Context) (types.UID, error) {
	return func(ctx context.Context) (types.UID, error) {
		node, err := nodes.Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return node.UID, nil
	}
}
