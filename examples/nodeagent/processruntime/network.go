package processruntime

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/podnet"
)

// This file is the pods' network (see "Network" in the package doc): with
// Options.PodCIDR, each sandboxed pod's network namespace is made by the
// pod network (package podnet), owned by the host's user namespace, and
// attached to the node's bridge with an address of the range; without, a
// sandbox makes its own namespace, with a loopback only.

// networkDir, in the state directory, is the pod network's; networkFile
// records its range and bridge, for RemoveNetwork.
const (
	networkDir  = "network"
	networkFile = "network.json"
)

// networkRecord is networkFile.
type networkRecord struct {
	PodCIDR    string `json:"podCIDR"`
	BridgeName string `json:"bridgeName"`
}

// RemoveNetwork removes what the pod network of the runtime of stateDir
// left on the host, as TeardownNetwork does: every pod's veth, network
// namespace and address, and the node's bridge. It is for a harness that
// discards a node whose runtime is closed and whose pods' processes are
// gone (after Close, and after their processes were killed from outside
// the runtime). A state directory whose runtime never had a pod network
// has nothing to remove: nil. It fails while a Runtime has the directory
// open. Safe for concurrent use on different directories.
func RemoveNetwork(ctx context.Context, stateDir string) error {
	var rec networkRecord
	if err := readJSON(filepath.Join(stateDir, networkFile), &rec); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("processruntime: RemoveNetwork: %w", err)
	}
	cidr, err := netip.ParsePrefix(rec.PodCIDR)
	if err != nil {
		return fmt.Errorf("processruntime: RemoveNetwork: %s: %w", networkFile, err)
	}
	n, err := podnet.New(podnet.Options{StateDir: filepath.Join(stateDir, networkDir), PodCIDR: cidr, BridgeName: rec.BridgeName})
	if err != nil {
		return fmt.Errorf("processruntime: RemoveNetwork: %w", err)
	}
	defer n.Close()
	if err := n.Teardown(ctx); err != nil {
		return fmt.Errorf("processruntime: RemoveNetwork: %w", err)
	}
	return nil
}

// openNetwork opens the pod network when Options.PodCIDR asks for one and
// pods have sandboxes, and forgets the pods of an earlier run the state
// directory no longer has. It runs at Open, after recoverState.
func (r *Runtime) openNetwork(stateDir string, podCIDR netip.Prefix, bridgeName string) error {
	if !podCIDR.IsValid() {
		return nil
	}
	if r.sandboxes == nil {
		r.log.Info("The pod range is ignored: pods run without a sandbox, in the host's network", "podCIDR", podCIDR.String())
		return nil
	}
	if err := r.replaceNetwork(stateDir, podCIDR, bridgeName); err != nil {
		return err
	}
	n, err := podnet.New(podnet.Options{StateDir: filepath.Join(stateDir, networkDir), PodCIDR: podCIDR, BridgeName: bridgeName, Logger: r.log.WithName("podnet")})
	if err != nil {
		return fmt.Errorf("processruntime: %w", err)
	}
	if err := writeJSON(filepath.Join(stateDir, networkFile), networkRecord{PodCIDR: podCIDR.String(), BridgeName: n.BridgeName()}); err != nil {
		n.Close()
		return fmt.Errorf("processruntime: recording the pod network: %w", err)
	}
	r.network = n
	ctx, cancel := context.WithTimeout(context.Background(), sandboxWait)
	defer cancel()
	if err := n.Sweep(ctx, r.keepsNetwork); err != nil {
		r.log.Error(err, "Cannot remove the network of pods the state directory no longer has")
	}
	return nil
}

// StartNetwork gives a runtime opened without Options.PodCIDR its pod
// network, as Options.PodCIDR and BridgeName would have: for an agent
// that learns the node's range only once its Node is registered (the
// Node's spec.podCIDR, which the controller manager's node IPAM assigns).
// Pods an earlier run left on the network are attached again. Without a
// sandbox (Containment().Sandbox false) the range is ignored, as at Open,
// and StartNetwork returns nil.
//
// Call it before the runtime's first hook (SyncPod, ...) and before any
// other goroutine uses the runtime: the agent calls it between Open and
// the start of its sync loop. Calling it again with the same range and
// bridge does nothing; with another, or with a runtime opened with
// Options.PodCIDR of another range, it is an error, as is a range or
// bridge name podnet refuses (see Options.PodCIDR).
func (r *Runtime) StartNetwork(podCIDR netip.Prefix, bridgeName string) error {
	if !podCIDR.IsValid() {
		return errors.New("processruntime: StartNetwork: no pod range")
	}
	if r.network != nil {
		if r.network.PodCIDR() == podCIDR && (bridgeName == "" || r.network.BridgeName() == bridgeName) {
			return nil
		}
		return fmt.Errorf("processruntime: StartNetwork: the runtime's pod network is %s on %s already", r.network.PodCIDR(), r.network.BridgeName())
	}
	select {
	case <-r.closing:
		return ErrClosed
	default:
	}
	if err := r.openNetwork(filepath.Dir(r.podsDir), podCIDR, bridgeName); err != nil {
		return err
	}
	r.reattachNetworks()
	return nil
}

// replaceNetwork removes the pod network an earlier run recorded in
// stateDir when it had another range or bridge and none of the pods the
// runtime recovered is on it; with such a pod it is an error: the pod
// keeps its address of the old range until it stops.
func (r *Runtime) replaceNetwork(stateDir string, podCIDR netip.Prefix, bridgeName string) error {
	var rec networkRecord
	if err := readJSON(filepath.Join(stateDir, networkFile), &rec); err != nil {
		return nil // none recorded (or unreadable: podnet's own state decides)
	}
	if rec.PodCIDR == podCIDR.String() && (bridgeName == "" || rec.BridgeName == bridgeName) {
		return nil
	}
	r.mu.Lock()
	attached := 0
	for _, p := range r.pods {
		if p.sb != nil && !p.sb.ended() && p.sb.rec.Attached {
			attached++
		}
	}
	r.mu.Unlock()
	if attached > 0 {
		return fmt.Errorf("processruntime: the pod network of %s is %s on %s, with %d running pods on it; it cannot become %s until they stop", stateDir, rec.PodCIDR, rec.BridgeName, attached, podCIDR)
	}
	r.log.Info("Removing the pod network of an earlier run, of another range", "was", rec.PodCIDR, "bridge", rec.BridgeName, "now", podCIDR.String())
	ctx, cancel := context.WithTimeout(context.Background(), sandboxWait)
	defer cancel()
	if err := RemoveNetwork(ctx, stateDir); err != nil {
		return err
	}
	return os.RemoveAll(filepath.Join(stateDir, networkDir))
}

// keepsNetwork reports whether pod uid may keep its network: the runtime
// has it, and it is not only a tombstone.
func (r *Runtime) keepsNetwork(uid types.UID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pods[uid]
	return p != nil && !p.cleanedUp
}

// attachNetwork gives the pod its network namespace on the node's
// bridge, or finds it again (an agent restart), and returns the
// namespace, opened, and the pod's addresses. nil, nil without a pod
// network.
func (r *Runtime) attachNetwork(ctx context.Context, uid types.UID) (*os.File, []netip.Addr, error) {
	if r.network == nil {
		return nil, nil, nil
	}
	ips, err := r.network.Attach(ctx, uid, "")
	if err != nil {
		return nil, nil, err
	}
	ns, err := os.Open(r.network.NetnsPath(uid))
	if err != nil {
		return nil, nil, fmt.Errorf("opening the pod's network namespace: %w", err)
	}
	return ns, ips, nil
}

// detachNetwork takes the pod off the network, once none of its processes
// runs.
func (r *Runtime) detachNetwork(uid types.UID) error {
	if r.network == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), sandboxWait)
	defer cancel()
	if err := r.network.Detach(ctx, uid); err != nil {
		return fmt.Errorf("processruntime: detaching pod %s from the network: %w", uid, err)
	}
	return nil
}

// TeardownNetwork takes every pod off the node's network and deletes the
// bridge, for a harness that discards the node once its pods are gone:
// nothing of the network is left on the host. Without a pod network
// (Options.PodCIDR) it does nothing. Safe for concurrent use.
func (r *Runtime) TeardownNetwork(ctx context.Context) error {
	if r.network == nil {
		return nil
	}
	if err := r.network.Teardown(ctx); err != nil {
		return fmt.Errorf("processruntime: %w", err)
	}
	return nil
}

// networkDescription says how pods are networked, for Containment.
func (r *Runtime) networkDescription() string {
	switch {
	case r.sandboxes == nil:
		return "the host's network"
	case r.network == nil:
		return "a network namespace per pod, with a loopback only (no Options.PodCIDR)"
	}
	return fmt.Sprintf("a network namespace per pod on bridge %s, addresses from %s", r.network.BridgeName(), r.network.PodCIDR())
}

// reattachNetworks attaches again, at Open, the pods whose sandboxes an
// earlier run left running on the network: it repairs what is missing and
// reads their addresses back.
func (r *Runtime) reattachNetworks() {
	if r.network == nil {
		return
	}
	r.mu.Lock()
	var sbs []*podSandbox
	var uids []types.UID
	for uid, p := range r.pods {
		if p.sb != nil && !p.sb.ended() && p.sb.rec.Attached {
			sbs, uids = append(sbs, p.sb), append(uids, uid)
		}
	}
	r.mu.Unlock()
	for i, sb := range sbs {
		ctx, cancel := context.WithTimeout(context.Background(), sandboxWait)
		ips, err := r.network.Attach(ctx, uids[i], "")
		cancel()
		if err != nil {
			r.log.Error(err, "Cannot attach a running pod to the network again", "pod", uids[i])
			continue
		}
		r.mu.Lock()
		sb.rec.IPs = addrStrings(ips)
		r.mu.Unlock()
	}
}

func addrStrings(ips []netip.Addr) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return out
}
