// Package mirror holds the rules for static pods and mirror pods, and a
// client that keeps mirror pods in the API server.
//
// A static pod comes from a source other than the API server: a manifest
// file on the node, or a manifest fetched over HTTP. The API server does not
// know about it, so a node agent publishes a read-only copy of it, the mirror
// pod, under the same name and namespace. The mirror carries the static
// pod's hash in its [ConfigMirrorAnnotationKey] annotation and a controller
// owner reference to the Node, which lets the API server's node authorizer
// accept it and lets the agent tell a current mirror from a stale one.
//
// Everything here is keyed by the pod's full name, "name_namespace"
// ([PodFullName], [ParsePodFullName]): a static pod and its mirror share it,
// while their UIDs differ.
//
// # Usage
//
// An agent that runs static pods:
//
//  1. Reads a manifest and calls [PrepareStaticPod] with the node name and
//     the source's name, which gives the pod its UID, node-suffixed name,
//     namespace, node name, config hash and source annotation, and refuses
//     a pod the kubelet would refuse ([ValidatePodObject]: names, container
//     names, annotation size, and the rest the kubelet checks).
//  2. Builds one [Client] with [NewClient] over a [PodAPI] (three calls;
//     a client-go clientset fits with the adapter shown on [PodAPIFuncs]),
//     with [ClientOptions] naming the node and how to look up its UID.
//  3. While the static pod runs, makes sure a mirror exists: if the mirror it
//     knows is not [IsMirrorPodOf] the static pod, deletes it with
//     [Client.DeleteMirrorPod] passing the mirror's UID, then calls
//     [Client.CreateMirrorPod].
//  4. Deletes mirrors whose static pod is gone (orphans) by full name.
//
// Tests use [github.com/podkit/podkit/mirror/mirrortest]: FakeClient for code
// that needs a [MirrorPodClient], FakePodAPI for driving the real [Client].
//
// # Safety rules
//
// The client refuses, with an error, to create a mirror for a pod that is not
// a static pod ([ErrNotStaticPod]) and to delete a pod that is not a mirror
// pod ([ErrNotMirrorPod]): a node agent must never publish an arbitrary pod
// as a mirror, nor delete a pod the API server owns.
//
// # Where podkit differs from the kubelet
//
//   - Creating a mirror that already exists with the same hash is a success;
//     with a different hash it is an error naming both hashes
//     ([ErrHashMismatch]). The kubelet meant the same but reports every
//     AlreadyExists as an error (SPEC decision D5).
//   - DeleteMirrorPod returns API errors other than NotFound and Conflict
//     instead of only logging them, and it checks the object before deleting
//     it (see [Client.DeleteMirrorPod]).
//
// # Concurrency
//
// The package functions are pure. A [Client] is safe for concurrent use.
package mirror
