//go:build linux

package sandbox

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// The init: the pod's PID 1, root of its user namespace. It finishes the
// pod's root (what only the pod's own namespaces can mount: /proc, /sys,
// /dev/pts, /dev/mqueue), names the pod's host, brings its loopback up,
// sets its sysctls, moves into the root (pivot_root) leaving the host's
// mounts behind, and then serves the control socket (server_linux.go)
// and reaps every process of the pod, until it is killed. Signals sent to
// it from inside the pod are ignored; SIGKILL from the host ends it, and
// with it (in its PID namespace) every process of the pod.

func initMain() error {
	for _, fd := range []int{initFDListener, initFDConfig, initFDReady} {
		syscall.CloseOnExec(fd)
	}
	// Not dumpable: the pod's processes, though the same user, can
	// neither trace it nor open its /proc entries (its descriptors).
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("making the init undumpable: %w", err)
	}
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1,
		syscall.SIGUSR2, syscall.SIGPIPE, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU)
	ready := os.NewFile(initFDReady, "ready")
	var ic initConfig
	if err := json.NewDecoder(io.LimitReader(os.NewFile(initFDConfig, "config"), maxFrame)).Decode(&ic); err != nil {
		fmt.Fprintf(ready, "error reading the init's configuration: %v\n", oneLine(err))
		return err
	}
	if err := finishRoot(&ic.Config); err != nil {
		fmt.Fprintf(ready, "error setting up the pod: %v\n", oneLine(err))
		return err
	}
	if ic.Config.HostPID {
		// Not PID 1 of the pod's processes: adopt their orphans anyway.
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			fmt.Fprintf(ready, "error becoming the pod's subreaper: %v\n", oneLine(err))
			return err
		}
	}
	lf := os.NewFile(initFDListener, "listener")
	l, err := net.FileListener(lf)
	lf.Close()
	if err != nil {
		fmt.Fprintf(ready, "error using the control socket: %v\n", oneLine(err))
		return err
	}
	fmt.Fprintln(ready, "ok")
	ready.Close()
	return newServer().serve(l.(*net.UnixListener))
}

// finishRoot mounts what the pod's namespaces own into the pod's root,
// then makes it the init's root and detaches the host's mounts. The init
// starts in the root (its working directory) and works there by relative
// paths: the path to it leads through directories only host root may
// enter.
func finishRoot(c *Config) error {
	// The root's mount came from the setup's namespace, locked to
	// the mounts around it, and pivot_root moves no locked mount: bind it
	// on itself (a mount of the init's own, with the rest below it), and
	// step into the new mount through the stage directory (which others
	// may pass through, not read).
	if err := unix.Mount(".", "../root", "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("binding the pod's root on itself: %w", err)
	}
	if err := unix.Chdir("../root"); err != nil {
		return fmt.Errorf("entering the pod's root: %w", err)
	}
	if !c.HostPID {
		if err := unix.Mount("proc", "proc", "proc", nosuid|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("mounting the pod's /proc: %w", err)
		}
	}
	if ownNetNS(c) && c.HostID != 0 {
		// Shows the pod's network namespace. Without it, /sys stays empty.
		if err := unix.Mount("sysfs", "sys", "sysfs", nosuid|unix.MS_NOEXEC|unix.MS_RDONLY, ""); err != nil {
			fmt.Fprintf(os.Stderr, "podkit sandbox init: no /sys in the pod: %v\n", err)
		}
	}
	if !c.Privileged {
		if err := unix.Mount("devpts", "dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620,gid=5"); err != nil {
			return fmt.Errorf("mounting the pod's /dev/pts: %w", err)
		}
		if !c.HostIPC {
			if err := unix.Mount("mqueue", "dev/mqueue", "mqueue", nosuid|unix.MS_NOEXEC, ""); err != nil {
				return fmt.Errorf("mounting the pod's /dev/mqueue: %w", err)
			}
		}
	}
	if !c.HostNetwork && c.Hostname != "" {
		if err := unix.Sethostname([]byte(c.Hostname)); err != nil {
			return fmt.Errorf("setting the pod's hostname: %w", err)
		}
	}
	if ownNetNS(c) {
		if err := loopbackUp(); err != nil {
			return fmt.Errorf("bringing the pod's loopback up: %w", err)
		}
	}
	// Those of a joined network namespace were set by the setup.
	if err := setSysctls(c.Sysctls, false, "proc"); err != nil {
		return err
	}
	if ownNetNS(c) {
		if err := setSysctls(c.Sysctls, true, "proc"); err != nil {
			return err
		}
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("moving into the pod's root: %w", err)
	}
	// The host's root is now mounted on top of the pod's: detach it, and
	// every mount below it.
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the host's mounts: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	return maskProc()
}

// ownNetNS reports whether the init made the pod's network namespace.
func ownNetNS(c *Config) bool { return !c.HostNetwork && !c.JoinNetNS }

// loopbackUp brings up lo, the only interface of a new network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// The parts of /proc a pod does not need, as runc hides them: files
// covered by /dev/null, directories by an empty tmpfs, and trees made
// read-only. A container with procMount Unmasked takes the covers off in
// its own mount namespace (unmaskProc).
var (
	procMaskedFiles = []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug", "/proc/latency_stats"}
	procMaskedDirs  = []string{"/proc/acpi", "/proc/scsi", "/sys/firmware"}
	procReadOnly    = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// maskProc covers what procMaskedFiles and the others name, if present.
func maskProc() error {
	for _, p := range procMaskedFiles {
		if fi, err := os.Lstat(p); err != nil || fi.IsDir() {
			continue
		}
		if err := unix.Mount("/dev/null", p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("masking %s: %w", p, err)
		}
	}
	for _, p := range procMaskedDirs {
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
			continue
		}
		if err := unix.Mount(tmpfs, p, tmpfs, nosuid|unix.MS_NOEXEC|unix.MS_RDONLY, "size=0"); err != nil {
			return fmt.Errorf("masking %s: %w", p, err)
		}
	}
	for _, p := range procReadOnly {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("protecting %s: %w", p, err)
		}
		if err := unix.MountSetattr(unix.AT_FDCWD, p, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return fmt.Errorf("protecting %s: %w", p, err)
		}
	}
	return nil
}

// unmaskProc takes off, in the calling mount namespace, what maskProc
// put on (innermost first).
func unmaskProc() error {
	all := append(append(append([]string(nil), procMaskedFiles...), procMaskedDirs...), procReadOnly...)
	for i := len(all) - 1; i >= 0; i-- {
		if err := unix.Unmount(filepath.Clean(all[i]), unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
			return fmt.Errorf("unmasking %s: %w", all[i], err)
		}
	}
	return nil
}
