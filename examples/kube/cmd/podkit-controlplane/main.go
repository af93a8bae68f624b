// Command podkit-controlplane runs a Kubernetes control plane in one
// process: etcd, kube-apiserver, kube-scheduler and kube-controller-manager.
// Package clustertest builds it (once, with go build) and runs it as a child
// process, so that programs and tests importing clustertest never build or
// link Kubernetes themselves; the protocol between the two, the files it
// reads and its flags are package internal/controlplane's.
//
//	podkit-controlplane --dir DIR [--kube-apiserver-arg=--flag=value]...
//	    [--kube-scheduler-arg=...]... [--kube-controller-manager-arg=...]...
//
// It is not meant to be run by hand: it expects the API server's listening
// socket and a status pipe as inherited file descriptors, and the
// directory's certificates written by clustertest.
//
// The components run with the flags a test cluster needs (see
// apiserverFlags and controllerManagerFlags): etcd takes only mutual-TLS
// clients of its own CA; the API server authorizes with Node,RBAC and
// NodeRestriction; the controller manager runs its default controller set
// but the ones disabledControllers names, with the service account key, the
// cluster CA and a pod range (node IPAM) that the token controller, the root
// CA publisher, CSR signing and node IPAM need. The servers report the
// version of k8s.io/kubernetes the program is built from (package
// releaseversion), as release builds do, however it is built.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/version"
	"k8s.io/klog/v2"

	"github.com/podkit/podkit/examples/kube/internal/controlplane"
	"github.com/podkit/podkit/examples/kube/internal/releaseversion"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "podkit-controlplane:", err)
		os.Exit(1)
	}
}

// args is a repeatable string flag.
type args []string

func (a *args) String() string     { return strings.Join(*a, " ") }
func (a *args) Set(v string) error { *a = append(*a, v); return nil }

func run() error {
	var (
		dir                               string
		apiserverArgs, schedArgs, kcmArgs args
	)
	klog.InitFlags(nil)
	flag.StringVar(&dir, controlplane.FlagDir, "", "the control plane's directory: certificates, kubeconfigs, etcd's data")
	flag.Var(&apiserverArgs, controlplane.FlagAPIServerArg, "a flag of kube-apiserver (repeatable)")
	flag.Var(&schedArgs, controlplane.FlagSchedulerArg, "a flag of kube-scheduler (repeatable)")
	flag.Var(&kcmArgs, controlplane.FlagControllerManagerArg, "a flag of kube-controller-manager (repeatable)")
	flag.Parse()
	if dir == "" {
		return fmt.Errorf("--%s is required", controlplane.FlagDir)
	}
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", flag.Args())
	}
	files := controlplane.FilesIn(dir)
	listener, err := net.FileListener(os.NewFile(controlplane.ListenerFD, "listener"))
	if err != nil {
		return fmt.Errorf("no API server listener as file descriptor %d (podkit-controlplane is run by package clustertest): %w", controlplane.ListenerFD, err)
	}
	status := os.NewFile(controlplane.StatusFD, "status")
	defer status.Close()
	if _, err := releaseversion.Set(); err != nil {
		klog.ErrorS(err, "The servers will not report their release")
	}
	for _, c := range disabledControllers {
		klog.InfoS("Controller turned off", "controller", c.name, "why", c.why)
	}

	// Stop on SIGTERM, SIGINT or the end of standard input: clustertest
	// holds the other end, so its death stops the control plane too, in
	// order. The output pipe breaks then as well: a log line written to it
	// must not kill the program with SIGPIPE halfway.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()

	etcd, etcdURL, err := startEtcd(ctx, files)
	if err != nil {
		listener.Close()
		return err
	}
	defer etcd.Close()
	admin, err := clientFor(files.AdminKubeconfig)
	if err != nil {
		listener.Close()
		return err
	}
	var servers []*component
	// Stop in the reverse order of the starts: the controller manager,
	// the scheduler, then the API server; etcd last (deferred above).
	stopAll := func() error {
		var errs []error
		for i := len(servers) - 1; i >= 0; i-- {
			if err := servers[i].Stop(); err != nil && !errors.Is(err, context.Canceled) {
				errs = append(errs, fmt.Errorf("%s: %w", servers[i].name, err))
			}
		}
		return errors.Join(errs...)
	}
	apiserver, err := startAPIServer(ctx, listener, files, etcdURL, apiserverArgs, admin)
	if err != nil {
		return err
	}
	servers = append(servers, apiserver)
	sched, err := startScheduler(files, schedArgs)
	if err != nil {
		return errors.Join(err, stopAll())
	}
	servers = append(servers, sched)
	kcm, err := startControllerManager(files, kcmArgs)
	if err != nil {
		return errors.Join(err, stopAll())
	}
	servers = append(servers, kcm)

	line, err := json.Marshal(controlplane.Status{Etcd: etcdURL, Version: version.Get().GitVersion})
	if err != nil {
		return errors.Join(err, stopAll())
	}
	if _, err := status.Write(append(line, '\n')); err != nil {
		return errors.Join(fmt.Errorf("writing the status: %w", err), stopAll())
	}
	status.Close()

	// Run until told to stop, or until a component ends on its own.
	ended := make(chan *component, len(servers))
	for _, s := range servers {
		go func() {
			<-s.Done()
			ended <- s
		}()
	}
	select {
	case <-ctx.Done():
		return stopAll()
	case s := <-ended:
		_, err := s.Stopped()
		if err == nil {
			err = errors.New("it returned")
		}
		return errors.Join(fmt.Errorf("%s stopped on its own: %w", s.name, err), stopAll())
	}
}

// clientFor returns a clientset for the kubeconfig file at path.
func clientFor(path string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return kubernetes.NewForConfig(cfg)
}
