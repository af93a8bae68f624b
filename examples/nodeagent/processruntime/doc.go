// Package processruntime is a podworker.PodSyncer that runs each container
// of a pod as a local OS process: the runtime of the example node agent,
// and a complete model of what a runtime owes the pod workers.
//
// A container is its command and args, run with its env in its workingDir
// (by default the pod's scratch directory), as the leader of a process
// group of its own, its stdout and stderr drained by a log shim into
// rotated log files (see Logs below). The image is
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
//     exits (lifecycle.Handler.HandlePodSyncs), so restarts and completion
//     are acted on at once rather than at the next resync.
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
// readable (ReadLogs, PodStatus) while config has the pod, and removed by
// PruneTombstones once it has not. A restarted agent reads tombstones back,
// so a pod that finished under its restart policy is reported terminal by
// SyncPod instead of running again, while a container due for a restart
// (restartPolicy Always) is started again. A UID cleaned up in the same
// run starts clean when it is synced again. One Runtime at a time may use
// a state directory.
//
// # Logs
//
// Each container instance (its first run, then each restart) writes to
// two pipes held by a log shim: the agent's own executable run again
// (/proc/self/exe, with an environment marker the package's init
// recognises, so any program or test binary linking the package can start
// it). The shim stamps each line with the time it read it and its stream,
// splits lines longer than 16 KiB into partial records, and appends them
// in the CRI log format (the kubelet's) to the container's log files under
// LogDir, starting a new file when one would exceed
// Options.ContainerLogMaxSize and deleting the oldest beyond
// Options.ContainerLogMaxFiles, across the container's instances. So a
// container's logs never take more than MaxSize*MaxFiles bytes on disk,
// and neither the shim nor the agent holds more than a line in memory.
// ReadLogs serves them as `kubectl logs` does (Follow, Previous,
// Timestamps, TailLines, SinceTime, LimitBytes).
//
// The shim runs in a process group of its own and does not carry the
// PODKIT_* variables: it is not a process of the pod, and it outlives the
// agent as the container does, so a restarted agent loses no line and the
// container is neither killed by SIGPIPE nor blocked on a full pipe while
// no agent runs. It ends at end of file, once the container and every
// process holding its stdout or stderr are gone, after writing everything
// it read. A container's exit is recorded once its shim has ended (its log
// is complete then), or after Options.KillTimeout if something outside the
// container still holds its output; SyncTerminatingPod waits for the
// pod's shims the same way and kills one still running after KillTimeout.
//
// What is lost: lines rotated away by the cap; output a reader does not
// get to before it is rotated away; and output the shim cannot write
// (disk full, the directory removed), which it counts and reports in the
// log as a stderr line once writing works again. A line a container
// writes without a newline shows once the line is complete, 16 KiB long,
// or the stream ends. Killing a shim (SIGKILL) loses what it had read but
// not written, and the container's next write gets SIGPIPE.
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
