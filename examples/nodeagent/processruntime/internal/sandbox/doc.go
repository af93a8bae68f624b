// Package sandbox is the process runtime's sandbox: a pod of its own
// namespaces, identity and root filesystem, with a small init as its PID 1
// that starts each container's process on request, in the container's
// view and identity, and reports its exit.
//
// Go cannot act between fork and exec, and a multithreaded Go process
// cannot enter another user namespace, nor a thread of it give a child a
// user namespace without forking the whole process (no vfork), so each
// step is the agent's own executable run again (/proc/self/exe, with
// MarkerEnv naming the stage; the package's init runs it, so any program
// or test binary linking the package can start it, as the log shim), or
// the program SpawnerOptions.Executable names (one linking this package,
// as processruntime's cmd/podkit-stages), whose stages then run it again
// in turn:
//
//  1. spawner, as host root, one for the runtime (Spawner): sets up each
//     pod's sandbox it is asked for on a thread of its own, in a mount
//     namespace of that thread's own: builds the pod's root (an overlay
//     with the host's root file system below and a private tmpfs above;
//     the host's other file systems read-only; the pod's own /dev, /tmp,
//     /run, /dev/shm; the masks, binds and volumes of Config) and starts
//     the init from there, as the runtime's child, then ends the thread;
//  2. init, the pod's PID 1, root of its user namespace, in new user,
//     mount, PID, IPC, UTS and network namespaces (those the pod does not
//     share with the host): mounts /proc, /sys, /dev/pts and /dev/mqueue,
//     sets the hostname and sysctls, brings loopback up, pivots into the
//     root, and serves the agent's control socket, reaping every process
//     of the pod;
//  3. container, one per process, in a mount namespace of its own: mounts
//     the container's volumes, makes the root read-only when asked (or,
//     for an exec, enters the mount namespace of the container it execs
//     into), takes the container's identity (no_new_privs, the
//     RuntimeDefault seccomp filter, capabilities, groups, user) and its
//     terminal as controlling terminal on one locked thread, and executes
//     the command.
//
// # Usage
//
// The runtime, for each pod:
//
//  1. Chooses a range of IDsPerPod host IDs no other live pod has (never
//     including host ID 0), and an empty StageDir and a Socket path in a
//     directory only it can reach.
//  2. Calls Spawner.Start with the pod's Config; the init is then the
//     runtime's child, and the runtime reaps it (its exit is the pod's sandbox
//     ending: in its PID namespace, every process of the pod ends with it).
//  3. Dials the Socket, and runs each container with Create (its stdout,
//     stderr and perhaps stdin, the log shim's pipes, cross into the pod;
//     or a terminal the init opens in the pod, whose master comes back),
//     records the host PID, then Start; Wait returns its exit, Signal
//     signals its process group, Forget drops it once its exit is
//     recorded. An exec into a container is a process like the others,
//     entering the container's view (ProcessSpec.ViewOf).
//  4. After a restart of the agent, Dials again and Lists: what still
//     runs, and how what ended while no agent was connected ended.
//  5. Stops the pod by killing the init (SIGKILL, from the host).
//
// # Concurrency
//
// Dial may be called from any goroutine. A Spawner's and a Conn's methods
// are safe for concurrent use; each has one goroutine reading its peer's
// messages (the spawner's, the init's), ended by Close (or the peer's
// end).
//
// # What the sandbox cannot do
//
//   - The host's root file system is the overlay's lower layer while it
//     changes under the pod: what the pod has looked up may not show a
//     later change on the host (overlayfs calls that undefined, not
//     unsafe). A file the host changes after the pod wrote its own copy of
//     it keeps the pod's copy.
//   - The pod's root filesystem, /tmp, /run and /dev/shm are the pod's, not
//     each container's: containers of a pod see each other's writes there
//     (a kubelet gives each container its own root). They share the pod's
//     PID namespace too, as with shareProcessNamespace: true.
//   - Files of the host belong to IDs the pod's user namespace does not map
//     (they show as nobody): the pod reads what others may read and writes
//     nothing of the host's, whatever its capabilities. Its writes to
//     directories the host owns (/etc, /usr) fail; it writes its "/" and
//     directories anyone may write (/var/tmp), privately.
//   - Masks hide paths the agent names; anything else the host lets
//     everyone read, the pod reads too.
//   - A container holding CAP_SYS_ADMIN (asked for, in the pod's user
//     namespace) can uncover the pod's staged volumes (volumesRoot) and
//     /proc's masked files: it sees its own pod's volumes, nothing of the
//     host's.
//   - Under RuntimeDefault only the agent's architecture runs (amd64 or
//     arm64; no 32-bit programs); elsewhere the filter does not exist
//     (SeccompSupported).
//   - A process entering another's view (ViewOf) enters its mount
//     namespace as it is: what that process mounted itself is seen, and
//     the view cannot take mounts of its own.
//   - With HostPID, killing the init does not end the pod's processes;
//     the runtime's cgroup does. With HostNetwork or without a user
//     namespace, /sys is the host's (read-only unless privileged).
package sandbox
