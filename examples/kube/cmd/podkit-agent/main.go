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
//
// Pods run in a sandbox of their own where the machine allows it
// (--sandbox), on the node's pod network: a bridge with an address of the
// node's range for each pod (--pod-cidr, by default the Node's
// spec.podCIDR), with /etc/hosts and /etc/resolv.conf by their dnsPolicy
// (--cluster-dns, --cluster-domain, --resolv-conf). What reaches the
// host (privileged, host namespaces, hostPath) needs --allow-host-access.
//
// To see what the agent holds, --debug-address 127.0.0.1:6060 serves
// Go's profiles (go tool pprof -top -inuse_space
// http://127.0.0.1:6060/debug/pprof/heap) and counters (/debug/vars: the
// Go runtime's memory statistics, goroutines, the API requests sent by
// verb and resource) on a loopback address, without authentication.
// --memory-limit 18Mi (or GOMEMLIMIT=18MiB) sets a soft limit on the Go
// runtime's memory that makes the garbage collector work harder near it;
// GOGC applies too. There is none by default: the Go runtime's memory
// grows with the node's pods, and a limit below what they keep live has
// the collector run again and again (up to half the agent's CPU), so size
// it to the node (18Mi holds 30 pods' 6 MiB of live heap and 7 MiB of
// stacks and GC metadata). --stage-executable also cuts the agent's own
// resident memory, not only its CPU per pod start: pods' processes that
// run the agent's binary keep most of it in the page cache, and the
// agent's page faults then map their neighbours too. Its default, auto,
// is podkit-stages installed in the agent's own directory, when it was
// built from the same source:
//
//	cd examples/kube && go build -tags netgo,osusergo -o /usr/local/bin/ ./cmd/podkit-agent github.com/podkit/podkit/examples/nodeagent/processruntime/cmd/podkit-stages
//
// Once set up, the agent drops the pages of its own binary that its start
// made resident, and has the kernel page the binary
// in at random from then on (madvise MADV_DONTNEED, then MADV_RANDOM), so
// that what stays resident is what it runs; PODKIT_BINARY_PAGING=readahead
// keeps the kernel's default. See examples/kube's README, "The agent's
// footprint".
//
// SIGUSR1, or
//
//	podkit-agent shutdown --state-dir DIR
//
// (through the unix socket DIR/shutdown.sock, mode 0600, for root and the
// agent's user), shuts the node down as a kubelet's graceful node
// shutdown: no new pod is admitted, the Node turns NotReady, and every pod
// gets its terminationGracePeriodSeconds and preStop hooks within
// --shutdown-grace-period, critical pods last; then the agent exits.
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

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2/textlogger"

	"github.com/podkit/podkit/examples/kube/agent"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/lifecycle/nodeshutdown"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "shutdown" {
		if err := shutdownCommand(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "podkit-agent shutdown:", err)
			os.Exit(1)
		}
		return
	}
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
		compression  = flag.Bool("kube-api-compression", false, "ask the API server for gzip-compressed responses: worth it on a slow link to the API server; off by default since each of the agent's watches (one per secret and config map its pods use) would hold a decompressor of about 40 KiB")
		contentType  = flag.String("kube-api-content-type", runtime.ContentTypeProtobuf, "the content type of requests to the API server, as the kubelet's flag: protobuf (the default, smaller and cheaper to decode than JSON) or application/json")
		verbosity    = flag.Int("v", 0, "log verbosity")
		allowHost    = flag.Bool("allow-host-access", false, "let pods ask for what reaches the host: privileged containers, hostNetwork, hostPID, hostIPC, hostUsers and hostPath volumes (off: such pods are rejected, HostAccessNotAllowed)")
		imageConfig  = flag.String("image-config", "", "YAML or JSON `file` of image configurations (entrypoint, cmd, workingDir, env, user) for containers without a command of their own, over the built-in ones (busybox, alpine, debian, ...); see processruntime.LoadImageTable")
		sandboxFlag  = flag.String("sandbox", "auto", "run each pod in a sandbox of its own (user, mount, PID, IPC, UTS and network namespaces): auto (where the machine allows it: root, user namespaces, Linux 5.12+), on (refuse to start without), off")
		stages       = flag.String("stage-executable", stagesAuto, "absolute path of processruntime's cmd/podkit-stages, built from the same source as the agent: each pod's sandbox stages and log shims run it rather than the agent's own executable, at a fraction of the CPU per pod start and of the memory (theirs, and the agent's own: its faults map what they keep of its binary in the page cache); auto: podkit-stages in the agent's own directory when it is there and of the agent's source, else the agent's own executable; self: the agent's own")
		podCIDR      = flag.String("pod-cidr", "", "the node's IPv4 pod range, such as 10.88.0.0/24: each sandboxed pod gets an address of it on the node's bridge (empty: the Node's spec.podCIDR, from the controller manager's node IPAM; none: no pod network, a loopback only)")
		podCIDRWait  = flag.Duration("pod-cidr-wait", agent.DefaultPodCIDRWait, "with --pod-cidr empty, how long to wait for the Node's spec.podCIDR after registering")
		bridge       = flag.String("bridge-name", "", "the node's bridge (default: pkbr and the range's address in hex)")
		clusterDNS   = flag.String("cluster-dns", "", "comma-separated addresses of the cluster DNS servers, for pods with dnsPolicy ClusterFirst (empty: such pods resolve as with Default, with a MissingClusterDNS warning)")
		domain       = flag.String("cluster-domain", "cluster.local", "the cluster's DNS domain: ClusterFirst pods' search domains, and the names of pods with a subdomain in their /etc/hosts")
		resolvConf   = flag.String("resolv-conf", defaultResolvConf(), "the resolver configuration dnsPolicy Default pods get (default: /etc/resolv.conf, or systemd-resolved's upstream file when /etc/resolv.conf names only loopback servers, which pods cannot reach)")
		grace        = flag.Duration("shutdown-grace-period", 30*time.Second, "on an explicit node shutdown (SIGUSR1 or podkit-agent shutdown), how long stopping the pods may take in all; each gets its terminationGracePeriodSeconds within it")
		critical     = flag.Duration("shutdown-grace-period-critical-pods", 10*time.Second, "the part of --shutdown-grace-period kept for critical pods, stopped last")
		runtimeFlag  = flag.String("runtime", string(agent.RuntimeProcess), "the pod runtime: process (each container a local process) or hollow (no process at all: each pod goes through the same lifecycle, status writes and events, its containers only pretend to run; the hollow node of scalability tests, kubemark's; the flags of the process runtime are then ignored)")
		debugAddr    = flag.String("debug-address", "", "a loopback host:port (such as 127.0.0.1:6060) to serve Go's profiles (/debug/pprof/) and counters (/debug/vars: memory, goroutines, the API requests sent) on, without authentication (empty: not served)")
		memoryLimit  = flag.String("memory-limit", "", "a soft limit on the Go runtime's memory (heap, stacks; not the binary's pages), such as 18Mi for 30 pods: the garbage collector works harder near it, as with GOMEMLIMIT; size it to the node's pods, since below their live heap the collector runs again and again (empty: GOMEMLIMIT's, by default none)")
	)
	flag.Parse()
	if err := memoryLimitSetting(*memoryLimit); err != nil {
		return err
	}
	if *nodeName == "" {
		return fmt.Errorf("--node-name is required (the hostname is unknown)")
	}
	var images processruntime.ImageConfigs
	if *imageConfig != "" {
		table, err := processruntime.LoadImageTable(*imageConfig)
		if err != nil {
			return fmt.Errorf("--image-config: %w", err)
		}
		images = table
	}
	net, err := networkConfig(*sandboxFlag, *podCIDR, *bridge, *clusterDNS)
	if err != nil {
		return err
	}
	podRuntime, err := agent.ParseRuntime(*runtimeFlag)
	if err != nil {
		return fmt.Errorf("--runtime: %w", err)
	}
	// The state directory holds the shutdown socket (and the certificates'
	// default directory) whatever the runtime: the hollow one keeps
	// nothing of its own there, so it may not exist yet.
	if err := os.MkdirAll(*stateDir, 0o700); err != nil {
		return fmt.Errorf("--state-dir: %w", err)
	}
	budget := nodeshutdown.Budget{GracePeriod: *grace, CriticalGracePeriod: *critical}
	if budget.GracePeriod <= 0 || budget.CriticalGracePeriod < 0 || budget.CriticalGracePeriod > budget.GracePeriod {
		return fmt.Errorf("--shutdown-grace-period (%v) must be positive and --shutdown-grace-period-critical-pods (%v) between 0 and it", *grace, *critical)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(*verbosity)))
	logPaging(logger)
	stageExe, err := stageExecutable(ctx, *stages, podRuntime, logger)
	if err != nil {
		return err
	}

	cfg, joined, err := clientConfig(ctx, *kubeconfig, *nodeName, *stateDir, logger)
	defer joined.stop()
	if err != nil {
		return err
	}
	cfg.UserAgent = "podkit-agent/" + *nodeName
	if *debugAddr != "" {
		l, err := listenDebug(*debugAddr)
		if err != nil {
			return err
		}
		requests := &requestCounter{}
		cfg.Wrap(requests.wrap)
		debugCtx, stopDebug := context.WithCancel(context.Background())
		debugDone := make(chan struct{})
		go func() { defer close(debugDone); serveDebug(debugCtx, l, requests, logger) }()
		defer func() { stopDebug(); <-debugDone }()
	}
	// client-go's default (5 per second) would hold back the status
	// updates of a node starting a few dozen pods for seconds.
	cfg.QPS, cfg.Burst = float32(*apiQPS), *apiBurst
	// Protobuf, as the kubelet asks for it: the watches of the node's
	// pods and their objects decode with fewer allocations than JSON.
	cfg.ContentType, cfg.DisableCompression = *contentType, !*compression
	if *contentType == runtime.ContentTypeProtobuf {
		cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	}
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
		Runtime:              podRuntime,
		StateDir:             *stateDir,
		ManifestDir:          *manifestDir,
		HousekeepingInterval: *housekeeping,
		HeartbeatInterval:    *heartbeat,
		KubeletAPI:           api,
		Logger:               logger,
		AllowHostAccess:      *allowHost,
		Masks:                masks,
		ImageConfigs:         images,
		Sandbox:              net.sandbox,
		StageExecutable:      stageExe,
		PodCIDR:              net.podCIDR,
		PodCIDRFromNode:      net.fromNode,
		PodCIDRWait:          *podCIDRWait,
		BridgeName:           *bridge,
		ClusterDNS:           net.clusterDNS,
		ClusterDomain:        *domain,
		ResolvConf:           *resolvConf,
	})
	if err != nil {
		return err
	}
	// What the inits and the set-up touched of the binary is not what the
	// agent runs from now on.
	releasePaging(logger)
	// An explicit node shutdown (SIGUSR1, or podkit-agent shutdown on the
	// socket) stops the pods within the budget, then ends the agent.
	ctx, shutDown := context.WithCancel(ctx)
	defer shutDown()
	sock, err := listenShutdown(*stateDir)
	if err != nil {
		return err
	}
	// Closed (and so unlinked) at exit: a stale socket would refuse the
	// next agent's callers until it replaces it.
	defer sock.Close()
	go serveShutdown(ctx, sock, budget, a, shutDown, logger)
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	go func() {
		select {
		case <-usr1:
			logger.Info("Node shutdown requested by SIGUSR1", "gracePeriod", budget.GracePeriod)
			report, err := runShutdown(ctx, budget, a)
			logger.Info("Node shut down", "stopped", len(report.Terminated), "stillStopping", len(report.NotTerminated), "err", err)
			shutDown()
		case <-ctx.Done():
		}
	}()
	start := time.Now()
	err = a.Run(ctx)
	logger.Info("Exiting", "ranFor", time.Since(start).Round(time.Second))
	return err
}

// shutdownCommand is `podkit-agent shutdown [--state-dir DIR]`.
func shutdownCommand(args []string) error {
	fs := flag.NewFlagSet("podkit-agent shutdown", flag.ContinueOnError)
	stateDir := fs.String("state-dir", filepath.Join(os.TempDir(), "podkit-agent"), "the --state-dir of the agent to shut down")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to wait for the agent's report")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return requestShutdown(*stateDir, *timeout, os.Stdout)
}
