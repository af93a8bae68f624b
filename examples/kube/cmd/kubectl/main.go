// Command kubectl is kubectl, as k8s.io/kubernetes/cmd/kubectl builds it,
// reporting as its version the Kubernetes release it is built from (a
// release build has the linker set it; go tool cannot pass the linker
// flags, and without them `kubectl version` fails on its own
// v0.0.0-master). It is this module's tool: from examples/kube,
//
//	go tool kubectl version
package main

import (
	"fmt"
	"os"

	_ "k8s.io/client-go/plugin/pkg/client/auth" // the client auth plugins, as upstream's kubectl
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	kubectl "k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"

	"github.com/podkit/podkit/examples/kube/internal/releaseversion"
)

func main() {
	if _, err := releaseversion.Set(); err != nil {
		fmt.Fprintln(os.Stderr, "kubectl:", err)
	}
	// The log verbosity is set before the command is built (it logs
	// while it reads plugins and .kuberc), as upstream's main does.
	_, _ = logs.GlogSetter(kubectl.GetLogVerbosity(os.Args))
	if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
		util.CheckErr(err)
	}
}
