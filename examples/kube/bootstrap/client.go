package bootstrap

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/certificate"
)

// The names of the certificate pairs in the certificate directory, as the
// kubelet's: <prefix>-current.pem links to the pair in use.
const (
	ClientPairPrefix  = "kubelet-client"
	ServingPairPrefix = "kubelet-server"
)

// certDirMode and the certificate files' 0600 (client-go's file store
// writes them so) keep the keys to the agent's user.
const certDirMode = 0o700

// ClientOptions configure a Client. NodeName, BootstrapKubeconfig and
// CertDir are required.
type ClientOptions struct {
	// NodeName is the node whose identity is asked for:
	// system:node:<NodeName> in group system:nodes.
	NodeName string
	// BootstrapKubeconfig is the path of the bootstrap kubeconfig (the
	// kubelet's --bootstrap-kubeconfig): the API server's address and CA,
	// and a credential allowed to create CertificateSigningRequests
	// (usually a bootstrap token, group system:bootstrappers). It is used
	// only while the agent has no valid client certificate of its own.
	BootstrapKubeconfig string
	// CertDir is where the certificate pairs are kept (created 0700; the
	// files are 0600), usually in the agent's state directory. Keep it:
	// a restarted agent whose certificate is still valid uses it without
	// bootstrapping again.
	CertDir string
	// Kubeconfig, when set, is the path of a kubeconfig written for the
	// node's identity, pointing at the current pair in CertDir (the
	// kubelet's --kubeconfig after a bootstrap), for kubectl or another
	// tool to act as the node.
	Kubeconfig string
	// RequestedLifetime, when set, is the lifetime asked for the
	// certificates (a CSR's spec.expirationSeconds; at least 10 minutes).
	// The signer may give less: kube-controller-manager gives at most its
	// --cluster-signing-duration (a year by default).
	RequestedLifetime time.Duration
	// Logger receives the certificate manager's logs. Defaults to
	// discarding them.
	Logger logr.Logger
}

// Client is a node's client identity got by TLS bootstrap and kept fresh
// by client-go's certificate manager (k8s.io/client-go/util/certificate):
// with no valid certificate in CertDir, the manager creates a
// CertificateSigningRequest for the kubernetes.io/kube-apiserver-client-
// kubelet signer through the bootstrap credential; kube-controller-
// manager's csrapproving controller approves it (the requester is allowed
// certificatesigningrequests/nodeclient) and its csrsigning controller
// signs it with the cluster CA. The issued pair is kept in CertDir, and
// renewed with the node's own identity (certificatesigningrequests/
// selfnodeclient) at 70 to 90% of its lifetime.
//
// Config's clients present the current pair: client-go reloads it from
// CertDir when it changes and closes the connections made with the old
// one. Create a Client with NewClient, run it with Run (from a goroutine
// of its own), and wait for WaitForCertificate before using Config.
type Client struct {
	opts   ClientOptions
	store  certificate.FileStore
	config *rest.Config
	*rotation
}

// NewClient checks opts, reads the bootstrap kubeconfig and the pair
// CertDir holds, and builds the certificate manager. It contacts nothing
// and starts nothing. Errors say which option or file is wrong.
func NewClient(opts ClientOptions) (*Client, error) {
	switch {
	case opts.NodeName == "":
		return nil, errors.New("bootstrap: ClientOptions.NodeName is required")
	case opts.BootstrapKubeconfig == "":
		return nil, errors.New("bootstrap: ClientOptions.BootstrapKubeconfig is required")
	case opts.CertDir == "":
		return nil, errors.New("bootstrap: ClientOptions.CertDir is required")
	case opts.RequestedLifetime != 0 && opts.RequestedLifetime < 10*time.Minute:
		return nil, fmt.Errorf("bootstrap: ClientOptions.RequestedLifetime %v is below the API's minimum of 10m", opts.RequestedLifetime)
	}
	bootstrapConfig, err := clientcmd.BuildConfigFromFlags("", opts.BootstrapKubeconfig)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: reading the bootstrap kubeconfig: %w", err)
	}
	store, err := newStore(opts.CertDir, ClientPairPrefix, opts.Logger)
	if err != nil {
		return nil, err
	}
	// The node's own identity: the bootstrap kubeconfig's server and CA,
	// and the current pair, which client-go reloads when it changes.
	nodeConfig := rest.AnonymousClientConfig(bootstrapConfig)
	nodeConfig.CertFile, nodeConfig.KeyFile = store.CurrentPath(), store.CurrentPath()
	nodeConfig.UserAgent = "podkit-agent/" + opts.NodeName

	c := &Client{opts: opts, store: store, config: nodeConfig, rotation: newRotation("Client", opts.Logger)}
	var lifetime *time.Duration
	if opts.RequestedLifetime != 0 {
		lifetime = &opts.RequestedLifetime
	}
	c.manager, err = certificate.NewManager(&certificate.Config{
		Name: "kubelet client",
		// With no valid pair yet, the bootstrap credential asks; then
		// the node's own identity renews.
		ClientsetFn: func(current *tls.Certificate) (kubernetes.Interface, error) {
			if current == nil {
				return kubernetes.NewForConfig(bootstrapConfig)
			}
			return kubernetes.NewForConfig(nodeConfig)
		},
		Template: &x509.CertificateRequest{Subject: pkix.Name{
			CommonName:   "system:node:" + opts.NodeName,
			Organization: []string{"system:nodes"},
		}},
		SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
		// The manager's keys are ECDSA, which needs no key encipherment.
		Usages:                       []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		RequestedCertificateLifetime: lifetime,
		CertificateStore:             store,
		Ctx:                          &c.rotation.ctx,
	})
	if err != nil {
		c.close()
		return nil, fmt.Errorf("bootstrap: the client certificate manager: %w", err)
	}
	return c, nil
}

// newStore makes dir (0700) and returns the file store of the pairs named
// prefix in it.
func newStore(dir, prefix string, log logr.Logger) (certificate.FileStore, error) {
	if err := os.MkdirAll(dir, certDirMode); err != nil {
		return nil, fmt.Errorf("bootstrap: the certificate directory: %w", err)
	}
	if err := os.Chmod(dir, certDirMode); err != nil {
		return nil, fmt.Errorf("bootstrap: the certificate directory: %w", err)
	}
	store, err := certificate.NewFileStoreWithLogger(log, prefix, dir, dir, "", "")
	if err != nil {
		return nil, fmt.Errorf("bootstrap: the certificate store in %s: %w", dir, err)
	}
	return store, nil
}

// Config returns the client configuration of the node's identity, for
// clientsets: it presents the current pair of CertDir. Requests fail until
// WaitForCertificate has returned nil. The caller may modify the copy it
// gets (QPS, burst, user agent).
func (c *Client) Config() *rest.Config { return rest.CopyConfig(c.config) }

// CertificatePath returns the path of the current pair (certificate and
// key in one PEM file).
func (c *Client) CertificatePath() string { return c.store.CurrentPath() }

// Current returns the current certificate, or nil before the first one is
// issued (or once it expired without renewal).
func (c *Client) Current() *tls.Certificate { return c.manager.Current() }

// Run starts the certificate manager (which bootstraps at once when there
// is no valid pair, then renews before expiry) and blocks until ctx ends;
// then it stops the manager and returns nil. It may be called once. The
// manager's goroutines are client-go's: they end as soon as they see it
// stopped.
func (c *Client) Run(ctx context.Context) error { return c.run(ctx) }

// Close stops the certificate manager. Run calls it when it returns; call
// it for a Client that will not run. It is idempotent.
func (c *Client) Close() { c.close() }

// WaitForCertificate blocks until the node has a valid client certificate
// (at once when CertDir held one) and, when ClientOptions.Kubeconfig is
// set, the kubeconfig for it is written; or until ctx ends, with ctx's
// error. Run must be running for a first certificate to be requested.
func (c *Client) WaitForCertificate(ctx context.Context) error {
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		return c.manager.Current() != nil, nil
	})
	if err != nil {
		return fmt.Errorf("bootstrap: waiting for the client certificate of node %q (is the CSR approved?): %w", c.opts.NodeName, err)
	}
	if c.opts.Kubeconfig != "" {
		return c.writeKubeconfig()
	}
	return nil
}

// writeKubeconfig writes the kubeconfig of the node's identity (0600).
func (c *Client) writeKubeconfig() error {
	cfg := c.config
	cluster := &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthority:     cfg.CAFile,
		CertificateAuthorityData: cfg.CAData,
		TLSServerName:            cfg.ServerName,
		InsecureSkipTLSVerify:    cfg.Insecure,
	}
	kubeconfig := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"default-cluster": cluster},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"default-auth": {ClientCertificate: c.store.CurrentPath(), ClientKey: c.store.CurrentPath()}},
		Contexts:       map[string]*clientcmdapi.Context{"default-context": {Cluster: "default-cluster", AuthInfo: "default-auth"}},
		CurrentContext: "default-context",
	}
	if err := clientcmd.WriteToFile(kubeconfig, c.opts.Kubeconfig); err != nil {
		return fmt.Errorf("bootstrap: writing the node's kubeconfig: %w", err)
	}
	return os.Chmod(c.opts.Kubeconfig, 0o600)
}
