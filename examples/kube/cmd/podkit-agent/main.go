// Command podkit-agent is a node agent built on podkit: it registers a Node
// in a Kubernetes cluster (or reuses one) and runs the pods bound to it as
// processes on this machine, with their status reported to the API server.
//
//	podkit-agent --kubeconfig ~/.kube/config --node-name my-laptop
//
// Pods need a command for each container (images are recorded, never
// pulled); see github.com/podkit/podkit/examples/nodeagent/processruntime
// for what runs and how. Static pods can be given with --manifest-dir; each
// gets a mirror pod in the API server. The agent runs until SIGINT or
// SIGTERM; the pods' processes keep running and are adopted by the next
// agent started with the same --state-dir.
//
// With --client-ca-file, it serves the kubelet API that kubectl logs and
// metrics scrapers use (HTTPS on --kubelet-port, published in the Node's
// status), letting in the clients whose certificates that CA signed (the
// API server's kubelet client certificate) and bearer tokens the API
// server accepts, each as far as the API server authorizes it.
//
// To run with a node identity, give it a kubeconfig for the user
// system:node:<node-name> in group system:nodes: under
// --authorization-mode=Node,RBAC and the NodeRestriction admission plugin
// the agent needs nothing more. Or let it join as a kubelet joins a
// kubeadm or k3s cluster, with a bootstrap token:
//
//	podkit-agent --bootstrap-kubeconfig bootstrap.conf --kubeconfig node.conf \
//	    --client-ca-file ca.crt --rotate-server-certificates
//
// gets its client certificate by TLS bootstrap, keeps it in --cert-dir and
// rotates it (package bootstrap); with --rotate-server-certificates its
// kubelet API serves a certificate of the kubernetes.io/kubelet-serving
// signer, whose CSRs the cluster must approve (package csrapprover).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2/textlogger"

	"github.com/podkit/podkit/examples/kube/agent"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "podkit-agent:", err)
		os.Exit(1)
	}
}

func run() error {
	hostname, _ := os.Hostname()
	var (
		kubeconfig   = flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "path to the kubeconfig of the agent's identity (default $KUBECONFIG; empty: in-cluster config)")
		nodeName     = flag.String("node-name", hostname, "name of the Node to register and run pods for")
		stateDir     = flag.String("state-dir", filepath.Join(os.TempDir(), "podkit-agent"), "directory for process records and logs; keep it across restarts")
		manifestDir  = flag.String("manifest-dir", "", "directory of static pod manifests (empty: none)")
		housekeeping = flag.Duration("housekeeping-interval", 0, "time between housekeeping runs (0: the default, 2s)")
		heartbeat    = flag.Duration("heartbeat-interval", 0, "time between two renewals of the Node's Ready condition and Lease (0: the default, 10s)")
		nodeIP       = flag.String("node-ip", "", "the IP the API server reaches the node's kubelet API at, published as its InternalIP (default: the first global unicast IPv4 address of this machine)")
		kubeletPort  = flag.Int("kubelet-port", 10250, "the port of the kubelet API (container logs, /healthz, /metrics); 0 picks a free one")
		clientCA     = flag.String("client-ca-file", "", "CA certificates (PEM) of the clients of the kubelet API, the API server's --kubelet-client-certificate among them; without it the kubelet API is not served")
		tlsCert      = flag.String("tls-cert-file", "", "serving certificate (PEM) of the kubelet API (default: a self-signed one for --node-ip)")
		tlsKey       = flag.String("tls-private-key-file", "", "the key of --tls-cert-file")
		apiQPS       = flag.Float64("kube-api-qps", 50, "queries per second to the API server (the kubelet's default)")
		apiBurst     = flag.Int("kube-api-burst", 100, "burst of queries to the API server (the kubelet's default)")
		verbosity    = flag.Int("v", 0, "log verbosity")
		allowHost    = flag.Bool("allow-host-access", false, "let pods ask for what reaches the host: privileged containers, hostNetwork, hostPID, hostIPC, hostUsers and hostPath volumes (off: such pods are rejected, HostAccessNotAllowed)")
	)
	flag.Parse()
	if *nodeName == "" {
		return fmt.Errorf("--node-name is required (the hostname is unknown)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(*verbosity)))

	cfg, joined, err := clientConfig(ctx, *kubeconfig, *nodeName, *stateDir, logger)
	defer joined.stop()
	if err != nil {
		return err
	}
	cfg.UserAgent = "podkit-agent/" + *nodeName
	// client-go's default (5 per second) would hold back the status
	// updates of a node starting a few dozen pods for seconds.
	cfg.QPS, cfg.Burst = float32(*apiQPS), *apiBurst
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}

	api, err := kubeletAPI(*clientCA, *nodeIP, *kubeletPort, *tlsCert, *tlsKey)
	if err != nil {
		return err
	}
	if err := joined.serve(api, client, *nodeName, logger); err != nil {
		return err
	}
	if api == nil {
		logger.Info("Not serving the kubelet API (kubectl logs, /metrics): no --client-ca-file")
	}
	// The pods' sandboxes hide the agent's credentials (its state
	// directory is hidden anyway).
	var masks []string
	for _, p := range []string{*kubeconfig, *clientCA, *tlsCert, *tlsKey, *bootstrapKubeconfig, *certDir} {
		if p != "" {
			if abs, err := filepath.Abs(p); err == nil {
				masks = append(masks, abs)
			}
		}
	}
	a, err := agent.New(agent.Config{
		Client:               client,
		NodeName:             *nodeName,
		StateDir:             *stateDir,
		ManifestDir:          *manifestDir,
		HousekeepingInterval: *housekeeping,
		HeartbeatInterval:    *heartbeat,
		KubeletAPI:           api,
		Logger:               logger,
		AllowHostAccess:      *allowHost,
		Masks:                masks,
	})
	if err != nil {
		return err
	}
	start := time.Now()
	err = a.Run(ctx)
	logger.Info("Exiting", "ranFor", time.Since(start).Round(time.Second))
	return err
}
