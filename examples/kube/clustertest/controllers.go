package clustertest

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/configz"
	kcmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	kcmoptions "k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
	schedapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
	schedoptions "k8s.io/kubernetes/cmd/kube-scheduler/app/options"
)

// Controllers are the kube-controller-manager controllers the harness
// runs: what Deployments, Jobs, DaemonSets, node failure, garbage
// collection and namespace deletion need. The others (service accounts'
// legacy tokens, CSRs, volumes, endpoints...) serve nothing a podkit node
// does.
var Controllers = []string{
	"deployment-controller", "replicaset-controller", "job-controller", "daemonset-controller",
	"disruption-controller",
	"garbage-collector-controller", "namespace-controller", "serviceaccount-controller",
	"node-lifecycle-controller", "taint-eviction-controller", "pod-garbage-collector-controller",
}

// newRegistry returns a version and feature-gate registry of its own for
// one component, as upstream's test servers do, so the components (and
// several clusters) in one process do not share mutable state.
func newRegistry() (basecompatibility.ComponentGlobalsRegistry, error) {
	registry := basecompatibility.NewComponentGlobalsRegistry()
	err := registry.Register(basecompatibility.DefaultKubeComponent, compatibility.DefaultBuildEffectiveVersion(),
		utilfeature.DefaultMutableFeatureGate.DeepCopy())
	return registry, err
}

// startScheduler starts kube-scheduler in this process, reaching the API
// server through kubeconfig. It serves no port of its own.
func startScheduler(kubeconfig string, extraFlags []string) (*runningServer, error) {
	registry, err := newRegistry()
	if err != nil {
		return nil, err
	}
	opts := schedoptions.NewOptionsWithComponentGlobalsRegistry(registry)
	fs := pflag.NewFlagSet("kube-scheduler", pflag.ContinueOnError)
	for _, set := range opts.Flags.FlagSets {
		fs.AddFlagSet(set)
	}
	flags := []string{"--kubeconfig=" + kubeconfig, "--leader-elect=false", "--secure-port=0"}
	if err := fs.Parse(append(flags, extraFlags...)); err != nil {
		return nil, fmt.Errorf("clustertest: kube-scheduler flags: %w", err)
	}
	if err := registry.Set(); err != nil {
		return nil, err
	}
	setupCtx, cancel := context.WithCancel(context.Background())
	cc, sched, err := schedapp.Setup(setupCtx, opts)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("clustertest: kube-scheduler: %w", err)
	}
	return runServer(func(ctx context.Context) error {
		defer cancel()
		defer configz.Delete("componentconfig")
		stop := context.AfterFunc(ctx, cancel)
		defer stop()
		err := schedapp.Run(setupCtx, cc, sched)
		if ctx.Err() != nil {
			return nil // stopped: it says "finished without leader elect"
		}
		return err
	}), nil
}

// startControllerManager starts kube-controller-manager in this process
// with the Controllers, reaching the API server through kubeconfig. It
// serves no port of its own. settings gives the node-lifecycle timings.
func startControllerManager(kubeconfig string, settings Options) (*runningServer, error) {
	s, err := kcmoptions.NewKubeControllerManagerOptions()
	if err != nil {
		return nil, err
	}
	registry, err := newRegistry()
	if err != nil {
		return nil, err
	}
	s.ComponentGlobalsRegistry = registry
	all, disabled, aliases := kcmapp.KnownControllers(), kcmapp.ControllersDisabledByDefault(), kcmapp.ControllerAliases()
	named := s.Flags(all, disabled, aliases)
	fs := pflag.NewFlagSet("kube-controller-manager", pflag.ContinueOnError)
	for _, set := range named.FlagSets {
		fs.AddFlagSet(set)
	}
	flags := []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		// The controllers act with the administrator's credentials.
		"--use-service-account-credentials=false",
		"--controllers=" + strings.Join(Controllers, ","),
		"--node-monitor-period=1s",
		"--node-monitor-grace-period=" + settings.NodeMonitorGracePeriod.String(),
		"--node-startup-grace-period=" + settings.NodeMonitorGracePeriod.String(),
	}
	if err := fs.Parse(append(flags, settings.ControllerManagerFlags...)); err != nil {
		return nil, fmt.Errorf("clustertest: kube-controller-manager flags: %w", err)
	}
	s.ParsedFlags = &named
	if err := registry.Set(); err != nil {
		return nil, err
	}
	setupCtx, cancel := context.WithCancel(context.Background())
	config, err := s.Config(setupCtx, all, disabled, aliases)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("clustertest: kube-controller-manager: %w", err)
	}
	return runServer(func(ctx context.Context) error {
		defer cancel()
		defer configz.Delete(kcmapp.ConfigzName)
		stop := context.AfterFunc(ctx, cancel)
		defer stop()
		err := kcmapp.Run(setupCtx, config.Complete())
		if ctx.Err() != nil {
			return nil // stopped
		}
		return err
	}), nil
}
