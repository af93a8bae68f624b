package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
	"k8s.io/kubernetes/cmd/kube-apiserver/app/options"

	"github.com/podkit/podkit/examples/kube/internal/controlplane"
)

// apiserverStartTimeout bounds the wait for the API server to be healthy
// and to have created the default namespace.
const apiserverStartTimeout = 2 * time.Minute

// apiserverFlags are the API server's flags before the caller's: HTTPS on
// the listener's 127.0.0.1 port with the cluster CA's certificates, etcd
// over mutual TLS, Node,RBAC authorization with NodeRestriction, and the
// nodes' kubelet API reached with a client certificate and checked
// against the cluster CA; bootstrap tokens authenticate (a node joining by
// TLS bootstrap); aggregated APIs (metrics.k8s.io for kubectl top) are
// reached at their endpoints' addresses (no kube-proxy routes Service
// IPs here) with the front proxy's client certificate, whose CA they
// trust for the user and group headers.
func apiserverFlags(files controlplane.Files, etcdURL string, port int) []string {
	return []string{
		"--etcd-servers=" + etcdURL,
		"--etcd-cafile=" + files.EtcdCACert,
		"--etcd-certfile=" + files.APIServerEtcdClientCert,
		"--etcd-keyfile=" + files.APIServerEtcdClientKey,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + files.APIServerCert,
		"--tls-private-key-file=" + files.APIServerKey,
		"--client-ca-file=" + files.CACert,
		"--anonymous-auth=false",
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--service-cluster-ip-range=" + controlplane.ServiceCIDR,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + files.ServiceAccountKey,
		"--service-account-signing-key-file=" + files.ServiceAccountKey,
		"--kubelet-client-certificate=" + files.KubeletClientCert,
		"--kubelet-client-key=" + files.KubeletClientKey,
		"--kubelet-certificate-authority=" + files.CACert,
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		// One API server on loopback, an address Endpoints may not hold:
		// no endpoint reconciliation for the kubernetes Service.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
		"--enable-bootstrap-token-auth=true",
		"--requestheader-client-ca-file=" + files.FrontProxyCACert,
		"--requestheader-allowed-names=" + controlplane.FrontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + files.FrontProxyClientCert,
		"--proxy-client-key-file=" + files.FrontProxyClientKey,
		"--enable-aggregator-routing=true",
	}
}

// startAPIServer starts kube-apiserver in this process over etcdURL,
// serving on listener, and returns once its /healthz is ok and the default
// namespace exists (admin is the client that checks). extra flags come
// after, and so win over, apiserverFlags.
func startAPIServer(ctx context.Context, listener net.Listener, files controlplane.Files, etcdURL string, extra []string, admin kubernetes.Interface) (*component, error) {
	s := options.NewServerRunOptions()
	registry, err := newRegistry()
	if err != nil {
		return nil, err
	}
	s.GenericServerRunOptions.ComponentGlobalsRegistry = registry

	fs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	for _, set := range s.Flags().FlagSets {
		fs.AddFlagSet(set)
	}
	port := listener.Addr().(*net.TCPAddr).Port
	if err := fs.Parse(append(apiserverFlags(files, etcdURL, port), extra...)); err != nil {
		return nil, fmt.Errorf("kube-apiserver flags: %w", err)
	}
	s.SecureServing.Listener = listener
	if err := registry.Set(); err != nil {
		return nil, err
	}

	// The API server's goroutines, informers and post-start hooks run
	// until runCtx ends.
	runCtx, cancel := context.WithCancel(context.Background())
	fail := func(err error) (*component, error) {
		cancel()
		return nil, err
	}
	completed, err := s.Complete(runCtx)
	if err != nil {
		return fail(fmt.Errorf("kube-apiserver options: %w", err))
	}
	if errs := completed.Validate(); len(errs) != 0 {
		return fail(fmt.Errorf("kube-apiserver options: %w", utilerrors.NewAggregate(errs)))
	}
	config, err := app.NewConfig(completed)
	if err != nil {
		return fail(fmt.Errorf("kube-apiserver config: %w", err))
	}
	completedConfig, err := config.Complete()
	if err != nil {
		return fail(fmt.Errorf("kube-apiserver config: %w", err))
	}
	chain, err := app.CreateServerChain(completedConfig)
	if err != nil {
		return fail(fmt.Errorf("kube-apiserver: %w", err))
	}
	prepared, err := chain.PrepareRun()
	if err != nil {
		return fail(fmt.Errorf("kube-apiserver: %w", err))
	}
	srv := goComponent("kube-apiserver", func(ctx context.Context) error {
		stop := context.AfterFunc(ctx, cancel)
		defer stop()
		return prepared.Run(runCtx)
	})
	if err := waitServing(ctx, srv, admin); err != nil {
		srv.Stop()
		return nil, err
	}
	return srv, nil
}

// waitServing waits until the API server's /healthz is ok and the default
// namespace exists, or it failed.
func waitServing(ctx context.Context, srv *component, client kubernetes.Interface) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, apiserverStartTimeout, true, func(ctx context.Context) (bool, error) {
		if done, err := srv.Stopped(); done {
			if err == nil {
				err = errors.New("it returned")
			}
			return false, fmt.Errorf("kube-apiserver stopped while starting: %w", err)
		}
		status := 0
		res := client.CoreV1().RESTClient().Get().AbsPath("/healthz").Do(ctx).StatusCode(&status)
		if status != 200 {
			last = fmt.Errorf("/healthz: %d %v", status, res.Error())
			return false, nil
		}
		_, err := client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			last = err
		}
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for kube-apiserver: %w (last: %v)", err, last)
	}
	return nil
}
