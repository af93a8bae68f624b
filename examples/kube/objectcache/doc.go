// Package objectcache serves a node's pods' secrets and config maps from
// the API server the way the kubelet's watch-based secret and config map
// managers do: one watch per object, of exactly the objects the node's
// registered pods reference, started when the first pod referencing an
// object is registered and stopped once the last one is unregistered. It
// implements podenv.Objects, so the environment builder
// (lifecycle/podenv) and the volume manager (lifecycle/volume) read
// through it; and TokenRequester implements volume.TokenRequester over a
// clientset.
//
// This is the strategy the Node authorizer leaves a node: it may get,
// list and watch a secret or config map only while a pod bound to it
// references the object, a list or watch only of that one object (a
// field selector metadata.name=<name> in its namespace), and never list
// them all. A Cache's requests are exactly those.
//
// # Usage
//
//  1. Create one Cache with New(client, Options{RequestSync: ...}), with
//     the node's own client (its credentials are what the Node authorizer
//     checks), and run it: go c.Run(ctx).
//  2. In the runtime's SyncPod, while the engine says the pod's
//     termination is not requested, call RegisterPod(pod) before building
//     its containers' environments or setting up its volumes (as the
//     kubelet does at each syncPod): a new reference starts a watch, a
//     dropped one (the pod changed) stops it.
//  3. In SyncTerminatedPod, once the pod's volumes no longer need their
//     sources, call UnregisterPod(pod.UID) (the kubelet does it after
//     unmounting the pod's volumes).
//  4. Give the Cache to podenv.New and volume.New as their Objects, and
//     NewTokenRequester(client) to volume.Options.Tokens.
//
// Options.RequestSync is told, for each pod referencing it, when a watched
// object changes (created, updated, deleted): the agent passes the
// engine's Resync (its assembly's RequestSync), so a container waiting
// for a missing secret starts, and the pod's volumes are updated, at once
// rather than at the pod's next resync.
//
// # Concurrency
//
// Every method is safe for concurrent use. GetSecret and GetConfigMap
// answer from memory, waiting (at most Options.SyncTimeout, or ctx) only
// for a watch that has not delivered its first answer yet. Watches run
// on goroutines of their own, started by RegisterPod while Run runs (or
// by Run for pods registered before); Run returns once every one has
// stopped. RequestSync is called from a watch's goroutine, never under
// the Cache's lock; it must not block.
//
// # Where it differs from the kubelet
//
//   - A Get waits for a new watch's first answer up to
//     Options.SyncTimeout (5 s by default; the kubelet: 1 s).
//   - A watch runs as long as a registered pod references its object; the
//     kubelet also stops the watches of objects no one read for five
//     resync periods (a pod's env-only references, read once), and starts
//     them again at the next read.
//   - An object changing asks for a sync of the pods referencing it
//     (Options.RequestSync); the kubelet waits for the pods' next sync.
//   - Like the kubelet's, a watch stops once its object is immutable; a
//     later deletion of the object is not seen.
package objectcache
