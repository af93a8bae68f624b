//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The container stage: started by the init in a mount namespace of its
// own (a copy of the pod's) and a session of its own, with the container's
// stdin, stdout and stderr (or its terminal), its control socket on
// descriptor 3, and, for a process entering another's view, that view's
// mount namespace on descriptor 4. It reads its ProcessSpec, builds the
// container's view (its volumes at their mount paths, the volumes'
// staging covered, readOnlyRootFilesystem, procMount) or enters the other's,
// finds its command, takes on its identity (no_new_privs, seccomp, the
// capability bounding set, groups, group, user, capabilities) on this one
// locked OS thread, says "ready", waits for "go", and executes the
// command. An error at any step is sent back, and the stage exits.
//
// The identity is set with raw system calls on this thread only: the
// execve that follows replaces the process with this thread alone, with
// its credentials, so the runtime's other threads (still root in the pod)
// never run again.

// The stage's descriptors beyond its standard streams.
const (
	containerFDControl = 3
	// containerFDView is the mount namespace of the process whose view
	// this one enters (ProcessSpec.ViewOf).
	containerFDView = 4
)

func containerMain() error {
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return err
	}
	syscall.CloseOnExec(containerFDControl)
	ctl, err := fileConn(containerFDControl)
	if err != nil {
		return fmt.Errorf("using the control socket: %w", err)
	}
	m, _, err := readFrame(ctl)
	if err != nil || m.Spec == nil {
		return fmt.Errorf("reading the process's spec: %v", err)
	}
	spec := m.Spec
	path, err := prepareProcess(spec, m.TTY)
	if err != nil {
		_ = writeFrame(ctl, &message{Op: "error", Error: err.Error()}, nil)
		os.Exit(1)
	}
	if err := writeFrame(ctl, &message{Op: "ready"}, nil); err != nil {
		os.Exit(1)
	}
	if m, _, err := readFrame(ctl); err != nil || m.Op != "go" {
		os.Exit(1)
	}
	// The control socket is close-on-exec: a successful execve closes it,
	// which the init takes as the command started.
	err = syscall.Exec(path, spec.Args, spec.Env)
	_ = writeFrame(ctl, &message{Op: "error", Error: fmt.Sprintf("starting %q: %v", path, err)}, nil)
	os.Exit(127)
	return nil
}

// prepareProcess builds the process's view (or enters another's) and
// identity, makes its terminal (tty) its controlling terminal, and returns
// the path of its command.
func prepareProcess(s *ProcessSpec, tty bool) (string, error) {
	if s.ViewOf != "" {
		if err := enterView(); err != nil {
			return "", fmt.Errorf("entering the view of %q: %w", s.ViewOf, err)
		}
	}
	if tty {
		// A session leader already (the init starts the stage so): the
		// terminal on stdin becomes its controlling terminal, and the
		// process's user owns it, as a terminal's user does.
		if err := unix.IoctlSetInt(0, unix.TIOCSCTTY, 0); err != nil {
			return "", fmt.Errorf("making the terminal the controlling terminal: %w", err)
		}
		if err := unix.Fchown(0, int(s.UID), -1); err != nil {
			return "", fmt.Errorf("giving the terminal to user %d: %w", s.UID, err)
		}
	}
	if s.ViewOf == "" {
		// (Another's view is taken as it is: its volumes are in place, and
		// their staging covered.)
		if err := mountVolumes(s.Mounts); err != nil {
			return "", err
		}
	}
	if s.ReadOnlyRoot {
		for _, p := range []string{"/", "/tmp", "/run"} {
			if err := unix.MountSetattr(unix.AT_FDCWD, p, 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
				return "", fmt.Errorf("making %s read-only: %w", p, err)
			}
		}
	}
	if s.UnmaskedProc {
		if err := unmaskProc(); err != nil {
			return "", err
		}
	}
	dir := s.Dir
	if dir == "" {
		dir = "/"
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("working directory %q does not exist or is not a directory", dir)
	}
	if err := unix.Chdir(dir); err != nil {
		return "", fmt.Errorf("working directory %q: %w", dir, err)
	}
	path, err := LookPath(s.Args[0], envPath(s.Env), dir)
	if err != nil {
		return "", err
	}
	if err := setIdentity(s); err != nil {
		return "", err
	}
	return path, nil
}

// enterView moves this thread into the mount namespace on
// containerFDView. The thread first gets a filesystem context (root,
// working directory) of its own: setns refuses a mount namespace to a
// thread sharing it with others, as a Go program's threads do. The
// execve that follows keeps this thread's namespace, root and directory.
func enterView() error {
	defer unix.Close(containerFDView)
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return err
	}
	return unix.Setns(containerFDView, unix.CLONE_NEWNS)
}

// mountVolumes binds each mount's volume (or its subPath) at its target,
// parents before children, then covers the staged volumes.
func mountVolumes(mounts []Mount) error {
	ms := append([]Mount(nil), mounts...)
	sort.SliceStable(ms, func(i, j int) bool {
		return strings.Count(ms[i].Target, "/") < strings.Count(ms[j].Target, "/")
	})
	for _, m := range ms {
		if err := mountVolume(m); err != nil {
			return fmt.Errorf("mounting volume %q at %s: %w", m.Volume, m.Target, err)
		}
	}
	if _, err := os.Lstat(volumesRoot); err == nil {
		if err := unix.Mount(tmpfs, volumesRoot, tmpfs, nosuid|unix.MS_NOEXEC|unix.MS_RDONLY, "mode=0,size=4096"); err != nil {
			return fmt.Errorf("covering the pod's volumes: %w", err)
		}
	}
	return nil
}

func mountVolume(m Mount) error {
	vol, err := unix.Open(volumesDir+"/"+m.Volume, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("the volume is not there: %w", err)
	}
	defer unix.Close(vol)
	src := vol
	if m.SubPath != "" {
		if src, err = openSubPath(vol, m.SubPath); err != nil {
			return fmt.Errorf("subPath %q: %w", m.SubPath, err)
		}
		defer unix.Close(src)
	}
	var st unix.Stat_t
	if err := unix.Fstat(src, &st); err != nil {
		return err
	}
	if err := makeMountPoint(m.Target, st.Mode&unix.S_IFMT != unix.S_IFDIR); err != nil {
		return fmt.Errorf("creating the mount point: %w", err)
	}
	if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(src), m.Target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	if m.ReadOnly {
		flags := uint(0)
		if m.RecursiveReadOnly {
			flags = unix.AT_RECURSIVE
		}
		return unix.MountSetattr(unix.AT_FDCWD, m.Target, flags, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
	}
	return nil
}

// openSubPath opens sub inside the volume vol, never leaving it (a link
// in the volume pointing out of it is refused), creating it as a
// directory when it does not exist, as the kubelet does.
func openSubPath(vol int, sub string) (int, error) {
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(vol, sub, how)
	if err != unix.ENOENT {
		return fd, err
	}
	dir := "."
	for _, part := range strings.Split(filepath.Clean(sub), "/") {
		pfd, err := unix.Openat2(vol, dir, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: how.Resolve})
		if err != nil {
			return -1, err
		}
		err = unix.Mkdirat(pfd, part, 0o755)
		unix.Close(pfd)
		if err != nil && err != unix.EEXIST {
			return -1, err
		}
		dir = filepath.Join(dir, part)
	}
	return unix.Openat2(vol, sub, how)
}

// makeMountPoint creates path (a directory, or an empty file) unless it
// exists, and the directories above it, in the calling process's view.
func makeMountPoint(path string, file bool) error {
	if _, err := os.Lstat(path); err == nil {
		return nil
	}
	if !file {
		return os.MkdirAll(path, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil
		}
		return err
	}
	return f.Close()
}

// setIdentity gives this thread the process's identity. Order matters:
// no_new_privs and the seccomp filter first (installing a filter needs
// either no_new_privs or CAP_SYS_ADMIN, which is still held here), then
// the bounding set (dropping needs CAP_SETPCAP), then groups, group and
// user (keeping the permitted set across the change of user), then the
// capability sets themselves.
func setIdentity(s *ProcessSpec) error {
	if s.NoNewPrivileges {
		if err := prctl(unix.PR_SET_NO_NEW_PRIVS, 1); err != nil {
			return fmt.Errorf("setting no_new_privs: %w", err)
		}
	}
	if s.Seccomp == SeccompRuntimeDefault {
		if err := installSeccomp(s.Capabilities); err != nil {
			return fmt.Errorf("installing the seccomp filter: %w", err)
		}
	}
	last, err := lastCapability()
	if err != nil {
		return err
	}
	held, err := boundingSet(last)
	if err != nil {
		return err
	}
	if s.AllCapabilities {
		s.Capabilities = held
	}
	if missing := s.Capabilities &^ held; missing != 0 {
		return fmt.Errorf("capabilities %s are not in the agent's bounding set, so it cannot give them", missing)
	}
	for c := 0; c <= last; c++ {
		if c < 64 && s.Capabilities.Has(CapabilitySet(1)<<c) {
			continue
		}
		if err := prctl(unix.PR_CAPBSET_DROP, uintptr(c)); err != nil && err != unix.EINVAL {
			return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
		}
	}
	if err := prctl(unix.PR_SET_KEEPCAPS, 1); err != nil {
		return err
	}
	groups := s.Groups
	var gp unsafe.Pointer
	if len(groups) > 0 {
		gp = unsafe.Pointer(&groups[0])
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(gp), 0); e != 0 {
		return fmt.Errorf("setting supplementary groups %v: %w", groups, e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(s.GID), uintptr(s.GID), uintptr(s.GID)); e != 0 {
		return fmt.Errorf("setting group %d: %w", s.GID, e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(s.UID), uintptr(s.UID), uintptr(s.UID)); e != 0 {
		return fmt.Errorf("setting user %d: %w", s.UID, e)
	}
	if err := prctl(unix.PR_SET_KEEPCAPS, 0); err != nil {
		return err
	}
	caps := uint64(s.Capabilities)
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := [2]unix.CapUserData{
		{Effective: uint32(caps), Permitted: uint32(caps), Inheritable: uint32(caps)},
		{Effective: uint32(caps >> 32), Permitted: uint32(caps >> 32), Inheritable: uint32(caps >> 32)},
	}
	if _, _, e := unix.RawSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("setting capabilities %s: %w", s.Capabilities, e)
	}
	if err := prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL); err != nil && err != unix.EINVAL {
		return fmt.Errorf("clearing ambient capabilities: %w", err)
	}
	return nil
}

// prctl calls prctl(2) on this thread.
func prctl(option int, arg uintptr) error {
	if _, _, e := unix.RawSyscall6(unix.SYS_PRCTL, uintptr(option), arg, 0, 0, 0, 0); e != 0 {
		return e
	}
	return nil
}

// lastCapability is the highest capability number the kernel knows.
func lastCapability() (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, fmt.Errorf("reading the last capability: %w", err)
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// boundingSet reads this thread's capability bounding set.
func boundingSet(last int) (CapabilitySet, error) {
	var set CapabilitySet
	for c := 0; c <= last && c < 64; c++ {
		r, _, e := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0, 0)
		if e != 0 {
			return 0, fmt.Errorf("reading the bounding set: %w", e)
		}
		if r == 1 {
			set |= CapabilitySet(1) << c
		}
	}
	return set, nil
}
