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
// nodes and pods as they change. Ctrl-C (or SIGTERM) stops every pod's
// processes and the control plane, removes the temporary directory and the
// kubeconfig, and exits 0.
//
// With --metrics-server it runs metrics-server too, so kubectl
// top node and top pod answer once it has scraped the nodes twice (about 30
// seconds), and an approver of the nodes' serving certificate requests, so
// a podkit-agent joining with --bootstrap-kubeconfig and
// --rotate-server-certificates gets its certificates.
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
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/klog/v2/textlogger"

	"github.com/podkit/podkit/examples/kube/clustertest"
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
		metrics    = flag.Bool("metrics-server", false, "run metrics-server, for kubectl top (built the first time: minutes)")
	)
	flag.Parse()
	if *nodes < 0 {
		return fmt.Errorf("--nodes must not be negative, got %d", *nodes)
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
	fmt.Printf("Starting a control plane and %d podkit nodes (logs: %s)...\n", *nodes, logPath)
	start := time.Now()
	c, err := clustertest.Start(ctx, clustertest.Options{
		Nodes:           clustertest.Nodes(*nodes),
		Dir:             filepath.Join(dir, "cluster"),
		Logger:          logger,
		ControlPlane:    *binary,
		ControlPlaneLog: logs,
		MetricsServer:   *metrics,
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

	if !*quiet {
		go watch(ctx, c.Admin(), os.Stdout)
	}
	<-ctx.Done()
	stop() // a second Ctrl-C kills at once
	fmt.Println()
	if err := closeCluster(); err != nil {
		return err
	}
	fmt.Println("Stopped.")
	return nil
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
