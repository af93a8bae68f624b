package clustertest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"

	"github.com/podkit/podkit/examples/kube/internal/controlplane"
)

// The cluster's directory holds the control plane and the nodes apart, so
// that nothing of the control plane is under a node's directory (a pod's
// files are under its node's):
//
//	<Dir>/                          0700
//	    control-plane/              0700  the control plane's (controlplane.FilesIn)
//	        pki/                    0700  keys and certificates, 0600 each
//	        admin.kubeconfig        0600  Kubeconfig
//	        scheduler.kubeconfig    0600
//	        controller-manager.kubeconfig
//	        etcd/                   0700  etcd's data
//	    nodes/                      0700
//	        <node>/                 0700  a node's state directory
const (
	controlPlaneDirName = "control-plane"
	nodesDirName        = "nodes"
)

// The identities of the scheduler and the controller manager. The
// scheduler's bootstrap RBAC role is enough for it; the controller manager
// runs every controller under its own identity
// (--use-service-account-credentials=false) and so is an administrator.
const (
	schedulerUser         = "system:kube-scheduler"
	controllerManagerUser = "system:kube-controller-manager"
)

// writeControlPlaneFiles creates the cluster CA and the etcd CA, and
// writes into files (the control plane's directory, which exists) every
// key, certificate and kubeconfig podkit-controlplane reads, each readable
// by its owner only, for an API server at host. The etcd CA's and the
// front proxy CA's keys are not written: they have signed everything they
// ever will.
func (c *Cluster) writeControlPlaneFiles(files controlplane.Files, host string) error {
	if err := os.MkdirAll(filepath.Dir(files.CACert), privateDir); err != nil {
		return fmt.Errorf("clustertest: %w", err)
	}
	var err error
	if c.ca, err = newAuthority("podkit-cluster-ca"); err != nil {
		return fmt.Errorf("clustertest: the cluster CA: %w", err)
	}
	etcdCA, err := newAuthority("podkit-etcd-ca")
	if err != nil {
		return fmt.Errorf("clustertest: the etcd CA: %w", err)
	}
	frontProxyCA, err := newAuthority("podkit-front-proxy-ca")
	if err != nil {
		return fmt.Errorf("clustertest: the front proxy CA: %w", err)
	}
	loopback := []net.IP{net.IPv4(127, 0, 0, 1)}
	steps := []func() error{
		func() error { return c.ca.writeCert(files.CACert) },
		func() error { return c.ca.writeKey(files.CAKey) },
		func() error {
			return issueAndWrite(c.ca.servingCert("kube-apiserver", append(loopback, net.ParseIP(controlplane.ServiceIP)),
				[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}),
			)(files.APIServerCert, files.APIServerKey)
		},
		// The kubelet client certificate is an administrator's, as
		// kubeadm's was: the agents' SubjectAccessReviews allow it
		// everything.
		func() error {
			return issueAndWrite(c.ca.clientCert("kube-apiserver-kubelet-client", "system:masters"))(files.KubeletClientCert, files.KubeletClientKey)
		},
		func() error { return writeServiceAccountKey(files.ServiceAccountKey) },
		func() error { return etcdCA.writeCert(files.EtcdCACert) },
		func() error {
			return issueAndWrite(etcdCA.peerCert("etcd", loopback, []string{"localhost"}))(files.EtcdCert, files.EtcdKey)
		},
		func() error {
			return issueAndWrite(etcdCA.clientCert("kube-apiserver-etcd-client"))(files.APIServerEtcdClientCert, files.APIServerEtcdClientKey)
		},
		func() error { return frontProxyCA.writeCert(files.FrontProxyCACert) },
		func() error {
			return issueAndWrite(frontProxyCA.clientCert(controlplane.FrontProxyClientName))(files.FrontProxyClientCert, files.FrontProxyClientKey)
		},
		func() error { return c.writeUserKubeconfig(files.SchedulerKubeconfig, host, schedulerUser) },
		func() error {
			return c.writeUserKubeconfig(files.ControllerManagerKubeconfig, host, controllerManagerUser, "system:masters")
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return fmt.Errorf("clustertest: writing the control plane's files: %w", err)
		}
	}
	return nil
}

// issueAndWrite returns a function that writes the pair issued (unless
// issuing failed) to a certificate and a key file.
func issueAndWrite(pair keyPair, err error) func(certFile, keyFile string) error {
	return func(certFile, keyFile string) error {
		if err != nil {
			return err
		}
		return pair.write(certFile, keyFile)
	}
}

// writeUserKubeconfig writes a kubeconfig at path for user in groups, with
// a client certificate of the cluster CA, for the API server at host.
func (c *Cluster) writeUserKubeconfig(path, host, user string, groups ...string) error {
	cfg, err := c.userConfig(host, user, groups...)
	if err != nil {
		return err
	}
	return WriteKubeconfig(path, cfg)
}

// userConfig returns a client configuration for host that authenticates
// as user in groups, with a client certificate of the cluster CA.
func (c *Cluster) userConfig(host, user string, groups ...string) (*rest.Config, error) {
	cert, err := c.ca.clientCert(user, groups...)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host: host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   c.ca.certPEM,
			CertData: cert.certPEM,
			KeyData:  cert.keyPEM,
		},
		// Tests and controllers burst; the API server's own flow control
		// is what limits them.
		QPS:   1000,
		Burst: 2000,
	}, nil
}
