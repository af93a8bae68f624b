// Package podnet is the pod network of the process runtime: a network
// namespace per pod, as on a kubelet node. Each pod has its own loopback,
// its own eth0 and its own IPv4 address from the node's pod range, so two
// pods can listen on one port, and no service the host offers on its
// loopback only (podkit-cluster's etcd on 127.0.0.1, an agent's local
// endpoints) is reachable from a pod. The node reaches its pods' addresses,
// which probes and port-forward need.
//
// A kubelet leaves this to the container runtime and its CNI plugins
// (typically bridge with host-local IPAM); this package does the same job
// itself, talking rtnetlink directly (golang.org/x/sys/unix, no other
// dependency, no ip(8)):
//
//   - a Linux bridge per node (Options.BridgeName, created if missing,
//     with a fixed MAC address) holding the gateway: the first address of
//     Options.PodCIDR;
//   - per pod, a veth pair made in one request: the host's end, named "pk"
//     and 13 hex digits of a hash of the bridge's name and the pod's UID, a
//     port of the bridge; the other end eth0, created straight in the pod's
//     namespace. Inside, lo and eth0 are up, eth0 has the pod's address and
//     the gateway is the default route;
//   - an IPAM giving each pod UID one address of the range, the same across
//     agent restarts, never one address to two pods.
//
// The state directory holds:
//
//	lock          flock'ed by the open Network: one per directory
//	ips/<ip>      one file per allocated address, holding its pod's UID;
//	              written whole under a temporary name, then linked to its
//	              name (which fails if the address is taken)
//	netns/<uid>   the pod's network namespace, kept (bind-mounted) from
//	              Attach to Detach, so it outlives the pod's processes and
//	              the agent; processes join it with setns(2)
//
// # Usage
//
// The runtime (not this package) decides which pods get a namespace:
// hostNetwork pods keep the host's network and are never attached.
//
//  1. Open one Network per node with New: its own StateDir, PodCIDR and
//     BridgeName (several in-process nodes on one host: one of each per
//     node, the ranges disjoint).
//  2. When the runtime opens, call Sweep with whether it still has each
//     UID, before any Attach: pods of a previous run that are gone lose
//     their veth, namespace and address.
//  3. For each pod, before its containers run: Attach with the namespace
//     its first process was started in (/proc/<pid>/ns/net of a process
//     cloned with CLONE_NEWNET, which waits meanwhile), or with "" to have
//     Attach create one; report the returned IPs as the pod's IPs. The
//     pod's other processes (each container, an exec into the pod) join
//     NetnsPath(uid).
//  4. After an agent restart, Attach a running pod again with "": it
//     returns the pod's IPs and repairs whatever is missing, disturbing
//     nothing in place.
//  5. Once every process of a pod is gone, Detach it: its address is free
//     only then.
//  6. Close at shutdown (pods stay attached for the next run). A harness
//     that discards the node calls Teardown first, so nothing is left on
//     the host.
//
// # What pods reach
//
// Pods on one bridge reach each other and the node: the gateway address,
// and any other address of the host, so a service the node offers on a
// wildcard address (0.0.0.0, [::]) is reachable from pods, as on any
// kubelet node: such a service must authenticate. A service bound to the
// host's loopback is not: a pod's 127.0.0.1 is its own, and the host
// drops packets for 127/8 that arrive on a bridge (route_localnet is
// off by default; this package never changes it).
//
// # What it does not do
//
//   - No NAT or masquerade: pods reach nothing beyond the host unless
//     someone routes the pod range back to it (this machine has neither
//     iptables nor nft; the package uses none). So no hostPort either.
//   - No Services, no kube-proxy, no network policy, no bandwidth limits.
//   - No routing between hosts: a pod range is only reachable on its host.
//   - Two bridges of one host (two in-process nodes) reach each other's
//     pods only if the host forwards IPv4 (net.ipv4.ip_forward), off on
//     this machine; Options.IPForward turns it on, explicitly and for the
//     whole host. The package writes no other sysctl, and none without
//     that option.
//   - IPv4 only: a pod's eth0 has an IPv6 link-local address, and no IPv6
//     route.
//   - No DNS: a pod sees the resolv.conf its mount namespace shows it; a
//     resolver on the host's loopback (systemd-resolved's 127.0.0.53) is
//     out of its reach, like any other loopback service.
//   - Pods on a bridge are not kept from spoofing each other: a process
//     with CAP_NET_ADMIN over its pod's namespace can take another pod's
//     address, as on a kubelet node with the bridge plugin. A namespace
//     Attach creates is owned by the host's user namespace, so pod root in
//     a user namespace of its own has no such capability over it; a
//     namespace cloned together with the pod's user namespace is owned by
//     it, and pod root there may reconfigure it.
//   - A kept namespace is a mount: a mount namespace created while it
//     exists (a pod's) holds a copy, which keeps that namespace (by then
//     only its loopback: Detach deletes the veth) alive until the copy
//     goes, unless the sandbox drops the host's mounts (pivot_root and a
//     detached unmount of the old root do).
//
// Where it differs from the kubelet with the CNI bridge plugin: the pod's
// end of the veth is created in the pod's namespace rather than moved and
// renamed there; the range is an option, not the Node's spec.podCIDR; a
// namespace Attach creates, or the one given, is kept by the package, not
// by the container runtime.
//
// Bounds: each request to the kernel fails after 10 s without an answer;
// a dump (the links or addresses of one namespace) of more than 65,536
// messages is an error; a range has at most 65,533 pod addresses
// (prefix length 16 to 30); a UID longer than 128 bytes, or with any
// character but letters, digits, '-', '_' and '.', is refused.
//
// # Concurrency
//
// Every method is safe for concurrent use. Attach, Detach, Sweep,
// Teardown and Close take turns (one at a time per Network; Networks of
// different state directories are independent), a ctx bounding the wait
// for a turn; Gateway, PodCIDR, BridgeName and NetnsPath return at once.
// The methods run in their caller's goroutine and start none that
// outlives them. A pod's namespace is entered only to open a netlink
// socket there (a socket belongs to the namespace it was made in, for
// its whole life), on an OS thread locked to a goroutine of its own for
// that instant, never the main thread (which Go cannot end); the thread is
// then put back, and a thread that cannot be is ended with its goroutine
// (it stays locked), so no goroutine ever runs in a pod's namespace. Sweep calls keep in its caller's goroutine, with
// no turn held.
//
// It works on Linux only; elsewhere New returns an error.
package podnet
