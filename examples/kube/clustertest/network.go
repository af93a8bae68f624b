package clustertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"sync"

	"github.com/podkit/podkit/examples/kube/internal/controlplane"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/lifecycle/nodeshutdown"
)

// The pod network of a cluster (see "Pod network" in the package doc):
// each node has a bridge of its own and a range of the cluster's, which
// the controller manager's node IPAM assigns; the cluster's range is
// chosen at Start, apart from every address the host has, so several
// clusters (and podkit-agents) share a machine.

// DefaultClusterDomain is Options.ClusterDomain's default.
const DefaultClusterDomain = "cluster.local"

// clusterCIDRBits is the prefix length of a cluster's pod range: 256
// nodes of controlplane.NodeCIDRMaskSize.
const clusterCIDRBits = 16

// chooseClusterCIDR picks a 10.x.0.0/16, x from 64 to 191, that holds no
// address of the host's interfaces (a bridge of another cluster's node
// has its gateway there): randomly, so two clusters starting at once
// rarely pick one range.
func chooseClusterCIDR() (netip.Prefix, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("clustertest: listing the host's addresses for a pod range: %w", err)
	}
	var used []netip.Addr
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				used = append(used, ip.Unmap())
			}
		}
	}
	for _, x := range rand.Perm(128) {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(64 + x), 0, 0}), clusterCIDRBits)
		free := true
		for _, ip := range used {
			if p.Contains(ip) {
				free = false
				break
			}
		}
		if free {
			return p, nil
		}
	}
	return netip.Prefix{}, errors.New("clustertest: every pod range 10.64.0.0/16 to 10.191.0.0/16 holds an address of this host; give Options.ClusterCIDR")
}

// checkClusterCIDR checks a range Options.ClusterCIDR gives.
func checkClusterCIDR(p netip.Prefix) error {
	if !p.Addr().Is4() || p.Masked() != p || p.Bits() > controlplane.NodeCIDRMaskSize-1 || p.Bits() < 8 {
		return fmt.Errorf("clustertest: ClusterCIDR %s: want an IPv4 network address with a prefix length of 8 to %d", p, controlplane.NodeCIDRMaskSize-1)
	}
	return nil
}

// controllerManagerNetworkFlags hand the cluster's pod range to the node
// IPAM.
func (o Options) controllerManagerNetworkFlags() []string {
	return []string{"--cluster-cidr=" + o.ClusterCIDR.String(), "--node-cidr-mask-size=" + strconv.Itoa(controlplane.NodeCIDRMaskSize)}
}

// ClusterCIDR returns the cluster's pod range: each Node's spec.podCIDR
// is a /24 of it.
func (c *Cluster) ClusterCIDR() netip.Prefix { return c.opts.ClusterCIDR }

// removeNetworks removes what the nodes' pod networks left on the host,
// once their agents are stopped and their pods' processes gone.
func removeNetworks(stateDirs []string) error {
	var errs []error
	for _, dir := range stateDirs {
		if err := processruntime.RemoveNetwork(context.Background(), dir); err != nil {
			errs = append(errs, fmt.Errorf("clustertest: %w", err))
		}
	}
	return errors.Join(errs...)
}

// ShutdownAgent is an Agent that can shut its node down gracefully, as
// package agent's does (agent.Agent.ShutdownNode).
type ShutdownAgent interface {
	Agent
	ShutdownNode(ctx context.Context, budget nodeshutdown.Budget) (nodeshutdown.Report, error)
}

// Shutdown shuts the node down gracefully, as a kubelet's graceful node
// shutdown: its agent admits no new pod and stops every pod within
// budget, the pods that are not critical first, each with its
// terminationGracePeriodSeconds (capped by what is left of the budget)
// and its preStop hooks; the Node turns NotReady. The agent and heartbeat
// keep running; stop them (or Close) afterwards. It returns the report of
// nodeshutdown.Manager.Shutdown, and an error when the agent is stopped
// or cannot shut down (it is no ShutdownAgent).
func (n *Node) Shutdown(ctx context.Context, budget nodeshutdown.Budget) (nodeshutdown.Report, error) {
	a, ok := n.Agent().(ShutdownAgent)
	if !ok {
		return nodeshutdown.Report{}, fmt.Errorf("clustertest: node %q has no running agent that can shut down (ShutdownAgent)", n.env.Name)
	}
	report, err := a.ShutdownNode(ctx, budget)
	if err != nil {
		return report, fmt.Errorf("clustertest: shutting node %q down: %w", n.env.Name, err)
	}
	return report, nil
}

// Shutdown shuts every node down gracefully at once (Node.Shutdown), as
// at a power-off of the machine, and returns when each has; podkit-cluster
// does it at Ctrl-C before Close. The reports are by node name.
func (c *Cluster) Shutdown(ctx context.Context, budget nodeshutdown.Budget) (map[string]nodeshutdown.Report, error) {
	nodes := c.Nodes()
	reports := make(map[string]nodeshutdown.Report, len(nodes))
	errs := make([]error, len(nodes))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			r, err := n.Shutdown(ctx, budget)
			mu.Lock()
			reports[n.Name()], errs[i] = r, err
			mu.Unlock()
		})
	}
	wg.Wait()
	return reports, errors.Join(errs...)
}
