// Command podkit-cluster runs a Kubernetes cluster in one process: etcd,
// kube-apiserver, kube-scheduler and kube-controller-manager, with podkit
// nodes whose pods run as processes on this machine.
//
//	cd examples/kube && go run ./cmd/podkit-cluster --nodes 3
//	go run -C examples/kube ./cmd/podkit-cluster --nodes 3   # the same, from the repository's root
//
// (examples/kube is a module of its own, so the root module cannot run its
// commands by path.) The control plane runs in a child process, the
// podkit-controlplane program that package clustertest builds from this
// module's source with the go command (the first time: minutes; then it is
// up to date in seconds), or --control-plane names a binary of it. It writes an administrator's kubeconfig (to
// --kubeconfig, a file that must not exist yet, or into the cluster's
// temporary directory), prints how to use it, and then prints the
// nodes and pods as they change. Ctrl-C (or SIGTERM) shuts the nodes down
// gracefully, as a kubelet's graceful node shutdown: each pod gets its
// terminationGracePeriodSeconds and preStop hooks within a budget
// (--shutdown-grace-period, default 30s, of which
// --shutdown-grace-period-critical-pods, default 10s, is kept for critical
// pods, stopped last); then it stops what is left of every pod's
// processes and the control plane, removes the nodes' pod networks, the
// temporary directory and the kubeconfig, and exits 0. A second Ctrl-C
// ends it at once.
//
// Pods run sandboxed where the machine allows it (root, user namespaces,
// Linux 5.12+), each with an address of its node's spec.podCIDR on a
// bridge of the node's own; elsewhere in the host's namespaces (see
// package clustertest).
//
// It runs metrics-server too (built from source as the control plane is:
// the first time about 4 minutes, then 2 seconds; --metrics-server=false
// leaves it out), so kubectl top node and top pod answer once it has scraped the
// nodes twice (about 10 to 20 seconds after a pod starts). It also runs an
// approver of the nodes' serving certificate requests, so a podkit-agent
// joining with --bootstrap-kubeconfig and --rotate-server-certificates
// gets its certificates.
//
// It is package clustertest as a command; see examples/kube's README for
// what it is good for and what not.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"k8s.io/klog/v2/textlogger"

	"github.com/podkit/podkit/examples/kube/agent"
	"github.com/podkit/podkit/examples/kube/clustertest"
	"github.com/podkit/podkit/lifecycle/nodeshutdown"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "podkit-cluster:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		nodes      = flag.Int("nodes", 3, "number of podkit nodes (node-0, node-1, ...)")
		kubeconfig = flag.String("kubeconfig", "", "where to write the administrator's kubeconfig, a file that must not exist yet (default: in the cluster's temporary directory); removed at exit")
		logFile    = flag.String("log-file", "", "where to write the control plane's and the agents' logs (default: in the cluster's temporary directory)")
		verbosity  = flag.Int("v", 0, "log verbosity of the agents")
		quiet      = flag.Bool("quiet", false, "do not print nodes and pods as they change")
		binary     = flag.String("control-plane", "", "a podkit-controlplane binary to run (default: built from this module's source)")
		grace      = flag.Duration("shutdown-grace-period", 30*time.Second, "at Ctrl-C, how long the nodes' graceful shutdown may take in all: each pod gets its terminationGracePeriodSeconds within it (0: no graceful shutdown, pods get 1s)")
		critical   = flag.Duration("shutdown-grace-period-critical-pods", 10*time.Second, "the part of --shutdown-grace-period kept for critical pods (system-node-critical, system-cluster-critical), stopped last")
		metrics    = flag.Bool("metrics-server", true, "run metrics-server, for kubectl top: built from source the first time (about 4 minutes on 2 idle cores, 1.5 GB of build cache), then found up to date in 2 seconds; --metrics-server=false to start without it")
	)
	flag.Parse()
	if *nodes < 0 {
		return fmt.Errorf("--nodes must not be negative, got %d", *nodes)
	}
	if *grace < 0 || *critical < 0 || (*grace > 0 && *critical > *grace) {
		return fmt.Errorf("--shutdown-grace-period (%v) and --shutdown-grace-period-critical-pods (%v) must not be negative, nor the second longer than the first", *grace, *critical)
	}
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", flag.Args())
	}
	// The kubeconfig is the cluster's and goes with it: refuse to
	// overwrite (and at exit remove) a file of the user's, such as
	// ~/.kube/config.
	if *kubeconfig != "" {
		if _, err := os.Lstat(*kubeconfig); err == nil {
			return fmt.Errorf("--kubeconfig %s exists: podkit-cluster writes a new file there and removes it at exit; name a file that does not exist", *kubeconfig)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("--kubeconfig: %w", err)
		}
	}

	dir, err := os.MkdirTemp("", "podkit-cluster-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	logPath := *logFile
	if logPath == "" {
		logPath = filepath.Join(dir, "cluster.log")
	}
	// The logs name the cluster's files and identities: for the owner only.
	logs, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer logs.Close()
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(*verbosity), textlogger.Output(logs)))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *binary == "" {
		fmt.Println("Building the control plane (the first build compiles Kubernetes: minutes)...")
		if *binary, err = clustertest.BuildControlPlane(ctx, logs); err != nil {
			return err
		}
	}
	var metricsServer string
	if *metrics {
		fmt.Println("Building metrics-server (the first build compiles it: minutes; --metrics-server=false skips it)...")
		if metricsServer, err = clustertest.BuildMetricsServer(ctx, logs); err != nil {
			return err
		}
	}
	fmt.Printf("Starting a control plane and %d podkit nodes (logs: %s)...\n", *nodes, logPath)
	start := time.Now()
	c, err := clustertest.Start(ctx, clustertest.Options{
		Nodes:               clustertest.Nodes(*nodes),
		Dir:                 filepath.Join(dir, "cluster"),
		Logger:              logger,
		ControlPlane:        *binary,
		ControlPlaneLog:     logs,
		MetricsServer:       *metrics,
		MetricsServerBinary: metricsServer,
	})
	if err != nil {
		return err
	}
	closed := false
	closeCluster := func() error {
		if closed {
			return nil
		}
		closed = true
		fmt.Println("Stopping the pods' processes and the cluster...")
		return c.Close()
	}
	defer closeCluster()

	path := c.Kubeconfig()
	if *kubeconfig != "" {
		path = *kubeconfig
		if err := clustertest.WriteKubeconfig(path, c.AdminConfig()); err != nil {
			return err
		}
		defer os.Remove(path)
	}
	printUsage(os.Stdout, path, time.Since(start))
	printContainment(os.Stdout, c)

	if !*quiet {
		go watch(ctx, c.Admin(), os.Stdout)
	}
	<-ctx.Done()
	stop() // a second Ctrl-C kills at once
	fmt.Println()
	if *grace > 0 {
		shutdownNodes(c, nodeshutdown.Budget{GracePeriod: *grace, CriticalGracePeriod: *critical})
	}
	if err := closeCluster(); err != nil {
		return err
	}
	fmt.Println("Stopped.")
	return nil
}

// shutdownNodes shuts every node down gracefully within budget, as at a
// power-off of the machine, and says how it went.
func shutdownNodes(c *clustertest.Cluster, budget nodeshutdown.Budget) {
	fmt.Printf("Shutting the nodes down (pods get their grace periods, within %v)...\n", budget.GracePeriod)
	// The budget bounds the shutdown; the margin is for the kills to be
	// handed over and the last statuses written.
	ctx, cancel := context.WithTimeout(context.Background(), budget.GracePeriod+5*time.Second)
	defer cancel()
	reports, err := c.Shutdown(ctx, budget)
	for _, n := range slices.Sorted(maps.Keys(reports)) {
		r := reports[n]
		fmt.Printf("  %s: %d pods stopped, %d still stopping\n", n, len(r.Terminated), len(r.NotTerminated))
	}
	if err != nil {
		fmt.Println("  ", err)
	}
}

// printContainment says what the nodes chose for their pods: sandboxed or
// not, their network, the limits the machine enforces, and that what
// would reach the host is refused.
func printContainment(w io.Writer, c *clustertest.Cluster) {
	for _, n := range c.Nodes() {
		a, ok := n.Agent().(*agent.Agent)
		if !ok {
			continue
		}
		cont, hostAccess := a.Containment()
		fmt.Fprintf(w, "Pods on %s (every node alike): %s.\n", n.Name(), cont)
		if hostAccess {
			fmt.Fprintln(w, "Pods may reach the host (privileged, hostNetwork, hostPID, hostIPC, hostUsers: false, hostPath).")
		} else {
			fmt.Fprintln(w, "Pods asking for the host (privileged, hostNetwork, hostPID, hostIPC, hostUsers: false, hostPath) are refused: HostAccessNotAllowed.")
		}
		fmt.Fprintln(w)
		return
	}
}

func printUsage(w io.Writer, kubeconfig string, took time.Duration) {
	fmt.Fprintf(w, `Cluster ready in %v. To use it:

  export KUBECONFIG=%s
  kubectl get nodes          # or, from examples/kube: go tool kubectl get nodes

Pods run as processes on this machine: images are recorded, never pulled,
so each container needs a command. For example:

  kubectl run hello --image=none --restart=Never --command -- /bin/sh -c 'echo hello; sleep 60'
  kubectl logs -f hello

Press Ctrl-C to stop every pod and the cluster.

`, took.Round(100*time.Millisecond), kubeconfig)
}
