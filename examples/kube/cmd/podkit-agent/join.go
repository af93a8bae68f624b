package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"path/filepath"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podkit/podkit/examples/kube/agent"
	"github.com/podkit/podkit/examples/kube/bootstrap"
)

// The flags of joining a cluster as a kubelet does (package bootstrap).
var (
	bootstrapKubeconfig = flag.String("bootstrap-kubeconfig", "", "a bootstrap kubeconfig (a bootstrap token): with it the agent gets its client certificate for system:node:<node-name> by TLS bootstrap, keeps it in --cert-dir, rotates it before expiry, and writes --kubeconfig for it")
	certDir             = flag.String("cert-dir", "", "directory of the certificates from the cluster's signers (default: <state-dir>/pki)")
	rotateServerCerts   = flag.Bool("rotate-server-certificates", false, "serve the kubelet API with a certificate from the kubernetes.io/kubelet-serving signer, requested and rotated by the agent (the cluster must approve its CSRs; kube-controller-manager does not)")
)

// joined runs the certificate managers of a node that joined by TLS
// bootstrap, until stop.
type joined struct {
	certDir string
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// clientConfig returns the agent's client configuration: the kubeconfig's
// or, with --bootstrap-kubeconfig, the node's certificate got by TLS
// bootstrap (it waits for it, until ctx ends). The caller stops the
// returned joined when it exits.
func clientConfig(ctx context.Context, kubeconfig, nodeName, stateDir string, log logr.Logger) (*rest.Config, *joined, error) {
	j := &joined{certDir: *certDir}
	if j.certDir == "" {
		j.certDir = filepath.Join(stateDir, "pki")
	}
	j.ctx, j.cancel = context.WithCancel(ctx)
	if *bootstrapKubeconfig == "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, j, fmt.Errorf("loading the kubeconfig: %w", err)
		}
		return cfg, j, nil
	}
	c, err := bootstrap.NewClient(bootstrap.ClientOptions{
		NodeName:            nodeName,
		BootstrapKubeconfig: *bootstrapKubeconfig,
		CertDir:             j.certDir,
		Kubeconfig:          kubeconfig,
		Logger:              log.WithName("client-certificate"),
	})
	if err != nil {
		return nil, j, err
	}
	j.run(c.Run)
	log.Info("Waiting for the node's client certificate (TLS bootstrap)", "certDir", j.certDir)
	if err := c.WaitForCertificate(j.ctx); err != nil {
		return nil, j, err
	}
	if cur := c.Current(); cur != nil && cur.Leaf != nil {
		log.Info("The node has its client certificate", "path", c.CertificatePath(), "expires", cur.Leaf.NotAfter)
	}
	return c.Config(), j, nil
}

// serve gives the kubelet API a serving certificate from the
// kubernetes.io/kubelet-serving signer when --rotate-server-certificates
// asks for it.
func (j *joined) serve(api *agent.KubeletAPIConfig, client kubernetes.Interface, nodeName string, log logr.Logger) error {
	if !*rotateServerCerts {
		return nil
	}
	if api == nil {
		return errors.New("--rotate-server-certificates needs the kubelet API (--client-ca-file)")
	}
	s, err := bootstrap.NewServing(bootstrap.ServingOptions{
		NodeName:  nodeName,
		Client:    client,
		CertDir:   j.certDir,
		IPs:       []net.IP{api.Address},
		Hostnames: []string{nodeName},
		Logger:    log.WithName("serving-certificate"),
	})
	if err != nil {
		return err
	}
	api.GetCertificate = s.GetCertificate
	j.run(s.Run)
	return nil
}

func (j *joined) run(fn func(context.Context) error) {
	j.wg.Add(1)
	go func() {
		defer j.wg.Done()
		_ = fn(j.ctx) // returns nil when ctx ends
	}()
}

// stop stops the certificate managers and waits for them.
func (j *joined) stop() {
	if j == nil {
		return
	}
	j.cancel()
	j.wg.Wait()
}
