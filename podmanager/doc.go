// Package podmanager keeps a node agent's desired pods: the pods its config
// sources say should run on the node, and the mirror pods that stand for its
// static pods in the API server.
//
// Manager, from New, is the in-memory store that matches the kubelet's pod
// manager. Its users declare the part of it they call: lifecycle.SyncLoop
// takes a lifecycle.PodStore (six of Manager's methods), so an agent can
// put its own store there, for instance one fed by an informer, as long as
// it keeps the rules documented on Manager's methods.
//
// # Static pods, mirror pods and UID translation
//
// A static pod (mirror.IsStaticPod) and its mirror pod (mirror.IsMirrorPod)
// share a full name, "name_namespace", but not a UID. The store pairs them by
// full name only; whether the mirror's hash is current is the caller's
// question (mirror.IsMirrorPodOf). A mirror whose full name has no static pod
// in the store is an orphan, reported by GetPodsAndMirrorPods so housekeeping
// can delete it.
//
// Users and the API server know a static pod by its mirror's UID, so
// TranslatePodUID maps a mirror UID to the static pod's UID.
//
// # Where podkit differs from the kubelet (SPEC decision D6)
//
//   - Removing a pod removes only the index entries that point at its UID.
//     When two pods share a full name (a static pod whose manifest changed
//     gets a new UID, and the new one may be added before the old one is
//     removed), removing the old one leaves the new one findable by full
//     name; the kubelet drops the entry. The full-name lookups answer with the
//     pod added or updated most recently, and fall back to the other when it
//     is removed.
//   - A pod and a mirror are paired, and a UID translation exists, only when
//     the pod is a static pod; the pairing is derived from what is stored, so
//     it disappears with either side. The kubelet also pairs non-static pods
//     and keeps a translation after its static pod is gone.
//
// # Usage
//
//  1. Create one Manager with New and share it (it is safe for concurrent
//     use).
//  2. Feed it every change from the config sources: SetPod, RemovePod (or
//     SetPods to replace everything), for pods and for mirror
//     pods alike; the store tells them apart by the mirror annotation.
//  3. Ask it for the desired state: GetPods for the pods to run,
//     GetPodAndMirrorPod for a pod's counterpart, GetPodsAndMirrorPods for
//     housekeeping, TranslatePodUID for UIDs coming from outside.
//
// # Ownership
//
// The store keeps the *v1.Pod pointers it is given and returns those same
// pointers; it never modifies a pod, and neither may its callers (DeepCopy
// first). Slices and maps it returns are new on every call and belong to the
// caller.
//
// # Concurrency
//
// Every Manager method may be called from any goroutine, concurrently with
// any other. Reads share a read lock; writes take the write lock. Each call
// sees one consistent state; a sequence of calls does not.
package podmanager
