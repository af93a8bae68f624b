package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ProcessSpec is one process to run in the sandbox: a container's main
// process, or an exec into one.
type ProcessSpec struct {
	// Args is the command and its arguments. Args[0] is looked up in the
	// PATH of Env when it holds no slash.
	Args []string `json:"args"`
	// Env is the process's environment, "KEY=value" each.
	Env []string `json:"env,omitempty"`
	// Dir is the working directory, in the pod's view. Defaults to "/".
	Dir string `json:"dir,omitempty"`
	// UID, GID and Groups are the process's identity inside the pod.
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
	// Capabilities is the set the process keeps (a bit per capability,
	// see Capability): its bounding set, and its effective, permitted and
	// inheritable sets when it runs as UID 0. Those of the pod's user
	// namespace, never the host's (unless Config.HostID is 0).
	Capabilities CapabilitySet `json:"capabilities"`
	// AllCapabilities gives the process every capability it may hold
	// instead: its bounding set, the one the agent has (a privileged
	// container). Capabilities beyond that set are refused.
	AllCapabilities bool `json:"allCapabilities,omitempty"`
	// NoNewPrivileges sets no_new_privs (allowPrivilegeEscalation: false).
	NoNewPrivileges bool `json:"noNewPrivileges,omitempty"`
	// Seccomp is the system call filter: "" for none (Unconfined) or
	// SeccompRuntimeDefault.
	Seccomp string `json:"seccomp,omitempty"`
	// ReadOnlyRoot makes the root filesystem, /tmp and /run read-only for
	// this process (readOnlyRootFilesystem); its volumes and /dev/shm stay
	// as they are mounted.
	ReadOnlyRoot bool `json:"readOnlyRoot,omitempty"`
	// UnmaskedProc leaves /proc as the kernel shows it (procMount:
	// Unmasked) instead of hiding and write-protecting its host-wide
	// files.
	UnmaskedProc bool `json:"unmaskedProc,omitempty"`
	// Mounts are the volumes the process sees, in order.
	Mounts []Mount `json:"mounts,omitempty"`
	// ViewOf names a running process of the sandbox whose mount
	// namespace this process enters, seeing what it sees (its volumes, its
	// read-only root, its /proc), instead of a view of its own: an exec
	// into a container. Mounts, ReadOnlyRoot and UnmaskedProc must then
	// be unset; they are the other process's already.
	ViewOf string `json:"viewOf,omitempty"`
}

// SeccompRuntimeDefault is the default seccomp filter (see the package
// doc).
const SeccompRuntimeDefault = "RuntimeDefault"

// Mount mounts volume Volume (its SubPath, when set) at Target.
type Mount struct {
	Volume   string `json:"volume"`
	SubPath  string `json:"subPath,omitempty"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
	// RecursiveReadOnly makes what is mounted below the volume read-only
	// too (recursiveReadOnly); ReadOnly alone leaves it as it is.
	RecursiveReadOnly bool `json:"recursiveReadOnly,omitempty"`
}

// ErrGone is returned by a Conn's methods once the connection has ended:
// the init died (and with it the pod, in its PID namespace), or Close
// was called.
var ErrGone = errors.New("sandbox: the connection to the pod's init has ended")

// Process is a process Create made.
type Process struct {
	// PodPID is its PID in the pod's PID namespace; HostPID on the host.
	PodPID, HostPID int
	// Terminal is the master of its terminal (Stdio.TTY), the caller's to
	// close; nil without.
	Terminal *os.File
}

// Stdio is what Create gives a process as its standard streams.
type Stdio struct {
	// Stdout and Stderr are its output; both required without TTY, both
	// nil with it.
	Stdout, Stderr *os.File
	// Stdin is its input; nil: /dev/null. Nil with TTY.
	Stdin *os.File
	// TTY gives it a terminal opened in the pod instead: its stdin,
	// stdout, stderr and controlling terminal, whose master
	// Process.Terminal is.
	TTY bool
}

// fds returns the descriptors create sends, or what is wrong with s.
func (s Stdio) fds() ([]int, error) {
	if s.TTY {
		if s.Stdout != nil || s.Stderr != nil || s.Stdin != nil {
			return nil, errors.New("sandbox: a process with a terminal takes no other stdin, stdout or stderr")
		}
		return nil, nil
	}
	if s.Stdout == nil || s.Stderr == nil {
		return nil, errors.New("sandbox: a process needs a stdout and a stderr")
	}
	fds := []int{int(s.Stdout.Fd()), int(s.Stderr.Fd())}
	if s.Stdin != nil {
		fds = append(fds, int(s.Stdin.Fd()))
	}
	return fds, nil
}

// ExitStatus is how a process of the sandbox ended.
type ExitStatus struct {
	// Code is the exit code, or 128+Signal when a signal ended it.
	Code int `json:"code"`
	// Signal is the signal that ended it, 0 if none.
	Signal int `json:"signal,omitempty"`
}

// The states of a process in ProcessState.
const (
	// StateCreated: created, its command not started yet.
	StateCreated = "created"
	// StateRunning: its command runs.
	StateRunning = "running"
	// StateExited: it ended (Exit says how) and was reaped.
	StateExited = "exited"
)

// ProcessState is one process the init knows, as List returns it.
type ProcessState struct {
	Name  string      `json:"name"`
	State string      `json:"state"`
	Exit  *ExitStatus `json:"exit,omitempty"`
	// PodPID is its PID in the pod's PID namespace.
	PodPID int `json:"pid,omitempty"`
	// HostPID is its PID on the host, read from the pidfd the init sent
	// (0 when it has ended). Filled in by the agent's side.
	HostPID int `json:"-"`
	// hasFD: a pidfd follows for this process.
	HasFD bool `json:"hasFD,omitempty"`
}

// Validate reports what is wrong with s.
func (s *ProcessSpec) Validate() error {
	if len(s.Args) == 0 || s.Args[0] == "" {
		return errors.New("sandbox: the process has no command")
	}
	if s.UID >= IDsPerPod || s.GID >= IDsPerPod {
		return fmt.Errorf("sandbox: user %d or group %d is outside the pod's IDs (0-%d)", s.UID, s.GID, IDsPerPod-1)
	}
	for _, g := range s.Groups {
		if g >= IDsPerPod {
			return fmt.Errorf("sandbox: group %d is outside the pod's IDs (0-%d)", g, IDsPerPod-1)
		}
	}
	if s.Seccomp != "" && s.Seccomp != SeccompRuntimeDefault {
		return fmt.Errorf("sandbox: unknown seccomp profile %q", s.Seccomp)
	}
	if s.Dir != "" && !filepath.IsAbs(s.Dir) {
		return fmt.Errorf("sandbox: working directory %q is not absolute", s.Dir)
	}
	if s.ViewOf != "" && (len(s.Mounts) > 0 || s.ReadOnlyRoot || s.UnmaskedProc) {
		return fmt.Errorf("sandbox: a process entering the view of %q takes its mounts as they are, so it cannot have its own", s.ViewOf)
	}
	for _, m := range s.Mounts {
		if !safeName(m.Volume) || !cleanAbs(m.Target) || m.Target == "/" {
			return fmt.Errorf("sandbox: mount of volume %q at %q is not valid", m.Volume, m.Target)
		}
		if m.SubPath != "" && (filepath.IsAbs(m.SubPath) || !filepath.IsLocal(m.SubPath)) {
			return fmt.Errorf("sandbox: subPath %q must be a relative path inside its volume", m.SubPath)
		}
	}
	return nil
}
