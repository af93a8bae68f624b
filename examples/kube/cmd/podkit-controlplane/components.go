package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/pflag"
	"k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/configz"
	kcmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	kcmoptions "k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
	schedapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
	schedoptions "k8s.io/kubernetes/cmd/kube-scheduler/app/options"

	"github.com/podkit/podkit/examples/kube/internal/controlplane"
)

// newRegistry returns a version and feature-gate registry of its own for
// one component, as upstream's test servers do, so the components in this
// process do not share mutable state.
func newRegistry() (basecompatibility.ComponentGlobalsRegistry, error) {
	registry := basecompatibility.NewComponentGlobalsRegistry()
	err := registry.Register(basecompatibility.DefaultKubeComponent, compatibility.DefaultBuildEffectiveVersion(),
		utilfeature.DefaultMutableFeatureGate.DeepCopy())
	return registry, err
}

// startScheduler starts kube-scheduler in this process, reaching the API
// server through its kubeconfig. It serves no port of its own. extra flags
// come after, and so win over, the program's.
func startScheduler(files controlplane.Files, extra []string) (*component, error) {
	registry, err := newRegistry()
	if err != nil {
		return nil, err
	}
	opts := schedoptions.NewOptionsWithComponentGlobalsRegistry(registry)
	fs := pflag.NewFlagSet("kube-scheduler", pflag.ContinueOnError)
	for _, set := range opts.Flags.FlagSets {
		fs.AddFlagSet(set)
	}
	flags := []string{"--kubeconfig=" + files.SchedulerKubeconfig, "--leader-elect=false", "--secure-port=0"}
	if err := fs.Parse(append(flags, extra...)); err != nil {
		return nil, fmt.Errorf("kube-scheduler flags: %w", err)
	}
	if err := registry.Set(); err != nil {
		return nil, err
	}
	setupCtx, cancel := context.WithCancel(context.Background())
	cc, sched, err := schedapp.Setup(setupCtx, opts)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("kube-scheduler: %w", err)
	}
	return goComponent("kube-scheduler", func(ctx context.Context) error {
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

// disabledControllers are the controllers of kube-controller-manager's
// default set (--controllers=*) the program turns off, each with why.
var disabledControllers = []struct{ name, why string }{
	// It publishes the API server's serving CA as a ClusterTrustBundle
	// and, given a serving certificate that is not a CA, logs "entry 0
	// does not have the CA bit set" over and over.
	{"kube-apiserver-serving-clustertrustbundle-publisher-controller", "the API server's serving certificate is not a CA"},
}

// enabledControllers are the controllers off by default that the program
// turns on: the bootstrap token ones a kubeadm cluster runs, so nodes join
// with a bootstrap token as they join one.
var enabledControllers = []struct{ name, why string }{
	{"bootstrap-signer-controller", "signs the kube-public/cluster-info ConfigMap with each bootstrap token"},
	{"token-cleaner-controller", "deletes expired bootstrap tokens"},
}

// controllerManagerFlags are kube-controller-manager's flags before the
// caller's: the default controllers and enabledControllers but
// disabledControllers, each with
// what it needs to start (the service account key for the token
// controller, the cluster CA for the root CA publisher and CSR signing,
// the cluster's pod range for node IPAM).
func controllerManagerFlags(files controlplane.Files) []string {
	controllers := "*"
	for _, c := range enabledControllers {
		controllers += "," + c.name
	}
	for _, c := range disabledControllers {
		controllers += ",-" + c.name
	}
	return []string{
		"--kubeconfig=" + files.ControllerManagerKubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		// The controllers act with the controller manager's own identity
		// (group system:masters), not one service account each: the
		// latter makes the first Deployment wait seconds while 38 tokens
		// are issued.
		"--use-service-account-credentials=false",
		"--controllers=" + controllers,
		"--service-account-private-key-file=" + files.ServiceAccountKey,
		"--root-ca-file=" + files.CACert,
		"--cluster-signing-cert-file=" + files.CACert,
		"--cluster-signing-key-file=" + files.CAKey,
		"--allocate-node-cidrs=true",
		"--cluster-cidr=" + controlplane.ClusterCIDR,
		"--node-cidr-mask-size=" + strconv.Itoa(controlplane.NodeCIDRMaskSize),
		"--service-cluster-ip-range=" + controlplane.ServiceCIDR,
		"--node-monitor-period=1s",
	}
}

// startControllerManager starts kube-controller-manager in this process,
// reaching the API server through its kubeconfig. It serves no port of
// its own. extra flags come after, and so win over, controllerManagerFlags.
func startControllerManager(files controlplane.Files, extra []string) (*component, error) {
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
	if err := fs.Parse(append(controllerManagerFlags(files), extra...)); err != nil {
		return nil, fmt.Errorf("kube-controller-manager flags: %w", err)
	}
	s.ParsedFlags = &named
	if err := registry.Set(); err != nil {
		return nil, err
	}
	setupCtx, cancel := context.WithCancel(context.Background())
	config, err := s.Config(setupCtx, all, disabled, aliases)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("kube-controller-manager: %w", err)
	}
	return goComponent("kube-controller-manager", func(ctx context.Context) error {
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
