package podnet_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/podnet"
	"k8s.io/apimachinery/pkg/types"
)

// New only checks the options and opens the state directory: no
// interface is touched until the first Attach.
func ExampleNew() {
	dir, err := os.MkdirTemp("", "podnet-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	n, err := podnet.New(podnet.Options{
		StateDir:   filepath.Join(dir, "node-0"),
		PodCIDR:    netip.MustParsePrefix("10.88.0.0/24"),
		BridgeName: "podkit0",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer n.Close()
	fmt.Println("bridge", n.BridgeName(), "gateway", n.Gateway())
	fmt.Println("pod namespace kept at", filepath.Base(filepath.Dir(n.NetnsPath("uid-1"))), filepath.Base(n.NetnsPath("uid-1")))

	_, err = podnet.New(podnet.Options{StateDir: filepath.Join(dir, "node-1"), PodCIDR: netip.MustParsePrefix("10.88.0.1/24")})
	fmt.Println(err)
	// Output:
	// bridge podkit0 gateway 10.88.0.1
	// pod namespace kept at netns uid-1
	// podnet: PodCIDR 10.88.0.1/24 is not a network address; want 10.88.0.0/24
}

// The runtime's side, from a pod's start to its cleanup. Not run: it needs
// root.
func ExampleNetwork_Attach() {
	ctx := context.Background()
	n, err := podnet.New(podnet.Options{StateDir: "/var/lib/podkit/network", PodCIDR: netip.MustParsePrefix("10.88.0.0/24")})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer n.Close()
	// At open: forget the pods the runtime no longer has.
	known := map[types.UID]bool{"uid-1": true}
	if err := n.Sweep(ctx, func(uid types.UID) bool { return known[uid] }); err != nil {
		fmt.Println(err)
	}
	// A pod's sandbox: its first process was started in a new network
	// namespace (CLONE_NEWNET) and waits until its network is ready.
	ips, err := n.Attach(ctx, "uid-1", "/proc/12345/ns/net")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("pod IP", ips[0], "; containers join", n.NetnsPath("uid-1"))
	// Once every process of the pod is gone.
	if err := n.Detach(ctx, "uid-1"); err != nil {
		fmt.Println(err)
	}
}
