package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/podkit/podkit/examples/kube/kubeletserver"
	"github.com/podkit/podkit/examples/kube/nodemetrics"
	"github.com/podkit/podkit/examples/kube/nodestatus"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/podmanager"
)

// KubeletAPIConfig configures the kubelet API an Agent serves (package
// kubeletserver) over HTTPS, for the API server and for scrapers:
// container logs (kubectl logs), the exec, attach and port-forward
// sessions of the runtime (kubectl exec, cp, attach, debug -it,
// port-forward), /stats/summary and /metrics/resource (kubectl top),
// /pods, /runningpods, /healthz and /metrics.
type KubeletAPIConfig struct {
	// Address is the IP the API server reaches the node at (required). It
	// is published as the Node's InternalIP.
	Address net.IP
	// BindAddress is the IP to listen on. Defaults to Address.
	BindAddress net.IP
	// Port is the port to listen on; 0 picks a free one. The port
	// listened on is published in the Node's status.daemonEndpoints.
	Port int
	// Certificate is the serving certificate (required unless
	// GetCertificate is set); it should name Address.
	Certificate tls.Certificate
	// GetCertificate, when set, gives the serving certificate at each
	// handshake instead (kubeletserver.Options.GetCertificate): a rotating
	// one, such as package bootstrap's Serving.GetCertificate.
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// ClientCA holds the PEM CA certificates whose client certificates
	// identify users, as the kubelet's --client-ca-file (required).
	ClientCA []byte
}

// newKubeletAPI returns the kubelet API as one of the agent's loops: its
// Run listens as cfg says, publishes the endpoint in the Node's status
// with the features the server has (kubeletserver.DeclaredFeatures, as a
// kubelet 1.37 declares them), and serves until ctx ends. couldRun is the
// engine's window: whether a pod may still have running containers.
func newKubeletAPI(cfg *KubeletAPIConfig, nodeName string, client kubernetes.Interface,
	store *podmanager.Manager, couldRun func(types.UID) bool, rt kubeletRuntime, m *nodemetrics.Metrics, log logr.Logger) (lifecycle.Runnable, error) {
	if cfg.Address == nil {
		return nil, errors.New("KubeletAPIConfig.Address is required")
	}
	srv, err := kubeletserver.New(kubeletserver.Options{
		NodeName:      nodeName,
		Certificate:   cfg.Certificate,
		ClientCA:      cfg.ClientCA,
		Client:        client,
		Pods:          store.GetPodByName,
		ContainerLogs: containerLogs(rt),
		Streaming:     runtimeStreamer(rt),
		Stats:         runtimeStats(rt),
		BoundPods:     store.GetPods,
		RunningPods:   runtimeRunningPods(rt, couldRun),
		Metrics:       m.Registry(),
		Logger:        log,

		GetCertificate: cfg.GetCertificate,
	})
	if err != nil {
		return nil, err
	}
	bind := cfg.BindAddress
	if bind == nil {
		bind = cfg.Address
	}
	return lifecycle.RunnableFunc(func(ctx context.Context) error {
		l, err := net.Listen("tcp", net.JoinHostPort(bind.String(), strconv.Itoa(cfg.Port)))
		if err != nil {
			return fmt.Errorf("listening for the kubelet API: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		if err := nodestatus.PublishKubeletEndpoint(ctx, client.CoreV1(), nodeName, cfg.Address, port); err != nil {
			l.Close()
			return err
		}
		if err := nodestatus.DeclareFeatures(ctx, client.CoreV1(), nodeName, kubeletserver.DeclaredFeatures); err != nil {
			l.Close()
			return err
		}
		log.Info("Serving the kubelet API", "address", l.Addr().String())
		return srv.Serve(ctx, l)
	}), nil
}

// containerLogs reads container logs from the runtime. A hollow
// container has none: the client gets hollowruntime.ErrNoProcesses's
// message (400, as the kubelet answers a log it cannot read).
func containerLogs(rt kubeletRuntime) kubeletserver.ContainerLogsFunc {
	return func(ctx context.Context, pod *v1.Pod, container string, opts *v1.PodLogOptions, w io.Writer) error {
		lo := processruntime.LogOptions{
			Follow:     opts.Follow,
			Previous:   opts.Previous,
			Timestamps: opts.Timestamps,
			TailLines:  opts.TailLines,
			LimitBytes: opts.LimitBytes,
		}
		if opts.SinceTime != nil {
			lo.SinceTime = &opts.SinceTime.Time
		}
		return rt.ReadLogs(ctx, pod.UID, container, lo, w)
	}
}
