// Command nodeagent is a small node agent built on podkit that runs pods as
// local processes. Run with no flags, it plays an embedded demo to its end:
//
//	go run ./examples/nodeagent
//
// Pods come from a fake API server (a long-running web pod, a job with an
// init container, a pod that crashes twice and then succeeds under
// restartPolicy OnFailure, a pod deleted while it runs that traps SIGTERM,
// and a pod asking for more CPU than the node has, which admission
// rejects) and from a static pod manifest, whose mirror pod the agent
// creates in the fake API server. They flow through a lifecycle.Agent
// (admission, the config dispatcher, housekeeping) into
// podworker.PodWorkers, whose hooks run the processruntime package. Every
// lifecycle transition is printed as it happens, and a summary table at the
// end; then the node shuts down cleanly: each pod is terminated with its
// grace period and no process is left behind.
//
// With --manifests DIR it runs the static pods of DIR instead (the folder
// is watched), until SIGINT or SIGTERM, or with --until-idle until they
// have all finished. --listen ADDR serves /pods (every pod's window,
// PodInfo and status, as JSON, a page at a time), /pods/{uid},
// /pods/{uid}/logs/{container} (a container's log, with kubectl's options:
// ?follow=true, ?tailLines=N, previous, timestamps, sinceSeconds or
// sinceTime, limitBytes) and /healthz, on a loopback address unless
// --listen-non-loopback; secret-shaped values (env values, the values of
// flags and variables such as --db-password=X in commands and exec
// probes, among others: see redactPod) are redacted. Each container's logs
// are capped on disk, rotated as the kubelet does (--container-log-max-size,
// --container-log-max-files).
// With --runtime cri (and --cri-endpoint unix:///...) it runs the pods of
// --manifests in a CRI runtime such as containerd instead (see
// examples/cri); their images must already be on the node. Run with -h
// for every flag.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/podkit/podkit/lifecycle/volume"
)

func main() {
	// SIGPIPE too: when stdout is closed (nodeagent | head), the agent
	// shuts down cleanly instead of dying with its pods still running.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGPIPE)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

// run is the whole program: it parses args, runs the agent until it is
// done or ctx ends, and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "nodeagent: %v\n", err)
		return exitUsage
	}
	if opts.stateDir == "" {
		// The demo without --state-dir: nothing of it outlives the run.
		dir, err := os.MkdirTemp("", "podkit-demo-")
		if err != nil {
			fmt.Fprintf(stderr, "nodeagent: %v\n", err)
			return exitFailed
		}
		defer os.RemoveAll(dir)
		opts.stateDir = dir
	}
	if opts.runtime == runtimeCRI {
		return runCRI(ctx, opts, stdout, stderr)
	}
	a, err := newAgent(opts, stdout, newLogger(stderr, opts.verbosity))
	if err != nil {
		fmt.Fprintf(stderr, "nodeagent: %v\n", err)
		return exitFailed
	}
	if err := a.run(ctx); err != nil {
		fmt.Fprintf(stderr, "nodeagent: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// parseFlags parses and checks the command line. Usage errors are returned;
// flag's own messages (and -h) go to stderr.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("nodeagent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := options{demoTimeout: 45 * time.Second}
	fs.StringVar(&opts.manifests, "manifests", "", "run the static pod manifests of this `directory` (watched) instead of the demo")
	fs.StringVar(&opts.objects, "objects", "", "read the secrets and config maps the pods reference (their env and volumes) from the YAML or JSON files of this `directory` (kind Secret or ConfigMap, namespace default unless set; re-read when a file changes). Default: objects/ beside --manifests")
	fs.StringVar(&opts.stateDir, "state-dir", "", "`directory` for process records, logs and pod scratch space; a later run adopts or kills what an earlier one left, and does not run again the pods that finished (their logs are kept while the pod is in config). Default: "+filepath.Join(os.TempDir(), "podkit-nodeagent")+" with --manifests; for the demo, a new temporary directory removed at exit, so every demo starts clean")
	fs.StringVar(&opts.nodeName, "node-name", "podkit-node", "the node's `name` (a DNS subdomain; static pods are named after it)")
	fs.StringVar(&opts.listen, "listen", "", "serve /pods, /pods/{uid}, /pods/{uid}/logs/{container} and /healthz over HTTP on this `address` (e.g. 127.0.0.1:8080); it has no authentication, so a loopback address is required unless --listen-non-loopback is given")
	fs.BoolVar(&opts.listenNonLoopback, "listen-non-loopback", false, "allow --listen on an address other than loopback (such as :8080, every interface): whoever can reach it reads every pod's spec and logs (env values and other secret-shaped values of the specs are redacted)")
	fs.BoolVar(&opts.untilIdle, "until-idle", false, "with --manifests: shut down once every pod has finished, instead of waiting for SIGINT or SIGTERM")
	fs.DurationVar(&opts.shutdownGrace, "shutdown-grace", 30*time.Second, "how long the node shutdown may take in all")
	fs.DurationVar(&opts.restartBackOff, "restart-backoff", time.Second, "delay before the second restart of a crashing container; it doubles with each restart (the kubelet uses 10s)")
	fs.DurationVar(&opts.manifestInterval, "manifest-interval", 2*time.Second, "how often the manifest directory is read again")
	fs.DurationVar(&opts.volumeRefreshInterval, "volume-refresh-interval", volume.DefaultRefreshInterval, "how often the pods' volumes follow their secrets and config maps, and emptyDirs with a sizeLimit are measured (a pod over its limit is evicted)")
	fs.StringVar(&opts.cgroups, "cgroups", "auto", "put each pod in a cgroup v2 of its own so that no process it starts outlives it: auto (when the agent's cgroup is writable), off (process groups and an environment scan only), or required")
	fs.StringVar(&opts.imageConfig, "image-config", "", "YAML or JSON `file` of image configurations (entrypoint, cmd, workingDir, env, user) for containers without a command of their own, over the built-in ones (busybox, alpine, debian, ...); see processruntime.LoadImageTable")
	fs.IntVar(&opts.verbosity, "v", 0, "log `level` on stderr: 0 logs errors only, 1 adds information, higher adds detail")
	opts.runtimeOptions.register(fs)
	opts.logCapOptions.register(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: nodeagent [flags]\n\nWith no flags, plays the embedded demo and exits. Flags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected argument %q (flags only; see -h)", fs.Arg(0))
	}
	if opts.manifests != "" {
		if _, err := os.ReadDir(opts.manifests); err != nil {
			return options{}, fmt.Errorf("--manifests: cannot read the directory: %w", err)
		}
	} else if opts.untilIdle {
		return options{}, errors.New("--until-idle needs --manifests (the demo always ends by itself)")
	}
	stateDirSet := false
	fs.Visit(func(f *flag.Flag) { stateDirSet = stateDirSet || f.Name == "state-dir" })
	switch {
	case stateDirSet && opts.stateDir == "":
		return options{}, errors.New("--state-dir must not be empty")
	case !stateDirSet && !opts.demo():
		opts.stateDir = filepath.Join(os.TempDir(), "podkit-nodeagent")
	}
	if errs := validation.IsDNS1123Subdomain(opts.nodeName); len(errs) > 0 {
		return options{}, fmt.Errorf("--node-name %q: %s", opts.nodeName, strings.Join(errs, "; "))
	}
	for name, d := range map[string]time.Duration{"--shutdown-grace": opts.shutdownGrace, "--restart-backoff": opts.restartBackOff, "--manifest-interval": opts.manifestInterval, "--volume-refresh-interval": opts.volumeRefreshInterval} {
		if d <= 0 {
			return options{}, fmt.Errorf("%s must be positive, got %v", name, d)
		}
	}
	if _, err := cgroupMode(opts.cgroups); err != nil {
		return options{}, err
	}
	if opts.verbosity < 0 {
		return options{}, fmt.Errorf("-v must not be negative, got %d", opts.verbosity)
	}
	if err := opts.runtimeOptions.validate(opts); err != nil {
		return options{}, err
	}
	if err := opts.logCapOptions.validate(); err != nil {
		return options{}, err
	}
	return opts, nil
}
