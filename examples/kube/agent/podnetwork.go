package agent

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/podkit/podkit/examples/kube/events"
)

// DefaultPodCIDRWait is how long Run waits for the Node's spec.podCIDR
// when Config.PodCIDRFromNode asks for it.
const DefaultPodCIDRWait = 30 * time.Second

// podCIDRPoll is how often Run reads the Node while it waits for its
// spec.podCIDR.
const podCIDRPoll = 250 * time.Millisecond

// ReasonNoPodCIDR is the Warning event on the Node when Config.PodCIDRFromNode
// asked for the Node's range and none came within Config.PodCIDRWait: the
// node's sandboxed pods then have a network namespace with a loopback only.
const ReasonNoPodCIDR = "NoPodCIDR"

// BridgeName is the name of the bridge of the node whose pod range is
// podCIDR, when Config.BridgeName is empty: "pkbr" and the range's address
// in hex (10.244.1.0/24: pkbr0af40100). Nodes on one host have disjoint
// ranges, so each gets a bridge of its own.
func BridgeName(podCIDR netip.Prefix) string {
	a := podCIDR.Masked().Addr().As4()
	return fmt.Sprintf("pkbr%08x", binary.BigEndian.Uint32(a[:]))
}

// podRange is the first IPv4 range of node's spec.podCIDRs (or podCIDR),
// if it has one.
func podRange(node *v1.Node) (netip.Prefix, bool) {
	cidrs := node.Spec.PodCIDRs
	if len(cidrs) == 0 && node.Spec.PodCIDR != "" {
		cidrs = []string{node.Spec.PodCIDR}
	}
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(c); err == nil && p.Addr().Is4() {
			return p.Masked(), true
		}
	}
	return netip.Prefix{}, false
}

// startPodNetwork gives the runtime its pod network once the Node is
// registered: Config.PodCIDR, or with Config.PodCIDRFromNode the
// registered Node's range, waited for up to Config.PodCIDRWait (the
// controller manager's node IPAM assigns it just after the Node is
// created). Without one, pods keep a loopback-only network, said in the
// log and a NoPodCIDR event. It returns an error only when the runtime
// cannot open the network for the range it has.
func (a *Agent) startPodNetwork(ctx context.Context, node *v1.Node) error {
	cidr := a.cfg.PodCIDR
	if !cidr.IsValid() {
		if !a.cfg.PodCIDRFromNode {
			return nil
		}
		var ok bool
		if cidr, ok = podRange(node); !ok {
			cidr, ok = a.waitPodRange(ctx)
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				a.log.Info("The Node has no pod range (spec.podCIDR): pods have a network namespace with a loopback only", "waited", a.podCIDRWait())
				a.recorder.Eventf(events.NodeRef(node), v1.EventTypeWarning, ReasonNoPodCIDR, "Node %s has no spec.podCIDR after %v: its pods have no pod network (loopback only)", node.Name, a.podCIDRWait())
				return nil
			}
		}
	}
	bridge := a.cfg.BridgeName
	if bridge == "" {
		bridge = BridgeName(cidr)
	}
	if err := a.rt.StartNetwork(cidr, bridge); err != nil {
		return err
	}
	a.log.Info("Pod network", "podCIDR", cidr.String(), "bridge", bridge, "network", a.rt.Containment().Network)
	return nil
}

func (a *Agent) podCIDRWait() time.Duration {
	if a.cfg.PodCIDRWait > 0 {
		return a.cfg.PodCIDRWait
	}
	return DefaultPodCIDRWait
}

// waitPodRange reads the Node until it has a pod range, for at most
// podCIDRWait.
func (a *Agent) waitPodRange(ctx context.Context) (netip.Prefix, bool) {
	var cidr netip.Prefix
	err := wait.PollUntilContextTimeout(ctx, podCIDRPoll, a.podCIDRWait(), true, func(ctx context.Context) (bool, error) {
		node, err := a.cfg.Client.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			a.log.V(2).Info("Reading the Node for its pod range", "err", err)
			return false, nil
		}
		var ok bool
		cidr, ok = podRange(node)
		return ok, nil
	})
	return cidr, err == nil
}

// bridgeName is the bridge of a Config.PodCIDR given at New.
func bridgeName(cfg Config) string {
	if cfg.BridgeName == "" && cfg.PodCIDR.IsValid() {
		return BridgeName(cfg.PodCIDR)
	}
	return cfg.BridgeName
}
