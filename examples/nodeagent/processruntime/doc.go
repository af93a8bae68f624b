// Package processruntime is a podworker.PodSyncer that runs each container
// of a pod as a local OS process: the runtime of the example node agent,
// and a complete model of what a runtime owes the pod workers.
//
// A container is its command and args, run with its env in its workingDir
// (by default the pod's scratch directory), as the leader of a process
// group of its own, with its output appended to a log file. The image is
// recorded, never pulled. Restarts follow the pod's restartPolicy with the
// kubelet's exponential backoff; init containers run first, in order, each
// to success. Termination is SIGTERM to each group, the grace period, then
// SIGKILL; a cancelled context escalates at once.
//
// # Usage
//
//  1. Open a Runtime over a state directory. Processes a previous run left
//     there are adopted (they keep running) and their pods listed by
//     RuntimePods.
//  2. Give it to podworker.New as the PodSyncer and as Options.Status
//     (T is PodStatus); it is also a podworker.RuntimePodSyncer, so
//     housekeeping can kill pods no config wants.
//  3. Set Options.OnEvent and sync a pod again when one of its containers
//     exits (podworker.PodWorkers.Resync), so restarts and completion are
//     acted on at once rather than at the next resync.
//  4. Give lifecycle.Options.RuntimePods a lister over RuntimePods, and
//     reject in admission the pods ValidatePod refuses.
//  5. From housekeeping, once every config source has delivered its pods,
//     call PruneTombstones with whether config still has each UID, so the
//     logs of a pod that ended last as long as the pod is in config.
//  6. Turn a PodStatus into a v1.PodStatus with APIStatus.
//
// # State directory
//
// Each pod has a directory named by its UID, holding its identity, one
// record per container (PID, process group, start time in clock ticks
// since boot, and the boot ID, so a reused PID is never taken for the
// container's process), its logs and its scratch directory.
// SyncTerminatedPod removes the scratch directory and keeps the rest as the
// pod's tombstone: its logs and its containers' final states, still
// readable (LogPath, PodStatus) while config has the pod, and removed by
// PruneTombstones once it has not. A restarted agent reads tombstones back,
// so a pod that finished under its restart policy is reported terminal by
// SyncPod instead of running again, while a container due for a restart
// (restartPolicy Always) is started again. A UID cleaned up in the same
// run starts clean when it is synced again. One Runtime at a time may use
// a state directory.
//
// # Concurrency
//
// Every method is safe for concurrent use; the hooks of one pod must not
// overlap, as the engine guarantees. One goroutine waits for each running
// process and ends with it; one polls each adopted process until it ends
// or Close is called.
//
// The runtime reads /proc, so it works on Linux only; elsewhere Open
// returns an error.
package processruntime
