package clustertest

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
	"k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
	"k8s.io/kubernetes/cmd/kube-apiserver/app/options"
)

// apiserverStartTimeout bounds the wait for the API server to be healthy
// and to have created the default namespace.
const apiserverStartTimeout = 2 * time.Minute

// apiserverFiles are the files the API server is started with.
type apiserverFiles struct {
	caFile                     string
	servingCert, servingKey    string
	kubeletClientCert, kletKey string
	serviceAccountKey          string
}

// runningServer is a component running on a goroutine of this process.
type runningServer struct {
	cancel context.CancelFunc
	// done is closed when the component's Run has returned, with err.
	done chan struct{}
	err  error
}

// runServer runs run on a goroutine of its own with a context that stop
// cancels.
func runServer(run func(ctx context.Context) error) *runningServer {
	ctx, cancel := context.WithCancel(context.Background())
	s := &runningServer{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.err = run(ctx)
	}()
	return s
}

// stopped says whether Run has returned, and with which error.
func (s *runningServer) stopped() (bool, error) {
	select {
	case <-s.done:
		return true, s.err
	default:
		return false, nil
	}
}

// stop cancels the component and waits for it to return.
func (s *runningServer) stop() error {
	s.cancel()
	<-s.done
	return s.err
}

// startAPIServer starts kube-apiserver in this process over etcdURL,
// serving HTTPS on 127.0.0.1 with the cluster CA's certificates, and
// returns once its /healthz is ok and the default namespace exists.
// admin returns the client the wait uses, for the server's URL.
// settings.APIServerFlags come after (and so win over) the harness's own.
func startAPIServer(ctx context.Context, etcdURL string, f apiserverFiles, settings Options, admin func(host string) (kubernetes.Interface, error)) (*runningServer, error) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("clustertest: listening for the API server: %w", err)
	}
	port := listener.Addr().(*net.TCPAddr).Port
	host := "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))

	s := options.NewServerRunOptions()
	// Each API server gets its own version and feature-gate registry, as
	// upstream's test server does, so several can run in one process.
	gate := utilfeature.DefaultMutableFeatureGate.DeepCopy()
	registry := basecompatibility.NewComponentGlobalsRegistry()
	if err := registry.Register(basecompatibility.DefaultKubeComponent, compatibility.DefaultBuildEffectiveVersion(), gate); err != nil {
		listener.Close()
		return nil, err
	}
	s.GenericServerRunOptions.ComponentGlobalsRegistry = registry

	fs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	for _, set := range s.Flags().FlagSets {
		fs.AddFlagSet(set)
	}
	flags := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + f.servingCert,
		"--tls-private-key-file=" + f.servingKey,
		"--client-ca-file=" + f.caFile,
		"--anonymous-auth=false",
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--service-cluster-ip-range=10.0.0.0/16",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + f.serviceAccountKey,
		"--service-account-signing-key-file=" + f.serviceAccountKey,
		// The agents serve the kubelet API on 127.0.0.1 with certificates
		// of the cluster CA, and verify this client certificate.
		"--kubelet-client-certificate=" + f.kubeletClientCert,
		"--kubelet-client-key=" + f.kletKey,
		"--kubelet-certificate-authority=" + f.caFile,
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		// One API server on loopback: no endpoint reconciliation.
		"--endpoint-reconciler-type=none",
		// The NoExecute tolerations the DefaultTolerationSeconds plugin
		// gives every pod: how long a pod stays on a node that is not
		// ready before it is evicted.
		"--default-not-ready-toleration-seconds=" + strconv.Itoa(settings.PodEvictionSeconds),
		"--default-unreachable-toleration-seconds=" + strconv.Itoa(settings.PodEvictionSeconds),
		"--profiling=false",
	}
	if err := fs.Parse(append(flags, settings.APIServerFlags...)); err != nil {
		listener.Close()
		return nil, fmt.Errorf("clustertest: kube-apiserver flags: %w", err)
	}
	s.SecureServing.Listener = listener
	if err := registry.Set(); err != nil {
		listener.Close()
		return nil, err
	}

	// The API server's goroutines, informers and post-start hooks run
	// until runCtx ends.
	runCtx, cancel := context.WithCancel(context.Background())
	fail := func(err error) (*runningServer, error) {
		cancel()
		listener.Close()
		return nil, err
	}
	completed, err := s.Complete(runCtx)
	if err != nil {
		return fail(fmt.Errorf("clustertest: kube-apiserver options: %w", err))
	}
	if errs := completed.Validate(); len(errs) != 0 {
		return fail(fmt.Errorf("clustertest: kube-apiserver options: %w", utilerrors.NewAggregate(errs)))
	}
	config, err := app.NewConfig(completed)
	if err != nil {
		return fail(fmt.Errorf("clustertest: kube-apiserver config: %w", err))
	}
	completedConfig, err := config.Complete()
	if err != nil {
		return fail(fmt.Errorf("clustertest: kube-apiserver config: %w", err))
	}
	chain, err := app.CreateServerChain(completedConfig)
	if err != nil {
		return fail(fmt.Errorf("clustertest: kube-apiserver: %w", err))
	}
	prepared, err := chain.PrepareRun()
	if err != nil {
		return fail(fmt.Errorf("clustertest: kube-apiserver: %w", err))
	}
	srv := runServer(func(ctx context.Context) error {
		stop := context.AfterFunc(ctx, cancel)
		defer stop()
		return prepared.Run(runCtx)
	})

	client, err := admin(host)
	if err != nil {
		srv.stop()
		return nil, err
	}
	if err := waitServing(ctx, srv, client); err != nil {
		srv.stop()
		return nil, err
	}
	return srv, nil
}

// waitServing waits until the API server's /healthz is ok and the default
// namespace exists, or it failed.
func waitServing(ctx context.Context, srv *runningServer, client kubernetes.Interface) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, apiserverStartTimeout, true, func(ctx context.Context) (bool, error) {
		if done, err := srv.stopped(); done {
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
		return fmt.Errorf("clustertest: waiting for kube-apiserver: %w (last: %v)", err, last)
	}
	return nil
}
