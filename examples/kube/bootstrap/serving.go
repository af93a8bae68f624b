package bootstrap

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/certificate"
)

// ServingOptions configure a Serving. NodeName, Client, CertDir and at
// least one address or hostname are required.
type ServingOptions struct {
	// NodeName is the node: the certificate's subject is
	// system:node:<NodeName> in group system:nodes.
	NodeName string
	// Client acts as the node (system:node:<NodeName>), which may create
	// CertificateSigningRequests for its own serving certificate.
	Client kubernetes.Interface
	// CertDir is where the pairs are kept (0700; files 0600), usually the
	// Client's.
	CertDir string
	// IPs and Hostnames are the certificate's subject alternative names:
	// the addresses the Node publishes (its InternalIP) and its hostname.
	// An approver checks them against the Node's status.addresses.
	IPs       []net.IP
	Hostnames []string
	// RequestedLifetime is as ClientOptions'.
	RequestedLifetime time.Duration
	// Logger receives the certificate manager's logs.
	Logger logr.Logger
}

// Serving is the kubelet API's serving certificate from the
// kubernetes.io/kubelet-serving signer (the kubelet's
// --rotate-server-certificates), kept fresh by client-go's certificate
// manager: its CertificateSigningRequest names the node's addresses,
// kube-controller-manager's csrsigning controller signs it once approved,
// and it is renewed at 70 to 90% of its lifetime.
//
// kube-controller-manager never approves serving CSRs: the cluster needs
// an approver that checks their names against the Node's addresses
// (package csrapprover runs one; kubeadm clusters commonly run
// kubelet-csr-approver), or an administrator's `kubectl certificate
// approve`. Until one is issued the kubelet API refuses TLS handshakes,
// as a kubelet does.
//
// Create it with NewServing, run it with Run, and give GetCertificate to
// the TLS server.
type Serving struct {
	opts ServingOptions
	*rotation
}

// NewServing checks opts and builds the certificate manager over the
// pairs of CertDir. It contacts nothing and starts nothing.
func NewServing(opts ServingOptions) (*Serving, error) {
	switch {
	case opts.NodeName == "":
		return nil, errors.New("bootstrap: ServingOptions.NodeName is required")
	case opts.Client == nil:
		return nil, errors.New("bootstrap: ServingOptions.Client is required")
	case opts.CertDir == "":
		return nil, errors.New("bootstrap: ServingOptions.CertDir is required")
	case len(opts.IPs) == 0 && len(opts.Hostnames) == 0:
		return nil, errors.New("bootstrap: ServingOptions needs an IP or a hostname for the certificate")
	case opts.RequestedLifetime != 0 && opts.RequestedLifetime < 10*time.Minute:
		return nil, fmt.Errorf("bootstrap: ServingOptions.RequestedLifetime %v is below the API's minimum of 10m", opts.RequestedLifetime)
	}
	store, err := newStore(opts.CertDir, ServingPairPrefix, opts.Logger)
	if err != nil {
		return nil, err
	}
	s := &Serving{opts: opts, rotation: newRotation("Serving", opts.Logger)}
	var lifetime *time.Duration
	if opts.RequestedLifetime != 0 {
		lifetime = &opts.RequestedLifetime
	}
	s.manager, err = certificate.NewManager(&certificate.Config{
		Name:        "kubelet serving",
		ClientsetFn: func(*tls.Certificate) (kubernetes.Interface, error) { return opts.Client, nil },
		Template: &x509.CertificateRequest{
			Subject:     pkix.Name{CommonName: "system:node:" + opts.NodeName, Organization: []string{"system:nodes"}},
			IPAddresses: opts.IPs,
			DNSNames:    opts.Hostnames,
		},
		SignerName:                   certificatesv1.KubeletServingSignerName,
		Usages:                       []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
		RequestedCertificateLifetime: lifetime,
		CertificateStore:             store,
		Ctx:                          &s.rotation.ctx,
	})
	if err != nil {
		s.close()
		return nil, fmt.Errorf("bootstrap: the serving certificate manager: %w", err)
	}
	return s, nil
}

// ErrNoServingCertificate is GetCertificate's error before a serving
// certificate is issued (or after it expired unrenewed).
var ErrNoServingCertificate = errors.New("bootstrap: no serving certificate issued yet")

// GetCertificate returns the current serving certificate, for
// tls.Config.GetCertificate; ErrNoServingCertificate before one is
// issued. It is called from the TLS server's goroutines.
func (s *Serving) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if cert := s.manager.Current(); cert != nil {
		return cert, nil
	}
	return nil, ErrNoServingCertificate
}

// Current returns the current serving certificate, or nil.
func (s *Serving) Current() *tls.Certificate { return s.manager.Current() }

// Run starts the certificate manager and blocks until ctx ends, then
// stops it and returns nil. It may be called once.
func (s *Serving) Run(ctx context.Context) error { return s.run(ctx) }

// Close stops the certificate manager; idempotent.
func (s *Serving) Close() { s.close() }
