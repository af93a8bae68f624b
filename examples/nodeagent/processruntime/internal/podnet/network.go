package podnet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
)

// ErrClosed is returned by the methods of a Network after Close.
var ErrClosed = errors.New("podnet: network closed")

// Network is one node's pod network: its bridge on the host, its IPAM and
// its pods' veth pairs and kept namespaces. Make one with New.
type Network struct {
	opts     Options
	gateway  netip.Addr
	ipamDir  string
	netnsDir string
	log      logr.Logger

	// sem is held (a token in it) by the one operation at a time that
	// touches the host's links, the IPAM or the namespace files; waiting
	// for it honours the caller's ctx. What follows is guarded by it.
	sem chan struct{}
	// ipam is nil once closed.
	ipam *ipam
	// lock is the open lock file of the state directory, held (flock)
	// from New to Close so no second Network uses the directory.
	lock *os.File
}

// New checks opts, takes the state directory (creating it if missing) and
// reads the allocations a previous run left there. It touches no network
// interface and starts nothing: the bridge is made by the first Attach.
// It fails if opts are invalid, if another Network (in this process or
// another) holds the state directory, or on any other platform than Linux.
// Call Close when done.
func New(opts Options) (*Network, error) {
	if err := checkPlatform(); err != nil {
		return nil, err
	}
	if err := opts.complete(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("podnet: state directory: %w", err)
	}
	lock, err := lockStateDir(opts.StateDir)
	if err != nil {
		return nil, err
	}
	n := &Network{
		opts:     opts,
		gateway:  gatewayOf(opts.PodCIDR),
		ipamDir:  filepath.Join(opts.StateDir, "ips"),
		netnsDir: filepath.Join(opts.StateDir, "netns"),
		log:      opts.Logger,
		sem:      make(chan struct{}, 1),
		lock:     lock,
	}
	if err := os.MkdirAll(n.netnsDir, 0o700); err != nil {
		lock.Close()
		return nil, fmt.Errorf("podnet: state directory: %w", err)
	}
	n.ipam, err = openIPAM(n.ipamDir, opts.PodCIDR)
	if err != nil {
		lock.Close()
		return nil, err
	}
	return n, nil
}

// Gateway is the bridge's address, the pods' default gateway: the first
// address of the pod range. It is the address the node has on its pods'
// network, so the one a pod reaches the node by.
func (n *Network) Gateway() netip.Addr { return n.gateway }

// PodCIDR is the node's pod range, as given.
func (n *Network) PodCIDR() netip.Prefix { return n.opts.PodCIDR }

// BridgeName is the name of the node's bridge.
func (n *Network) BridgeName() string { return n.opts.BridgeName }

// NetnsPath is where the network namespace of pod uid is kept from its
// Attach to its Detach: a bind mount of the namespace's file, which a
// process joins with setns(2) (the pod's containers, an exec into the pod).
// It only names the path; it does not say whether the pod is attached.
func (n *Network) NetnsPath(uid types.UID) string {
	return filepath.Join(n.netnsDir, string(uid))
}

// Close releases the state directory for another Network. Pods stay
// attached (their veths, namespaces and addresses stay, for the next
// Network over the directory); Teardown removes them. Close waits for an
// operation in progress. Closing again is a no-op.
func (n *Network) Close() error {
	n.sem <- struct{}{}
	defer n.releaseSem()
	if n.ipam == nil {
		return nil
	}
	n.ipam = nil
	if err := n.lock.Close(); err != nil {
		return fmt.Errorf("podnet: close state directory lock: %w", err)
	}
	return nil
}

// acquire waits for the network's one operation slot, or for ctx.
func (n *Network) acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("podnet: %w", err)
	}
	select {
	case n.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("podnet: %w", ctx.Err())
	}
	if n.ipam == nil {
		n.releaseSem()
		return ErrClosed
	}
	return nil
}

func (n *Network) releaseSem() { <-n.sem }

// Attach puts pod uid on the node's network and returns its IPs (one IPv4
// address), the same for the pod across calls and agent restarts until
// its Detach.
//
// netnsPath is the pod's network namespace, new and its own (Attach takes
// it over: an eth0 in it becomes the pod's veth): a namespace file such as
// /proc/<pid>/ns/net of the pod's first process, or "" to have Attach
// create an empty namespace for the pod. The host's namespace, and one
// another pod has, are refused. Either way Attach keeps it at
// NetnsPath(uid) until Detach, so it outlives every process of the pod
// and an agent restart. A second Attach is idempotent: with "" (or the
// kept path, or the same namespace) it repairs and returns what is there;
// with another namespace, the pod moves to it (its old veth pair goes) and
// keeps its address.
//
// Attach creates the bridge if missing, gives it the gateway address and
// brings it up; allocates the pod's address; creates a veth pair with one
// end ("pk" and 13 hex digits) a port of the bridge and the other, eth0,
// in the pod's namespace; and there brings up lo and eth0, gives eth0 the
// address and makes the gateway the default route.
//
// It may be called from any goroutine; Attach, Detach, Sweep and Teardown
// run one at a time, and ctx bounds the wait for a turn (each step then
// completes; every request to the kernel is bounded by a timeout). An
// error leaves what was done in place, the address allocated: a later
// Attach completes it, Detach undoes it. It wraps ErrRangeExhausted when
// no address is free, and ErrClosed after Close.
func (n *Network) Attach(ctx context.Context, uid types.UID, netnsPath string) ([]netip.Addr, error) {
	if err := checkUID(uid); err != nil {
		return nil, err
	}
	if err := n.acquire(ctx); err != nil {
		return nil, err
	}
	defer n.releaseSem()
	ip, err := n.attachLocked(ctx, uid, netnsPath)
	if err != nil {
		return nil, err
	}
	n.log.V(4).Info("Attached pod", "podUID", uid, "ip", ip, "bridge", n.opts.BridgeName)
	return []netip.Addr{ip}, nil
}

// Detach takes pod uid off the network: deletes its veth pair, releases
// its kept namespace (which ends once no process is in it) and its
// address, in that order, so an address is free only once nothing uses
// it. Detaching a pod that is not attached, or again, is not an error.
// Call it once the pod's processes are gone (the kubelet tears a pod's
// network down with its sandbox). Same goroutine and ctx rules as Attach;
// an error leaves the rest for a later Detach or Sweep.
func (n *Network) Detach(ctx context.Context, uid types.UID) error {
	if err := checkUID(uid); err != nil {
		return err
	}
	if err := n.acquire(ctx); err != nil {
		return err
	}
	defer n.releaseSem()
	if err := n.detachLocked(uid); err != nil {
		return err
	}
	n.log.V(4).Info("Detached pod", "podUID", uid, "bridge", n.opts.BridgeName)
	return nil
}

// Sweep detaches every pod the state directory or the bridge knows that
// keep does not (keep returns false), and removes what no pod owns: veths
// on the bridge that belong to no allocated pod, allocation files that
// name no valid pod or a second address of one, files a crash left half
// written. The runtime calls it when it opens, with whether it still knows
// each UID (it runs the pod, or will), before any Attach.
//
// keep is called from Sweep's goroutine, once per UID, before anything is
// removed, and with no lock held; if it panics, Sweep removes nothing and
// returns an error. An Attach of a UID keep refuses, running meanwhile,
// may be undone. Errors of single removals are joined; Sweep goes on past
// them.
func (n *Network) Sweep(ctx context.Context, keep func(types.UID) bool) error {
	if keep == nil {
		return fmt.Errorf("podnet: Sweep: keep is nil")
	}
	if err := n.acquire(ctx); err != nil {
		return err
	}
	uids, err := n.knownUIDsLocked()
	n.releaseSem()
	if err != nil {
		return err
	}
	var gone []types.UID
	for _, uid := range uids {
		k, err := callKeep(keep, uid)
		if err != nil {
			return err
		}
		if !k {
			gone = append(gone, uid)
		}
	}
	var errs []error
	for _, uid := range gone {
		if err := n.Detach(ctx, uid); err != nil {
			errs = append(errs, err)
			continue
		}
		n.log.Info("Swept the network of a pod no longer known", "podUID", uid, "bridge", n.opts.BridgeName)
	}
	if err := n.acquire(ctx); err != nil {
		return errors.Join(append(errs, err)...)
	}
	defer n.releaseSem()
	errs = append(errs, n.sweepStraysLocked())
	return errors.Join(errs...)
}

func callKeep(keep func(types.UID) bool, uid types.UID) (k bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("podnet: Sweep: keep panicked on pod UID %s: %v; nothing was removed", uid, r)
		}
	}()
	return keep(uid), nil
}

// knownUIDsLocked lists the UIDs holding an address or a kept namespace.
func (n *Network) knownUIDsLocked() ([]types.UID, error) {
	uids := n.ipam.owners()
	seen := map[types.UID]bool{}
	for _, u := range uids {
		seen[u] = true
	}
	netns, err := n.keptUIDsLocked()
	if err != nil {
		return nil, err
	}
	for _, u := range netns {
		if !seen[u] {
			seen[u] = true
			uids = append(uids, u)
		}
	}
	return uids, nil
}

// keptUIDsLocked lists the UIDs of the namespace directory's files.
func (n *Network) keptUIDsLocked() ([]types.UID, error) {
	entries, err := os.ReadDir(n.netnsDir)
	if err != nil {
		return nil, fmt.Errorf("podnet: namespace directory: %w", err)
	}
	var uids []types.UID
	for _, e := range entries {
		if uid := types.UID(e.Name()); checkUID(uid) == nil {
			uids = append(uids, uid)
		}
	}
	return uids, nil
}

// Teardown detaches every pod and deletes the bridge: for a harness that
// discards the node, so nothing of it is left on the host. The Network
// stays open (a later Attach starts again from an empty range). Same
// goroutine and ctx rules as Attach.
func (n *Network) Teardown(ctx context.Context) error {
	if err := n.acquire(ctx); err != nil {
		return err
	}
	defer n.releaseSem()
	uids, err := n.knownUIDsLocked()
	if err != nil {
		return err
	}
	var errs []error
	for _, uid := range uids {
		errs = append(errs, n.detachLocked(uid))
	}
	errs = append(errs, n.sweepStraysLocked(), n.deleteBridgeLocked())
	return errors.Join(errs...)
}
