package e2e_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/examples/kube/clustertest"
	"github.com/podkit/podkit/examples/kube/kubeletserver"
	"github.com/podkit/podkit/examples/kube/nodestatus"
)

// websocketFeature is what a node declares (status.declaredFeatures) for
// the API server to pass kubectl's WebSocket streams through to it
// instead of translating them to SPDY, as a kubelet 1.37 declares it.
const websocketFeature = "ExtendWebSocketsToKubelet"

// streamingAgent is a node of the test: it registers its Node, serves the
// kubelet API with the host runtime, and runs no pods (the test binds
// them and sets their status).
type streamingAgent struct {
	env     clustertest.NodeEnv
	runtime *hostRuntime
	// websockets declares websocketFeature.
	websockets bool
}

func (a *streamingAgent) Run(ctx context.Context) error {
	nodes := a.env.Client.CoreV1().Nodes()
	_, err := nodes.Create(ctx, a.env.Node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = nil // a restarted agent's Node
	}
	if err != nil {
		return fmt.Errorf("registering node %s: %w", a.env.Name, err)
	}
	cfg := a.env.KubeletAPI
	srv, err := kubeletserver.New(kubeletserver.Options{
		NodeName:    a.env.Name,
		Certificate: cfg.Certificate,
		ClientCA:    cfg.ClientCA,
		Client:      a.env.Client,
		Pods:        a.pod,
		Streaming:   a.runtime,
		Logger:      a.env.Logger,
	})
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(cfg.Address.String(), "0"))
	if err != nil {
		return err
	}
	if err := nodestatus.PublishKubeletEndpoint(ctx, a.env.Client.CoreV1(), a.env.Name, cfg.Address, l.Addr().(*net.TCPAddr).Port); err != nil {
		l.Close()
		return err
	}
	if a.websockets {
		// A patch, not a read and an update: the harness's heartbeat
		// writes the Node's status too, and an update would conflict.
		if err := nodestatus.DeclareFeatures(ctx, a.env.Client.CoreV1(), a.env.Name, []string{websocketFeature}); err != nil {
			l.Close()
			return fmt.Errorf("declaring %s: %w", websocketFeature, err)
		}
	}
	return srv.Serve(ctx, l)
}

// pod reads a pod bound to the node from the API server.
func (a *streamingAgent) pod(namespace, name string) (*v1.Pod, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pod, err := a.env.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil || pod.Spec.NodeName != a.env.Name {
		return nil, false
	}
	return pod, true
}

// kubeletURL is the node's kubelet API as its Node publishes it.
func kubeletURL(node *v1.Node) string {
	for _, a := range node.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			return "https://" + net.JoinHostPort(a.Address, strconv.Itoa(int(node.Status.DaemonEndpoints.KubeletEndpoint.Port)))
		}
	}
	return ""
}
