// Package volume prepares the content of a pod's volumes as the kubelet's
// volume manager does for the volume types that need no storage system:
// configMap, secret, downwardAPI, emptyDir (on disk or in memory, with
// sizeLimit) and projected volumes (configMap, secret, downwardAPI and
// serviceAccountToken sources). It writes each volume into a directory of
// its own on the node, keeps it up to date with its sources, and removes
// it when the engine's window says the pod's content may go. How a volume
// is mounted into a container is the runtime's part: the Manager answers
// "the host path of volume V of pod P" (HostPath), resolves subPaths
// safely (SubPath, OpenSubPath), and opens env files for podenv
// (OpenVolumeFile).
//
// The Manager keeps no idea of its own of a pod's state: it asks the
// engine, by UID, through ContentRemovalChecker (two methods of
// *podworker.PodWorkers), whether the pod's containers may still run
// (then its volumes are refreshed) and whether its content may be removed
// (then its volumes are torn down). Secrets and config maps come through
// podenv.Objects (the same getter as the environment's), tokens through
// TokenRequester, file owners through IDMapper, memory file systems
// through Tmpfs.
//
// # Usage
//
// The embedder:
//
//  1. Creates one Manager with New(root, objects, engine, Options{...})
//     and runs it: go m.Run(ctx). Run refreshes every volume each
//     RefreshInterval, refreshes tokens when due, measures sizeLimits, and
//     tears down the volumes of pods whose content may go (pods of an
//     earlier run of the agent found under root too).
//  2. Refuses, in its admission, pods with volumes the Manager does not
//     prepare: Unsupported(pod), with ReasonUnsupportedVolume (dropping
//     hostPath volumes first, with Without(TypeHostPath), if its runtime
//     mounts those).
//  3. In its SyncPod, before it starts any container, calls SetUp(ctx,
//     pod) at every sync; on an error, starts no container and returns the
//     error (the engine retries, the kubelet's pod waits the same way),
//     events already recorded. Then, for each container's volume mount,
//     mounts HostPath(pod.UID, name) (or OpenSubPath for a subPath, after
//     podenv's ExpandSubPathExpr for a subPathExpr) at its mountPath,
//     read-only for configMap, secret, downwardAPI and projected volumes
//     as on a kubelet, and read-only or not as the mount asks for emptyDir.
//  4. In its SyncTerminatedPod, may call TearDown(pod.UID) so a deleted
//     pod's volumes go at once; Run does it otherwise.
//  5. Sets Options.Evict to evict a pod whose emptyDir exceeds its
//     sizeLimit (the kubelet's eviction manager does), Options.RequestSync
//     to the engine's Resync (a pod whose volumes a refresh made ready
//     starts at once), and gives the Manager to
//     podenv.Options.VolumeFiles for fileKeyRef variables.
//
// # How a runtime uses it
//
// Each volume is a directory, <root>/<pod UID>/<volume name>, on the
// node's file system (memory volumes and every secret or token on a tmpfs):
// a process runtime bind-mounts it, or the descriptor OpenSubPath returns
// (/proc/self/fd/N), into the pod's mount namespace; a CRI runtime passes
// it as a Mount's host_path (with the descriptor's path for a subPath, as
// the kubelet does). The files of configMap, secret, downwardAPI and
// projected volumes are links into ..data, which is swapped in one rename
// at each update: mount the volume's directory, not a file in it, for a
// container to see updates (a subPath mount of a file is fixed at mount
// time, as on a kubelet). Files belong to the host ids IDMapper gives the
// pod's root (or fsGroup, or a file's user), so a runtime that maps the
// pod's ids in a user namespace gives its mapping and the pod sees its own
// ids.
//
// # Concurrency
//
// Every method is safe for concurrent use. Calls for one pod (SetUp,
// TearDown, SubPath, OpenSubPath, OpenVolumeFile, and Run's refresh and
// teardown of it) are serialized; calls for different pods run at once.
// The getter, the TokenRequester, IDMapper, Tmpfs, NodeAllocatable and
// Evict are called on the goroutine of the call that needs them (Run's for
// refreshes), never under the Manager's lock; each surviving a panic of
// theirs (the volume fails, saying so). Run starts no goroutine and
// returns once ctx ends.
//
// # Bounds
//
// What outsiders control is bounded: a secret or config map larger than
// the API allows (1 MiB) fails its volume; so do a volume of more than
// Options.MaxVolumeFiles files (4096) or Options.MaxVolumeBytes bytes (8
// MiB), a token larger than 64 KiB, and a path that is empty, absolute,
// holds "..", starts with ".." (the writer's names), or has a component
// over 255 bytes or a length over 4096. Measuring an emptyDir's sizeLimit
// walks at most Options.MaxUsageEntries entries (a million): one with more
// is over its limit. A subPath walk follows at most 40 links, never out of
// the volume. Secrets and tokens are never logged, nor put in an error.
//
// # Where it differs from the kubelet
//
//   - Volumes are removed only when the window says the pod's content may
//     be removed (deleted and terminated, or evicted); the kubelet
//     unmounts them once the pod is terminated, and removes the pod's
//     directory later. A pod that completed and is still desired keeps
//     its volumes (no longer refreshed) until it is deleted.
//   - A change of a source is seen at the next SetUp (each sync of the
//     pod: the agent's getter may ask for one when an object changes) or
//     the next refresh of Run, whichever comes first; the kubelet's is at
//     the pod's next sync only. Tokens are refreshed by Run when due
//     (80% of their lifetime, or 24 hours), without the kubelet's jitter.
//   - An unchanged source writes nothing, a change of mode or owner alone
//     rewrites the volume (the kubelet compares contents only). The
//     previous version's directory stays until the next update (the
//     kubelet removes it at once), so a reader resolving a path through
//     ..data as it is swapped finds the previous file, not none.
//   - The alpha fields emptyDir mode and the user/defaultUser of files are
//     honoured; clusterTrustBundle and podCertificate projections, and
//     every volume type beyond the five above, are refused (Unsupported).
//   - configMap and downwardAPI volumes are on disk, secret and projected
//     volumes and memory emptyDirs on a tmpfs, as on a kubelet; a volume's
//     directory is 0755 (with the set-group-id bit and group read under
//     an fsGroup) rather than the kubelet's 01777 for memory volumes
//     (containers mount them read-only).
//   - sizeLimit of an emptyDir on disk is measured by Run and enforced
//     through Options.Evict (without it: an event only); the kubelet's
//     eviction manager evicts the pod.
package volume
