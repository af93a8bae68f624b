// Package controlplane is the contract between package clustertest and the
// podkit-controlplane program (cmd/podkit-controlplane) that clustertest
// builds and runs as a child process: the flags the program takes, the
// files it finds in the directory it is given, the file descriptors it
// inherits and the status it reports. It imports nothing of Kubernetes, so
// that clustertest, and every module importing it, never depends on
// k8s.io/kubernetes; only the program does.
//
// The protocol, in order:
//
//  1. clustertest creates the directory (0700) and writes the files of
//     Files into it (0600): certificates, keys and kubeconfigs.
//  2. It listens for the API server on 127.0.0.1 and starts the program
//     with FlagDir and the components' extra flags, the listening socket
//     as ListenerFD, the write end of a pipe as StatusFD, and the read end
//     of another pipe as standard input.
//  3. The program starts etcd, the API server (on the inherited socket),
//     the scheduler and the controller manager, waits until the API
//     server is healthy, writes one Status as a JSON line to StatusFD and
//     closes it. If it fails first, it closes StatusFD without a line,
//     says why on standard error and exits 1.
//  4. It runs until standard input ends (clustertest closed its end, or
//     died) or it gets SIGTERM or SIGINT, then stops the controller
//     manager, the scheduler, the API server and etcd, in that order, and
//     exits 0.
package controlplane

import "path/filepath"

// The flags of podkit-controlplane.
const (
	// FlagDir names the control plane's directory: Files and etcd's data.
	FlagDir = "dir"
	// FlagAPIServerArg, FlagSchedulerArg and FlagControllerManagerArg
	// each pass one command-line flag (--name=value) to the component,
	// after, and so winning over, the program's own. They may be repeated.
	FlagAPIServerArg         = "kube-apiserver-arg"
	FlagSchedulerArg         = "kube-scheduler-arg"
	FlagControllerManagerArg = "kube-controller-manager-arg"
)

// The file descriptors podkit-controlplane inherits (os/exec's ExtraFiles
// start at 3).
const (
	// StatusFD is a pipe on which the program writes one Status line.
	StatusFD = 3
	// ListenerFD is the API server's listening TCP socket.
	ListenerFD = 4
)

// Status is what podkit-controlplane reports once it serves.
type Status struct {
	// Etcd is etcd's client URL. It takes only clients with a certificate
	// of the etcd CA (Files.EtcdCACert).
	Etcd string `json:"etcd"`
	// Version is the Kubernetes version the API server reports.
	Version string `json:"version"`
}

// Files are the paths of the files in a control plane's directory, each
// written by clustertest with mode 0600 before the program starts.
type Files struct {
	// CACert and CAKey are the cluster's certificate authority: it signs
	// the API server's serving certificate, every client certificate of the
	// cluster (administrator, nodes, the API server's kubelet client) and
	// the nodes' serving certificates. The controller manager signs
	// approved CertificateSigningRequests with it and publishes CACert as
	// every namespace's kube-root-ca.crt.
	CACert, CAKey string
	// APIServerCert and APIServerKey serve the API server's HTTPS.
	APIServerCert, APIServerKey string
	// KubeletClientCert and KubeletClientKey are the API server's client
	// certificate toward the nodes' kubelet API.
	KubeletClientCert, KubeletClientKey string
	// ServiceAccountKey signs service account tokens (the API server's
	// TokenRequest, the controller manager's token controller) and
	// verifies them.
	ServiceAccountKey string
	// EtcdCACert is etcd's own certificate authority, apart from the
	// cluster's so that no certificate of a node or of a user is ever
	// taken by etcd. It signs EtcdCert (etcd's serving and peer
	// certificate) and APIServerEtcdClientCert; its key is not kept.
	EtcdCACert string
	// EtcdCert and EtcdKey serve etcd's client and peer URLs.
	EtcdCert, EtcdKey string
	// APIServerEtcdClientCert and APIServerEtcdClientKey are the API
	// server's client certificate toward etcd.
	APIServerEtcdClientCert, APIServerEtcdClientKey string
	// FrontProxyCACert is the CA of the front proxy's client certificate
	// (FrontProxyClientCert, common name FrontProxyClientName), with
	// which the API server proxies requests to aggregated API servers;
	// they trust it for the user and group headers. Its key is not kept.
	FrontProxyCACert string
	// FrontProxyClientCert and FrontProxyClientKey are the API server's
	// client certificate toward aggregated API servers.
	FrontProxyClientCert, FrontProxyClientKey string
	// SchedulerKubeconfig and ControllerManagerKubeconfig are the
	// components' kubeconfigs: user system:kube-scheduler, and user
	// system:kube-controller-manager in group system:masters.
	SchedulerKubeconfig, ControllerManagerKubeconfig string
	// AdminKubeconfig is the administrator's kubeconfig (group
	// system:masters), the program's to check the API server's health.
	AdminKubeconfig string
	// EtcdDir holds etcd's data. The program creates it.
	EtcdDir string
}

// FilesIn returns the layout of the control plane's directory dir: the
// keys and certificates in dir/pki, the kubeconfigs in dir, etcd's data in
// dir/etcd.
func FilesIn(dir string) Files {
	pki := func(name string) string { return filepath.Join(dir, PKIDir, name) }
	return Files{
		CACert:                      pki("ca.crt"),
		CAKey:                       pki("ca.key"),
		APIServerCert:               pki("apiserver.crt"),
		APIServerKey:                pki("apiserver.key"),
		KubeletClientCert:           pki("apiserver-kubelet-client.crt"),
		KubeletClientKey:            pki("apiserver-kubelet-client.key"),
		ServiceAccountKey:           pki("sa.key"),
		EtcdCACert:                  pki("etcd-ca.crt"),
		EtcdCert:                    pki("etcd.crt"),
		EtcdKey:                     pki("etcd.key"),
		APIServerEtcdClientCert:     pki("apiserver-etcd-client.crt"),
		APIServerEtcdClientKey:      pki("apiserver-etcd-client.key"),
		FrontProxyCACert:            pki("front-proxy-ca.crt"),
		FrontProxyClientCert:        pki("front-proxy-client.crt"),
		FrontProxyClientKey:         pki("front-proxy-client.key"),
		SchedulerKubeconfig:         filepath.Join(dir, "scheduler.kubeconfig"),
		ControllerManagerKubeconfig: filepath.Join(dir, "controller-manager.kubeconfig"),
		AdminKubeconfig:             filepath.Join(dir, "admin.kubeconfig"),
		EtcdDir:                     filepath.Join(dir, "etcd"),
	}
}

// FrontProxyClientName is the common name of the front proxy's client
// certificate: the only one aggregated API servers take user headers from.
const FrontProxyClientName = "front-proxy-client"

// PKIDir is the directory of the keys and certificates, under the control
// plane's directory.
const PKIDir = "pki"

// The address ranges of the cluster.
const (
	// ServiceCIDR is the range of Services' cluster IPs.
	ServiceCIDR = "10.0.0.0/16"
	// ServiceIP is the API server's own Service IP (kubernetes.default),
	// the first of ServiceCIDR; its serving certificate names it.
	ServiceIP = "10.0.0.1"
	// ClusterCIDR is the range of pod addresses. The controller manager
	// gives each Node a NodeCIDRMaskSize slice of it as spec.podCIDR.
	ClusterCIDR = "10.244.0.0/16"
	// NodeCIDRMaskSize is the prefix length of each Node's pod range: 256
	// Nodes of 254 addresses each.
	NodeCIDRMaskSize = 24
)
